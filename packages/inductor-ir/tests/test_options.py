"""InductorIRConfig parses its options from a dictionary and states its identity (hash)."""

from __future__ import annotations

import inspect

import pytest

import inductor_ir


def test_parse_options_applies_known_keys() -> None:
    config = inductor_ir.InductorIRConfig.parse_options({"layout_optimization": False, "fuse": False})
    assert config == inductor_ir.InductorIRConfig(layout_optimization=False, fuse=False)
    base = inductor_ir.InductorIRConfig(check_inputs=False)
    assert inductor_ir.InductorIRConfig.parse_options({"fuse": False}, base).check_inputs is False


def test_unknown_key_lists_the_valid_ones() -> None:
    with pytest.raises(inductor_ir.OptionError, match=r"'fusion'.*valid options are: fuse, debug_dir, layout_optimization"):
        inductor_ir.InductorIRConfig.parse_options({"fusion": False})
    with pytest.raises(inductor_ir.OptionError, match="'fuse' expects bool"):
        inductor_ir.InductorIRConfig.parse_options({"fuse": 0})


def test_hash_covers_what_changes_the_code() -> None:
    default = inductor_ir.InductorIRConfig()
    assert default.hash() == inductor_ir.InductorIRConfig().hash()
    assert default.hash() != inductor_ir.InductorIRConfig(layout_optimization=False).hash()
    assert default.hash() == inductor_ir.InductorIRConfig(debug_dir="/tmp/elsewhere").hash()


def test_layout_optimization_has_one_default() -> None:
    default = inspect.signature(inductor_ir.lower).parameters["layout_optimization"].default
    assert default is inductor_ir.InductorIRConfig().layout_optimization is True


def test_check_ir_and_strict_lowering_are_options() -> None:
    config = inductor_ir.InductorIRConfig.parse_options({"check_ir": True, "strict_lowering": True})
    assert config.check_ir is True and config.strict_lowering is True
    with pytest.raises(inductor_ir.OptionError, match="'check_ir' expects bool"):
        inductor_ir.InductorIRConfig.parse_options({"check_ir": 1})
    default = inductor_ir.InductorIRConfig()
    assert default.check_ir is False and default.strict_lowering is False
    assert default.hash() == inductor_ir.InductorIRConfig(check_ir=True).hash()  # checking changes no code
    assert default.hash() != inductor_ir.InductorIRConfig(strict_lowering=True).hash()  # it may raise instead


def test_patch_defaults_changes_the_defaults_in_scope() -> None:
    outside = inductor_ir.InductorIRConfig.defaults()
    with inductor_ir.InductorIRConfig.patch_defaults(fuse=False) as patched:
        assert inductor_ir.InductorIRConfig.defaults() is patched
        assert patched.fuse is False and patched.check_ir == outside.check_ir
        with pytest.raises(inductor_ir.OptionError, match="valid options are"):
            with inductor_ir.InductorIRConfig.patch_defaults(fusion=False):
                pass
    assert inductor_ir.InductorIRConfig.defaults() == outside
