"""Symbolic sizes through lowering, scheduling and the wrapper (no code generator: the reference backend).

Graphs come from ``make_fx(tracing_mode="symbolic")``: their sizes are ShapeEnv symbols, with torch's
own SymPy functions (``FloorDiv``, ``Max``, ``ToFloat``) in them. One compile must serve every size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import sympy
import torch
import torch.nn.functional as F
from inductor_ir_reference_backend import ReferenceBackend
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from inductor_ir.shape_env_sympy import from_shape_env

SIZES = (2, 3, 5, 16, 31)


class CountingBackend(ReferenceBackend):
    """The reference backend, counting kernel generation and compilation."""

    def __init__(self) -> None:
        super().__init__()
        self.generations = 0
        self.compiled = 0

    def generate(self, group: Any) -> Any:
        self.generations += 1
        return super().generate(group)

    def compile(self, sources: Sequence[Any]) -> Any:
        self.compiled += 1
        return super().compile(sources)


def _compile(fn: Callable[..., Any], inputs: Sequence[torch.Tensor]) -> tuple[inductor_ir.CompiledGraph, CountingBackend]:
    with torch.no_grad():
        gm = make_fx(fn, tracing_mode="symbolic", decomposition_table=inductor_ir.decompositions())(*inputs)
    fakes = [node.meta["val"] for node in gm.graph.nodes if node.op == "placeholder"]
    backend = CountingBackend()
    return inductor_ir.compile_graph(gm, fakes, backends={"cpu": backend}), backend


CASES: dict[str, tuple[Callable[..., Any], Callable[[int], list[torch.Tensor]]]] = {
    # Slices give torch's Max(1, s - 1); view(-1) gives FloorDiv; layer norm's mean gives ToFloat.
    "slices": (lambda x: x[:, 1:] * x[:, :-1], lambda n: [torch.randn(3, n)]),
    "view_infer": (lambda x: x.view(x.shape[0], -1, 2).sum(-1), lambda n: [torch.randn(n, 2 * n)]),
    "layer_norm": (lambda x, w: F.layer_norm(x, (x.shape[-1],), w), lambda n: [torch.randn(4, n), torch.randn(n)]),
    # A float function of a size (sqrt of a symbol) inside a kernel body.
    "scale_by_sqrt_size": (lambda x: torch.softmax(x / x.shape[-1] ** 0.5, -1), lambda n: [torch.randn(2, n)]),
    "transpose_reshape": (lambda x: x.t().reshape(-1) + 1, lambda n: [torch.randn(n, n + 1)]),
    "reduce_first_dim": (lambda x: (x.sum(0), x.mean(0), x.amax(0)), lambda n: [torch.randn(n, 6)]),
    # fuzz 30f500fd46: the gathered tensor is a fill, fused away, so its size only bounds the index
    # check; no load or store named it, and the kernel was not given it (s26 undeclared in C++).
    "gather_from_a_fill": (
        lambda x, i: (torch.zeros_like(x).gather(0, i), torch.full_like(x, 2.0)[i] * 3),
        lambda n: [torch.randn(n), torch.tensor([1])],
    ),
    # A strided convolution's output strides hold Max(1, s // 4): the wrapper must print it as Python.
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_compile_serves_every_size(name: str) -> None:
    fn, make_inputs = CASES[name]
    torch.manual_seed(0)
    compiled, backend = _compile(fn, make_inputs(9))
    assert compiled.program.size_sources, "the graph should have size symbols"
    assert not compiled.program.lowering_errors
    counts = (backend.generations, backend.compiled)
    for n in SIZES:
        inputs = make_inputs(n)
        expected, actual = fn(*inputs), compiled(*inputs)
        expected = expected if isinstance(expected, tuple) else (expected,)
        actual = actual if isinstance(actual, (tuple, list)) else (actual,)
        for got, want in zip(actual, expected, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert (backend.generations, backend.compiled) == counts


def test_a_slice_empty_at_the_example_size_is_not_empty_at_larger_ones() -> None:
    # fuzz eeacdaa751 / eb20d36f09: x[..., 2:-2:2] traced at size 4 spans 0 elements, and torch guards
    # only stop >= start; the lowering took the length to be 0 for every size (shape (0,) at 5)
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, -1)[..., 2:-2:2] * 2

    compiled, _ = _compile(fn, [torch.randn(4)])
    for n in (4, 5, 6, 9):
        x = torch.randn(n)
        torch.testing.assert_close(compiled(x), fn(x))


def test_wrapper_reads_sizes_and_kernels_take_them() -> None:
    compiled, _ = _compile(lambda x: torch.softmax(x / x.shape[-1] ** 0.5, -1), [torch.randn(4, 37)])
    assert "37" not in compiled.wrapper
    size_reads = [line for line in compiled.wrapper.splitlines() if ".size(" in line]
    assert size_reads, compiled.wrapper
    # The symbol only appears in ops.index_expr (the sqrt of the size): kernels must still take it.
    symbols = set(compiled.program.size_sources)
    assert all(set(g.size_symbols) & symbols for g in compiled.schedule.kernel_groups)


def test_mismatched_sizes_are_refused() -> None:
    compiled, _ = _compile(lambda x, y: x + y, [torch.randn(4, 5), torch.randn(4, 5)])
    compiled(torch.randn(3, 6), torch.randn(3, 6))
    with pytest.raises(ValueError, match="symbolic sizes"):
        compiled(torch.randn(3, 6), torch.randn(3, 7))
    with pytest.raises(ValueError, match="symbolic sizes"):
        compiled(torch.randn(6, 3).t(), torch.randn(3, 6))


def test_torch_sympy_functions_are_translated() -> None:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from torch.utils._sympy import functions as tf
    from torch.utils._sympy.value_ranges import ValueRanges

    env = ShapeEnv()
    s0 = sympy.Symbol("s0", integer=True, positive=True)
    env.var_to_range[s0] = ValueRanges(2, sympy.oo)  # a dynamic size is at least 2
    assert from_shape_env(tf.FloorDiv(s0, 2), env) == inductor_ir.FloorDiv(s0, 2)
    assert from_shape_env(tf.Max(1, s0 - 1), env) == s0 - 1
    assert from_shape_env(tf.ToFloat(s0), env) == s0
    assert from_shape_env(tf.PythonMod(s0, 3), env) == sympy.Mod(s0, 3)


def test_static_reduction_over_one_element() -> None:
    x = torch.randn(4, 1)
    fn = lambda t: (torch.softmax(t, -1), t.sum(-1))  # noqa: E731
    gm = make_fx(fn)(x)
    compiled = inductor_ir.compile_graph(gm, [x], backends={"cpu": ReferenceBackend()})
    assert all(g.reduction_size for g in compiled.schedule.kernel_groups if g.is_reduction)
    for got, want in zip(compiled(x), fn(x), strict=True):
        torch.testing.assert_close(got, want)


def test_simplify_index_with_symbolic_sizes() -> None:
    """The index of a view of a permuted ``[16, s, s]`` tensor simplifies to strides (no per-element division)."""
    s = sympy.Symbol("s0", integer=True, positive=True)
    x0, x1, x2 = (sympy.Symbol(f"x{i}", integer=True, nonnegative=True) for i in range(3))
    F_, M_ = inductor_ir.FloorDiv, inductor_ir.ModularIndexing
    index = (
        x2
        + s * M_(x1 + F_(x2, s), 1, s)
        + 4 * s**2 * F_(x2 + s * x1 + s**2 * x0, 4 * s**2)
        + s**2 * M_(x0 + F_(x2 + s * x1, s**2), 1, 4)
    )
    simple = inductor_ir.simplify_index(index, [(x0, sympy.Integer(16)), (x1, s), (x2, s)])
    assert simple == sympy.expand(4 * s**2 * F_(x0, 4) + s**2 * M_(x0, 1, 4) + s * x1 + x2)
    # Not simplified when the remainder can reach the common factor.
    unsafe = F_(x2 + s * x1, s)
    assert inductor_ir.simplify_index(unsafe, [(x1, s), (x2, s + 1)]) == unsafe


def test_wrapper_prints_max_of_sizes_as_python() -> None:
    """A strided convolution over an input with symbolic height and width and a static weight (as a
    captured model's parameter is): its output strides hold ``Max(1, s // 4)``, which the wrapper
    printed as SymPy's ``Max`` (NameError on the first run: ConvNeXt and wav2vec2 at a new size)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, w, stride=4)

    torch.manual_seed(0)
    weight = torch.randn(8, 3, 4, 4)
    mode = FakeTensorMode(shape_env=ShapeEnv())
    dims = [DimDynamic.STATIC, DimDynamic.STATIC, DimDynamic.DYNAMIC, DimDynamic.DYNAMIC]
    fake_x = mode.from_tensor(torch.randn(2, 3, 36, 40), symbolic_context=StatelessSymbolicContext(dynamic_sizes=dims))
    fake_w = mode.from_tensor(weight, symbolic_context=StatelessSymbolicContext(dynamic_sizes=[DimDynamic.STATIC] * 4))
    with mode, torch.no_grad():
        gm = make_fx(fn, decomposition_table=inductor_ir.decompositions())(fake_x, fake_w)
    compiled = inductor_ir.compile_graph(gm, [fake_x, fake_w], backends={"cpu": ReferenceBackend()})
    for height, width in ((36, 40), (64, 32), (20, 44)):
        x = torch.randn(2, 3, height, width)
        torch.testing.assert_close(compiled(x, weight), fn(x, weight), rtol=1e-5, atol=1e-5)


def _reshape_chain(x: torch.Tensor) -> torch.Tensor:
    y = x
    for _ in range(3):
        y = (y.sin() + 1).reshape(2, -1)
        y = (y * 2 - 1).reshape(4, -1)
        y = y.cos().reshape(8, -1)
        y = (y + 1).reshape(4, -1)
    return y


def test_reshapes_dividing_by_symbolic_sizes_do_not_nest_index_arithmetic() -> None:
    # Each reshape of a computed value by a symbolic size that does not simplify is stored first: nested,
    # their index arithmetic grew with every view (poolformer at a new image size: index expressions of
    # 10,000 operations; this chain: index expressions of 100,000 characters).
    x = torch.randn(4, 12)
    gm = make_fx(_reshape_chain, tracing_mode="symbolic")(x)
    compiled = inductor_ir.compile_graph(gm, [x], backends={"cpu": ReferenceBackend()})
    assert max(len(source.source) for source in compiled.sources) < 5000
    for columns in (8, 12, 20):
        x = torch.randn(4, columns)
        result = compiled(x)
        torch.testing.assert_close(result[0] if isinstance(result, (list, tuple)) else result, _reshape_chain(x))
