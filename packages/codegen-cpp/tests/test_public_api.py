"""Pins the public symbols of `codegen_cpp`: a change here is an API change."""

import codegen_cpp


def test_version_is_single_sourced() -> None:
    from codegen_cpp._version import __version__

    assert codegen_cpp.__version__ == __version__


def test_all_names_exist() -> None:
    for name in codegen_cpp.__all__:
        assert hasattr(codegen_cpp, name), name
