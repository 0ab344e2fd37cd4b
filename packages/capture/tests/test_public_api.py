"""Pins the public symbols of `capture`: a change here is an API change."""

import capture


def test_version_is_single_sourced() -> None:
    from capture._version import __version__

    assert capture.__version__ == __version__


def test_all_names_exist() -> None:
    for name in capture.__all__:
        assert hasattr(capture, name), name
