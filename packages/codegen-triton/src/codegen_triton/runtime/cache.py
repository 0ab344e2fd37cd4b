"""Files in the cache folder: content-addressed names and atomic writes."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["atomic_write_text", "read_json", "source_hash"]


def source_hash(*parts: str) -> str:
    """A stable hex digest of some strings (kernel source, device name, versions...)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` so that readers see either the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with_suppressed_unlink(tmp)
        raise


def with_suppressed_unlink(path: str) -> None:
    """Remove a leftover temporary file, ignoring one that is already gone."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def read_json(path: Path) -> Any | None:
    """The JSON content of `path`, or None when it is missing or unreadable (a corrupt cache entry)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
