"""A damaged or unusable C++ kernel cache costs a rebuild and one warning: never an eager fallback,
a crash, or a wrong value.

Each test compiles through ``frontend.compile`` with ``fallback_to_eager=False`` (a fallback would
raise) and ``fullgraph=True``, against a cache folder damaged in one way.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

import codegen_cpp.compile.cache as cpp_cache
import frontend

STRICT = {"fallback_to_eager": False}


def _times(scale: float) -> Callable[[torch.Tensor], torch.Tensor]:
    """``sin(x) * scale + 1``: functions differing only in a constant get kernels of one name."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) * scale + 1

    return fn


def _compile_and_check(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    frontend.reset()
    compiled = frontend.compile(fn, options=STRICT, fullgraph=True)
    x = torch.randn(33, generator=torch.Generator().manual_seed(7))
    torch.testing.assert_close(compiled(x), fn(x), rtol=1e-5, atol=1e-6)
    assert compiled.kiln_context.graphs_compiled == 1


def _use_cache(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """Compile with Kiln's cache folder at `root` (the frontend hands it to the C++ backend)."""
    monkeypatch.setattr(frontend.config, "cache_dir", root)


def _entries(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("cpp/*/*/kernels.so"))


@pytest.fixture
def warnings_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cache faults warn once per process: start each test with none reported."""
    monkeypatch.setattr(cpp_cache, "_REPORTED", set())


def _wait_for_background_builds() -> None:
    """Join the precompiled-header build the first compile started: it writes a staging folder
    under the cache and renames it, which a copy taken meanwhile would race."""
    for thread in threading.enumerate():
        if thread.name == "kiln-precompile-header":
            thread.join()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache holding the libraries of ``_times(2.0)`` and ``_times(3.0)`` (built once)."""
    root = tmp_path_factory.mktemp("pristine")
    with pytest.MonkeyPatch.context() as patch:
        _use_cache(patch, root)
        _compile_and_check(_times(2.0))
        _compile_and_check(_times(3.0))
    _wait_for_background_builds()
    assert len(_entries(root)) == 2
    yield root


def _copy(pristine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    shutil.copytree(pristine, root)
    _use_cache(monkeypatch, root)
    return root


def _entry_of(root: Path, scale: float) -> Path:
    """The entry folder whose source computes ``* scale``."""
    (entry,) = [e for e in _entries(root) if f"{scale!r}f" in (e / "kernels.cpp").read_text()]
    return entry


@pytest.mark.usefixtures("warnings_reset")
def test_non_utf8_checksum_is_rebuilt(pristine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _copy(pristine, tmp_path, monkeypatch)
    (_entry_of(root, 2.0) / "kernels.so.sha256").write_bytes(b"\xff\xfe\x80 not a checksum \xc3")
    with pytest.warns(RuntimeWarning, match="record is damaged"):
        _compile_and_check(_times(2.0))


@pytest.mark.usefixtures("warnings_reset")
def test_truncated_library_is_rebuilt(pristine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _copy(pristine, tmp_path, monkeypatch)
    library = _entry_of(root, 2.0) / "kernels.so"
    library.write_bytes(library.read_bytes()[:200])
    with pytest.warns(RuntimeWarning, match="does not match its checksum"):
        _compile_and_check(_times(2.0))


@pytest.mark.usefixtures("warnings_reset")
def test_entries_of_two_keys_swapped_are_not_trusted(
    pristine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _copy(pristine, tmp_path, monkeypatch)
    two, three = _entry_of(root, 2.0), _entry_of(root, 3.0)
    # Each folder now holds the other key's library and a checksum that matches that library.
    for name in ("kernels.so", "kernels.so.sha256"):
        a, b = (two / name).read_bytes(), (three / name).read_bytes()
        (two / name).write_bytes(b)
        (three / name).write_bytes(a)
    with pytest.warns(RuntimeWarning, match="another key"):
        _compile_and_check(_times(2.0))
        _compile_and_check(_times(3.0))


@pytest.mark.usefixtures("warnings_reset")
def test_read_only_cache_folder_builds_in_a_private_folder(
    pristine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "readonly"
    (root / "cpp").mkdir(parents=True)
    _use_cache(monkeypatch, root)
    os.chmod(root / "cpp", 0o555)
    if os.geteuid() == 0:  # root writes through permission bits: refuse writes under `root` instead
        real = cpp_cache.atomic_write

        def refuse(path: Path, data: bytes) -> None:
            if root in path.parents:
                raise PermissionError(13, "Permission denied", str(path))
            real(path, data)

        monkeypatch.setattr(cpp_cache, "atomic_write", refuse)
    try:
        with pytest.warns(RuntimeWarning, match="cannot be used"):
            _compile_and_check(_times(2.5))
        _compile_and_check(_times(2.5))  # the private folder serves the process from now on
    finally:
        os.chmod(root / "cpp", 0o755)
    assert not _entries(root)


@pytest.mark.usefixtures("warnings_reset")
def test_file_in_place_of_the_cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where the cache folder should be")
    _use_cache(monkeypatch, blocker)
    with pytest.warns(RuntimeWarning, match="cannot be used"):
        _compile_and_check(_times(4.5))
    assert blocker.read_text() == "a file where the cache folder should be"


@pytest.mark.usefixtures("warnings_reset")
def test_missing_cache_folder_is_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "does" / "not" / "exist"
    _use_cache(monkeypatch, root)
    _compile_and_check(_times(5.5))
    assert len(_entries(root)) == 1
    assert not cpp_cache._REPORTED  # a missing folder is no fault
