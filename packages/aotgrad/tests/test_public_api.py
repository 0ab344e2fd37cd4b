"""Pins the public symbols of `aotgrad`: a change here is an API change."""

import aotgrad


def test_version_is_single_sourced() -> None:
    from aotgrad._version import __version__

    assert aotgrad.__version__ == __version__


def test_all_names_exist() -> None:
    for name in aotgrad.__all__:
        assert hasattr(aotgrad, name), name
