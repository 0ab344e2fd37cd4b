"""Pins the public symbols of `inductor_ir`: a change here is an API change."""

import inductor_ir


def test_version_is_single_sourced() -> None:
    from inductor_ir._version import __version__

    assert inductor_ir.__version__ == __version__


def test_all_names_exist() -> None:
    for name in inductor_ir.__all__:
        assert hasattr(inductor_ir, name), name
