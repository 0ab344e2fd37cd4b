"""Pins the public symbols of `frontend`: a change here is an API change."""

import frontend


def test_version_is_single_sourced() -> None:
    from frontend._version import __version__

    assert frontend.__version__ == __version__


def test_all_names_exist() -> None:
    for name in frontend.__all__:
        assert hasattr(frontend, name), name
