"""Pins the public symbols of `codegen_triton`: a change here is an API change."""

import codegen_triton


def test_version_is_single_sourced() -> None:
    from codegen_triton._version import __version__

    assert codegen_triton.__version__ == __version__


def test_all_names_exist() -> None:
    for name in codegen_triton.__all__:
        assert hasattr(codegen_triton, name), name
