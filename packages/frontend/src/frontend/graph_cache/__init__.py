"""The graph cache: compiled graphs reused across processes (warm start), and bundles to ship them.

Each captured graph that the inductor backend compiles is saved under a key (`key.py`) covering the
graph, its inputs' metadata and shape constraints, the options, versions and device; a later
process that captures the same graph loads it instead of tracing, lowering, generating and
compiling again (`lookup.py`). Capture itself still runs: guards are built from the live objects.
Entries are checked on every load and written atomically (`store.py`, `codec.py`).

`save_cache_artifacts()` packs every entry this process wrote or read (each with its compiled
kernel libraries) into one bundle; `load_cache_artifacts(bundle)` puts a bundle's entries into
this process's cache folder, e.g. on a deployment machine before its first compile.

Example::

    frontend.compile(model)(x)                    # compiles, saves the graph
    bundle = frontend.save_cache_artifacts()      # bytes: ship them with the model
    ...
    frontend.load_cache_artifacts(bundle)         # elsewhere, before compiling
    frontend.compile(model)(x)                    # loads the graph: no compiling
"""

from __future__ import annotations

from frontend.config import config as default_config
from frontend.graph_cache.codec import CorruptEntry, decode_bundle, decode_entry, encode_bundle
from frontend.graph_cache.lookup import CachedCompile, GraphEntry, all_stores, store_for

__all__ = ["CachedCompile", "GraphEntry", "InvalidCacheBundleError", "load_cache_artifacts", "save_cache_artifacts"]


class InvalidCacheBundleError(ValueError):
    """`load_cache_artifacts` was given bytes that are not an intact bundle; nothing was loaded."""


def save_cache_artifacts() -> bytes:
    """A bundle of every graph-cache entry this process wrote, read or loaded, kernels included.

    Returns:
        Bytes for `load_cache_artifacts` (in another process, or on another machine of the same
        kind: an entry whose key does not match the machine's there is simply never used).
    """
    entries: dict[str, bytes] = {}
    for store in all_stores():
        entries.update(store.memory)
    return encode_bundle(entries)


def load_cache_artifacts(bundle: bytes) -> tuple[str, ...]:
    """Put the entries of `bundle` (from `save_cache_artifacts`) into the cache folder of
    ``frontend.config.cache_dir``, so that compiling those graphs loads them.

    Every entry is checked (size, checksum, its own key) before anything is written.

    Returns:
        The keys of the entries loaded.

    Raises:
        InvalidCacheBundleError: the bytes are not an intact bundle (truncated, corrupt).
    """
    try:
        entries = decode_bundle(bytes(bundle))
        for key, data in entries.items():
            decode_entry(key, data)
    except CorruptEntry as reason:
        raise InvalidCacheBundleError(f"not an intact Kiln cache bundle: {reason}") from None
    store = store_for(default_config.cache_dir)
    for key, data in entries.items():
        store.write(key, data)
    return tuple(entries)
