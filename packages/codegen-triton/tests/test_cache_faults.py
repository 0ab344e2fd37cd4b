"""A damaged or unusable Triton cache folder costs a rewrite and one warning, never an error or a
wrong launch configuration."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import codegen_triton.runtime.cache as triton_cache
from codegen_triton.runtime import LaunchConfig, TuningCache, load_kernel_module

SOURCE = "def answer():\n    return 42\n"
WIDE = LaunchConfig({"XBLOCK": 256, "RBLOCK": 2048}, 8, 2)
NARROW = LaunchConfig({"XBLOCK": 16, "RBLOCK": 64}, 2, 1)


@pytest.fixture(autouse=True)
def warnings_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cache faults warn once per process: start each test with none reported."""
    monkeypatch.setattr(triton_cache, "_REPORTED", set())


def _tuning_files(root: Path) -> list[Path]:
    return sorted((root / "triton" / "tuning").glob("*.json"))


def test_tuning_records_of_two_keys_swapped_are_not_trusted(tmp_path: Path) -> None:
    cache = TuningCache(tmp_path)
    cache.put("kernel_a", "dev", "64,2048,1", WIDE)
    cache.put("kernel_b", "dev", "64,64,1", NARROW)
    first, second = _tuning_files(tmp_path)
    a, b = first.read_bytes(), second.read_bytes()
    first.write_bytes(b)
    second.write_bytes(a)
    with pytest.warns(RuntimeWarning, match="another key"):
        assert cache.get("kernel_a", "dev", "64,2048,1") is None
    assert cache.get("kernel_b", "dev", "64,64,1") is None
    cache.put("kernel_a", "dev", "64,2048,1", WIDE)  # rewritten under its own key
    assert cache.get("kernel_a", "dev", "64,2048,1") == WIDE


def test_non_utf8_tuning_record_reads_as_missing(tmp_path: Path) -> None:
    cache = TuningCache(tmp_path)
    cache.put("kernel_a", "dev", "1,1,1", WIDE)
    (record,) = _tuning_files(tmp_path)
    record.write_bytes(b"\xff\xfe{\x80")
    with pytest.warns(RuntimeWarning, match="damaged"):
        assert cache.get("kernel_a", "dev", "1,1,1") is None


def test_unwritable_tuning_cache_keeps_going(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = TuningCache(blocker)
    with pytest.warns(RuntimeWarning, match="could not record"):
        cache.put("kernel_a", "dev", "1,1,1", WIDE)
    assert cache.get("kernel_a", "dev", "1,1,1") is None


def test_damaged_kernel_file_is_rewritten(tmp_path: Path) -> None:
    module = load_kernel_module(SOURCE, "kernel_damaged", tmp_path)
    assert module.__file__ is not None
    path = Path(module.__file__)
    path.write_bytes(b"\xff\xfe garbage \x80")
    assert load_kernel_module(SOURCE, "kernel_damaged", tmp_path).answer() == 42
    assert path.read_text() == SOURCE


@pytest.mark.parametrize("fault", ["file_in_place", "read_only"])
def test_unusable_kernel_folder_uses_a_private_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    root = tmp_path / "cache"
    if fault == "file_in_place":
        root.write_text("a file where the cache folder should be")
    else:
        root.mkdir()
        os.chmod(root, 0o555)
        if os.geteuid() == 0:  # root writes through permission bits: refuse writes under `root` instead
            real = triton_cache.atomic_write_text

            def refuse(path: Path, text: str) -> None:
                if root in path.parents:
                    raise PermissionError(13, "Permission denied", str(path))
                real(path, text)

            monkeypatch.setattr(triton_cache, "atomic_write_text", refuse)
    try:
        with pytest.warns(RuntimeWarning, match="cannot be used"):
            module = load_kernel_module(SOURCE + f"# {fault}\n", f"kernel_{fault}", root)
        assert module.answer() == 42
        assert module.__file__ is not None
        assert Path(module.__file__).is_relative_to(triton_cache.private_cache_root())
    finally:
        if root.is_dir():
            os.chmod(root, 0o755)
