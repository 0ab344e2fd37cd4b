"""Bytes of graph-cache entries and bundles: framing, checksums, and a restricted pickle.

An entry is ``MAGIC``, one JSON header line (``{"key", "sha256", "size"}``), then its payload: the
pickled `GraphEntry`. `decode_entry` trusts an entry only when its header names the key it was
looked up by, its payload has that size and digest, and the unpickled entry names that key too: a
truncated or corrupt file, or another key's entry put in its place, is refused with the reason.

Payloads are pickled with ATen ops written by name (``aten::add.Tensor``: they do not pickle
themselves) and unpickled by a restricted unpickler that resolves only classes of torch, sympy,
Kiln's packages and a few plain builtins. A checksum detects damage, not intent: a cache entry or
bundle holds generated code and compiled libraries that run in this process, so load only those
you trust, as you would a wheel.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import warnings
from typing import Any

import torch

__all__ = ["BUNDLE_MAGIC", "MAGIC", "CorruptEntry", "decode_bundle", "decode_entry", "encode_bundle", "encode_entry"]

MAGIC = b"kiln-graph-cache 1\n"
BUNDLE_MAGIC = b"kiln-graph-bundle 1\n"

_ALLOWED_ROOTS = frozenset(
    {"torch", "sympy", "mpmath", "aotgrad", "inductor_ir", "codegen_cpp", "codegen_triton", "frontend", "capture",
     "collections", "copyreg", "pathlib", "_codecs", "functools", "enum", "operator", "_operator", "math"}
)
_ALLOWED_BUILTINS = frozenset(
    {"tuple", "list", "dict", "set", "frozenset", "int", "float", "complex", "bool", "str", "bytes", "bytearray",
     "slice", "range", "type", "NoneType", "Ellipsis", "object"}
)


class CorruptEntry(Exception):
    """Bytes that are not a valid entry (or bundle) for the key asked for; the message says why."""


def _op_by_name(qualified: str, overload: str | None) -> Any:
    namespace, name = qualified.split("::", 1)
    packet = getattr(getattr(torch.ops, namespace), name)
    return packet if overload is None else getattr(packet, overload)


class _Pickler(pickle.Pickler):
    """Pickles ATen ops (and op packets) by their qualified name."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, torch._ops.OpOverload):
            return _op_by_name, (obj._schema.name, obj._overloadname)
        if isinstance(obj, torch._ops.OpOverloadPacket):
            return _op_by_name, (obj._qualified_op_name, None)
        return NotImplemented


class _Unpickler(pickle.Unpickler):
    """Resolves only the classes and functions a graph entry is made of."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in _ALLOWED_BUILTINS:
            return super().find_class(module, name)
        if module.split(".", 1)[0] in _ALLOWED_ROOTS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"a graph-cache entry may not refer to {module}.{name}")


def dumps(value: Any) -> bytes:
    """`value` pickled, with ATen ops by name."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buffer.getvalue()


def loads(data: bytes) -> Any:
    """The value `dumps` made of `data` (classes outside torch, sympy and Kiln refused)."""
    with warnings.catch_warnings():
        # torch's pytree warns about its own legacy spec classes while unpickling a TreeSpec.
        warnings.simplefilter("ignore", FutureWarning)
        return _Unpickler(io.BytesIO(data)).load()


def _frame(magic: bytes, header: dict[str, Any], payload: bytes) -> bytes:
    return magic + json.dumps(header, sort_keys=True).encode() + b"\n" + payload


def _unframe(magic: bytes, data: bytes, what: str) -> tuple[dict[str, Any], bytes]:
    if not data.startswith(magic):
        raise CorruptEntry(f"it is not a {what} of this format (bad magic)")
    end = data.find(b"\n", len(magic))
    if end < 0:
        raise CorruptEntry("its header is truncated")
    try:
        header = json.loads(data[len(magic):end])
    except ValueError as error:
        raise CorruptEntry(f"its header is damaged ({error})") from None
    if not isinstance(header, dict):
        raise CorruptEntry("its header is damaged")
    return header, data[end + 1 :]


def encode_entry(key: str, entry: Any) -> bytes:
    """The bytes of one entry stored under `key` (`entry` must carry the same `key`)."""
    payload = dumps(entry)
    header = {"key": key, "sha256": hashlib.sha256(payload).hexdigest(), "size": len(payload)}
    return _frame(MAGIC, header, payload)


def decode_entry(key: str, data: bytes) -> object:
    """The entry in `data`, checked against `key`.

    Raises:
        CorruptEntry: another key's entry, a truncated or corrupt payload, or one that does not unpickle.
    """
    header, payload = _unframe(MAGIC, data, "graph-cache entry")
    if header.get("key") != key:
        raise CorruptEntry("it holds another key's entry")
    if header.get("size") != len(payload):
        raise CorruptEntry(f"it is truncated ({len(payload)} of {header.get('size')} bytes)")
    if header.get("sha256") != hashlib.sha256(payload).hexdigest():
        raise CorruptEntry("its content does not match its checksum")
    try:
        entry = loads(payload)
    except Exception as error:
        raise CorruptEntry(f"it cannot be read back ({type(error).__name__}: {error})") from None
    if getattr(entry, "key", None) != key:
        raise CorruptEntry("its content names another key")
    return entry


def encode_bundle(entries: dict[str, bytes]) -> bytes:
    """One bundle of encoded entries by key (see `frontend.save_cache_artifacts`)."""
    index = [{"key": key, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()} for key, data in entries.items()]
    return _frame(BUNDLE_MAGIC, {"entries": index}, b"".join(entries.values()))


def decode_bundle(data: bytes) -> dict[str, bytes]:
    """The encoded entries of a bundle by key, each checked against its recorded size and digest.

    Raises:
        CorruptEntry: not a bundle, or truncated or damaged anywhere.
    """
    header, body = _unframe(BUNDLE_MAGIC, data, "Kiln cache bundle")
    index = header.get("entries")
    if not isinstance(index, list):
        raise CorruptEntry("its index is damaged")
    entries: dict[str, bytes] = {}
    offset = 0
    for item in index:
        try:
            key, size, digest = str(item["key"]), int(item["size"]), str(item["sha256"])
        except (KeyError, TypeError, ValueError):
            raise CorruptEntry("its index is damaged") from None
        chunk = body[offset : offset + size]
        offset += size
        if len(chunk) != size or hashlib.sha256(chunk).hexdigest() != digest:
            raise CorruptEntry(f"entry {key[:12]} is truncated or corrupt")
        entries[key] = chunk
    if offset != len(body):
        raise CorruptEntry("it has trailing bytes")
    return entries
