"""The closed OpsHandler vocabulary, the `ops` proxy and the verifier."""

from __future__ import annotations

import pytest
import sympy
import torch

import inductor_ir
from inductor_ir import OP_NAMES, TorchOpsHandler, TracingHandler, ops, set_ops_handler, verify_ops_handler


def test_vocabulary_is_closed_and_complete() -> None:
    for name in ("load", "store", "reduction", "store_reduction", "constant", "index_expr", "to_dtype",
                 "where", "masked", "indirect_indexing", "exp", "sigmoid", "rand", "randn"):  # fmt: skip
        assert name in OP_NAMES
    with pytest.raises(inductor_ir.UnknownOpError, match="not in the OpsHandler vocabulary"):
        ops.not_an_op  # noqa: B018


def test_verifier_rejects_incomplete_handler() -> None:
    class Partial:
        def load(self, name: str, index: sympy.Expr) -> None: ...

    with pytest.raises(TypeError, match=r"does not implement the ops: .*abs"):
        verify_ops_handler(Partial())
    verify_ops_handler(TracingHandler())
    verify_ops_handler(TorchOpsHandler({}, {}))


def test_ops_without_handler_says_what_to_do() -> None:
    with pytest.raises(RuntimeError, match="set_ops_handler"):
        ops.sin(1.0)


def test_handlers_nest_and_restore() -> None:
    outer, inner = TracingHandler(), TracingHandler()
    with set_ops_handler(outer):
        ops.constant(1.0, torch.float32)
        with set_ops_handler(inner):
            ops.constant(2.0, torch.float32)
        ops.constant(3.0, torch.float32)
    assert len(outer.lines) == 2 and len(inner.lines) == 1


def test_torch_handler_evaluates_masked_loads_safely() -> None:
    data = torch.randn(4)
    i = sympy.Symbol("i0", integer=True, nonnegative=True)
    handler = TorchOpsHandler({"a": data}, {i: torch.arange(6)}, (6,))
    with set_ops_handler(handler):
        mask = ops.lt(ops.index_expr(i, torch.int64), ops.constant(4, torch.int64))
        value = ops.masked(mask, lambda: ops.load("a", i), -1.0)
    expected = torch.cat([data, torch.full((2,), -1.0)])
    torch.testing.assert_close(value, expected)


def test_random_ops_are_deterministic_and_uniform() -> None:
    handler = TorchOpsHandler({}, {})
    offsets = torch.arange(20000)
    with set_ops_handler(handler):
        u = ops.rand(torch.tensor(123), offsets)
        again = ops.rand(torch.tensor(123), offsets)
        other = ops.rand(torch.tensor(124), offsets)
        n = ops.randn(torch.tensor(5), offsets)
    assert torch.equal(u, again) and not torch.equal(u, other)
    assert 0 <= float(u.min()) and float(u.max()) < 1 and abs(float(u.mean()) - 0.5) < 0.02
    assert abs(float(n.mean())) < 0.05 and abs(float(n.std()) - 1) < 0.05


def test_dtype_rules_are_checked() -> None:
    from inductor_ir.ir import DtypeHandler, DtypeRuleError

    handler = DtypeHandler({"a": torch.float32, "i": torch.int64, "out": torch.float32})
    i0 = sympy.Symbol("i0", integer=True, nonnegative=True)
    with set_ops_handler(handler):
        assert ops.add(ops.load("a", i0), ops.constant(1.0, torch.float32)) == torch.float32
        assert ops.lt(ops.load("i", i0), ops.constant(3, torch.int64)) == torch.bool
        with pytest.raises(DtypeRuleError, match=r"add of torch\.float32 and torch\.int64"):
            ops.add(ops.load("a", i0), ops.load("i", i0))
        with pytest.raises(DtypeRuleError, match="floating dtypes only"):
            ops.exp(ops.load("i", i0))
        with pytest.raises(DtypeRuleError, match=r"store of torch\.int64 into out"):
            ops.store("out", i0, ops.load("i", i0))
