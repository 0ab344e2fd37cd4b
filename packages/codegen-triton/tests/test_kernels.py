"""Kernels for hand-built `KernelGroup`s, run in Triton's interpreter on CPU tensors.

These pin the generator's behaviour on the exact group shapes the scheduler produces (see
docs/kernel-backend.md), independent of lowering and fusion.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import sympy
import torch

from codegen_triton import TritonBackend, TritonConfig, TritonKernelCall, TritonKernelSource
from codegen_triton.codegen.kernel import KernelPlan, KernelWriter
from inductor_ir import BufferRecord, KernelGroup, KernelNode, ops, verify_ops_handler

Body = Callable[[Sequence[sympy.Expr], Sequence[sympy.Expr]], None]


def record(
    name: str, size: Sequence[Any], dtype: torch.dtype = torch.float32, stride: Sequence[Any] | None = None
) -> BufferRecord:
    sizes = tuple(sympy.sympify(s) for s in size)
    if stride is None:
        strides: list[sympy.Expr] = []
        running: sympy.Expr = sympy.Integer(1)
        for s in reversed(sizes):
            strides.append(running)
            running = running * s
        stride = list(reversed(strides))
    return BufferRecord(name, dtype, sizes, tuple(sympy.sympify(s) for s in stride))


def run_group(backend: TritonBackend, group: KernelGroup, *args: Any) -> str:
    source = backend.generate(group)
    (kernel,) = backend.compile([source])
    kernel(*args)
    return source.source


def pointwise_group(
    name: str,
    size: Sequence[Any],
    nodes: Sequence[KernelNode],
    inputs: Sequence[BufferRecord],
    outputs: Sequence[BufferRecord],
    symbols: Sequence[sympy.Symbol] = (),
) -> KernelGroup:
    return KernelGroup(
        name,
        "cpu",
        tuple(sympy.sympify(s) for s in size),
        (),
        tuple(nodes),
        tuple(inputs),
        tuple(outputs),
        (),
        tuple(symbols),
    )


def test_writer_implements_the_whole_vocabulary() -> None:
    verify_ops_handler(KernelWriter)


def test_getting_started_example_is_one_kernel_loading_once_storing_once(cpu_backend: TritonBackend) -> None:
    x, y, out = record("arg0_1", (10000,)), record("arg1_1", (10000,)), record("buf0", (10000,))

    def body(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
        a = ops.cos(ops.load("arg0_1", xs[0]))
        b = ops.sin(ops.load("arg1_1", xs[0]))
        ops.store("buf0", xs[0], ops.add(a, b))

    group = pointwise_group(
        "fused_add_cos_sin_0", (10000,), [KernelNode(out, body, "pointwise")], [x, y], [out]
    )
    a, b, o = torch.randn(10000), torch.randn(10000), torch.empty(10000)
    source = run_group(cpu_backend, group, a, b, o)
    torch.testing.assert_close(o, a.cos() + b.sin())
    assert "def triton_poi_fused_add_cos_sin_0(" in source
    assert source.count("tl.load(") == 2 and source.count("tl.store(") == 1
    assert "tl.load(in_ptr0 + (xindex), xmask" in source


def test_transposed_input_gets_a_2d_tile(cpu_backend: TritonBackend) -> None:
    xt = record("arg0_1", (8, 12), stride=(1, 8))
    out = record("buf0", (8, 12))

    def body(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
        ops.store("buf0", 12 * xs[0] + xs[1], ops.exp(ops.load("arg0_1", xs[0] + 8 * xs[1])))

    group = pointwise_group("fused_exp_0", (8, 12), [KernelNode(out, body, "pointwise")], [xt], [out])
    a, o = torch.randn(12, 8).t(), torch.empty(8, 12)
    source = run_group(cpu_backend, group, a, o)
    torch.testing.assert_close(o, a.exp())
    assert "YBLOCK" in source and "ymask & xmask" in source


def _softmax_group(rows: int, cols: Any, symbols: Sequence[sympy.Symbol] = ()) -> KernelGroup:
    x, out = record("arg0_1", (rows, cols)), record("buf2", (rows, cols))
    mx, sm = record("buf0", (rows,)), record("buf1", (rows,))

    def load_x(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> Any:
        return ops.load("arg0_1", cols * xs[0] + rs[0])

    def b_max(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
        ops.store_reduction("buf0", xs[0], ops.reduction(torch.float32, torch.float32, "max", load_x(xs, rs)))

    def shifted_exp(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> Any:
        return ops.exp(ops.sub(load_x(xs, rs), ops.load("buf0", xs[0])))

    def b_sum(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
        ops.store_reduction(
            "buf1", xs[0], ops.reduction(torch.float32, torch.float32, "sum", shifted_exp(xs, rs))
        )

    def b_div(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
        ops.store("buf2", cols * xs[0] + rs[0], ops.truediv(shifted_exp(xs, rs), ops.load("buf1", xs[0])))

    nodes = (
        KernelNode(mx, b_max, "reduction", 0, True, "max"),
        KernelNode(sm, b_sum, "reduction", 1, True, "sum"),
        KernelNode(out, b_div, "pointwise", 2, True),
    )
    size = (sympy.Integer(rows),)
    return KernelGroup(
        "fused_softmax_0", "cpu", size, (sympy.sympify(cols),), nodes, (x,), (out,), (mx, sm), tuple(symbols)
    )


@pytest.mark.parametrize("persistent", [True, False])
def test_softmax_persistent_and_looped(cpu_backend: TritonBackend, persistent: bool) -> None:
    backend = TritonBackend(
        "cpu", cpu_backend.config.replace(persistent_reduction_limit=64 if persistent else 8, max_rblock=16)
    )
    a, o = torch.randn(5, 40), torch.empty(5, 40)
    source = run_group(backend, _softmax_group(5, 40), a, o)
    torch.testing.assert_close(o, a.softmax(-1))
    assert ("triton_per_" in source) == persistent
    assert source.count("for roffset") == (0 if persistent else 3)


def test_symbolic_reduction_picks_persistent_or_looped_at_run_time(cpu_backend: TritonBackend) -> None:
    s0 = sympy.Symbol("s0", integer=True, positive=True)
    backend = TritonBackend("cpu", cpu_backend.config.replace(persistent_reduction_limit=16, max_rblock=8))
    source = backend.generate(_softmax_group(3, s0, [s0]))
    assert (
        "def triton_red_fused_softmax_0(" in source.source
        and "def triton_per_fused_softmax_0(" in source.source
    )
    (kernel,) = backend.compile([source])
    assert isinstance(kernel, TritonKernelCall) and kernel.persistent is not None
    for cols in (37, 5):  # 37 > 16: looped in RBLOCK=8 steps; 5: one persistent block
        a, o = torch.randn(3, cols), torch.empty(3, cols)
        kernel(a, o, cols)
        torch.testing.assert_close(o, a.softmax(-1))
    assert kernel.launcher._prepared and kernel.persistent._prepared


@pytest.mark.parametrize("rnumel", [6, 45])
@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_arg_reductions_first_index_and_nan(cpu_backend: TritonBackend, kind: str, rnumel: int) -> None:
    # 45 > the persistent limit here: a looped reduction in RBLOCK=16 steps.
    cpu_backend = TritonBackend(
        "cpu", cpu_backend.config.replace(persistent_reduction_limit=32, max_rblock=16)
    )
    x, out = record("arg0_1", (4, rnumel)), record("buf0", (4,), torch.int64)

    def body(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
        value = ops.load("arg0_1", rnumel * xs[0] + rs[0])
        ops.store_reduction("buf0", xs[0], ops.reduction(torch.int64, torch.float32, kind, value))

    group = KernelGroup(
        "fused_arg_0",
        "cpu",
        (sympy.Integer(4),),
        (sympy.Integer(rnumel),),
        (KernelNode(out, body, "reduction", 0, True, kind),),
        (x,),
        (out,),
    )
    a = torch.randn(4, rnumel).round()  # many ties
    a[1, rnumel // 2] = float("nan")
    o = torch.empty(4, dtype=torch.int64)
    source = run_group(cpu_backend, group, a, o)
    assert ("for roffset" in source) == (rnumel > 32)
    expected = a.argmax(-1) if kind == "argmax" else a.argmin(-1)
    assert o.tolist() == expected.tolist()


def test_outer_reduction_fp16_and_int_ops(cpu_backend: TritonBackend) -> None:
    # Sum over dim 0 of a float16 [9, 6] tensor (accumulated in float32), plus integer floor-division
    # and remainder with Python semantics on negative operands.
    x, out = record("arg0_1", (9, 6), torch.float16), record("buf0", (6,), torch.float16)
    n, q = record("arg1_1", (6,), torch.int64), record("buf1", (6,), torch.int64)

    def body(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
        value = ops.to_dtype(ops.load("arg0_1", 6 * rs[0] + xs[0]), torch.float32, torch.float16)
        total = ops.reduction(torch.float32, torch.float32, "sum", value)
        ops.store_reduction("buf0", xs[0], ops.to_dtype(total, torch.float16, torch.float32))

    def ints(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
        v = ops.load("arg1_1", xs[0])
        three = ops.constant(-3, torch.int64)
        ops.store(
            "buf1",
            xs[0],
            ops.add(ops.mul(ops.floordiv(v, three), ops.constant(100, torch.int64)), ops.remainder(v, three)),
        )

    nodes = (KernelNode(out, body, "reduction", 0, True, "sum"), KernelNode(q, ints, "pointwise", 0, False))
    group = KernelGroup(
        "fused_sum_0", "cpu", (sympy.Integer(6),), (sympy.Integer(9),), nodes, (x, n), (out, q)
    )
    a = torch.randn(9, 6).half()
    b = torch.tensor([-7, -6, -1, 0, 5, 8])
    o, o2 = torch.empty(6, dtype=torch.float16), torch.empty(6, dtype=torch.int64)
    run_group(cpu_backend, group, a, b, o, o2)
    torch.testing.assert_close(o, a.float().sum(0).half())
    assert o2.tolist() == (torch.div(b, -3, rounding_mode="floor") * 100 + torch.remainder(b, -3)).tolist()


UNARY = [
    "exp",
    "expm1",
    "log1p",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "tan",
    "tanh",
    "atan",
    "erf",
    "sigmoid",
    "floor",
    "ceil",
    "trunc",
    "round",
    "abs",
    "neg",
    "relu",
    "sign",
    "reciprocal",
    "lgamma",
    "erfc",
    "log10",
]


def test_unary_math_matches_torch(cpu_backend: TritonBackend) -> None:
    x = record("arg0_1", (33,))
    outs = [record(f"buf{i}", (33,)) for i in range(len(UNARY))]

    def make(op: str, name: str) -> Body:
        def body(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
            v = ops.load("arg0_1", xs[0])
            if op in ("log1p", "sqrt", "rsqrt", "lgamma", "log10"):
                v = ops.abs(v)
            ops.store(name, xs[0], getattr(ops, op)(v))

        return body

    nodes = [KernelNode(o, make(op, o.name), "pointwise") for op, o in zip(UNARY, outs)]
    group = pointwise_group("fused_math_0", (33,), nodes, [x], outs)
    a = torch.randn(33) * 2
    a[0] = 2.5  # round half to even
    results = [torch.empty(33) for _ in outs]
    run_group(cpu_backend, group, a, *results)
    for op, got in zip(UNARY, results):
        arg = a.abs() if op in ("log1p", "sqrt", "rsqrt", "lgamma", "log10") else a
        expected = getattr(torch, op)(arg) if op != "relu" else torch.relu(arg)
        torch.testing.assert_close(got, expected, msg=op, atol=1e-5, rtol=1e-5)


def test_gather_with_indirect_index_and_mask(cpu_backend: TritonBackend) -> None:
    # out[i] = table[idx[i]] where idx may be negative (wrapped), and 0 where i is odd (masked).
    table, idx, out = record("arg0_1", (10,)), record("arg1_1", (16,), torch.int64), record("buf0", (16,))

    def body(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
        position = ops.indirect_indexing(ops.load("arg1_1", xs[0]), sympy.Integer(10))
        even = ops.eq(
            ops.remainder(ops.index_expr(xs[0], torch.int64), ops.constant(2, torch.int64)),
            ops.constant(0, torch.int64),
        )
        ops.store("buf0", xs[0], ops.masked(even, lambda: ops.load("arg0_1", position), 0.0))

    group = pointwise_group("fused_index_0", (16,), [KernelNode(out, body, "pointwise")], [table, idx], [out])
    t, i, o = torch.randn(10), torch.randint(-10, 10, (16,)), torch.empty(16)
    run_group(cpu_backend, group, t, i, o)
    expected = torch.where(torch.arange(16) % 2 == 0, t[i], torch.zeros(16))
    torch.testing.assert_close(o, expected)


def test_random_is_deterministic_in_seed_and_offset(cpu_backend: TritonBackend) -> None:
    seed, out = record("arg0_1", (1,), torch.int64), record("buf0", (2000,))

    def body(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
        ops.store(
            "buf0", xs[0], ops.rand(ops.load("arg0_1", sympy.Integer(0)), ops.index_expr(xs[0], torch.int64))
        )

    group = pointwise_group("fused_rand_0", (2000,), [KernelNode(out, body, "pointwise")], [seed], [out])
    first, second, other = torch.empty(2000), torch.empty(2000), torch.empty(2000)
    run_group(cpu_backend, group, torch.tensor([7]), first)
    run_group(cpu_backend, group, torch.tensor([7]), second)
    run_group(cpu_backend, group, torch.tensor([8]), other)
    assert torch.equal(first, second) and not torch.equal(first, other)
    assert 0.0 <= float(first.min()) and float(first.max()) < 1.0
    assert abs(float(first.mean()) - 0.5) < 0.05


def test_cpu_switch_refuses_compiled_mode(kiln_cache: Any) -> None:
    with pytest.raises(ValueError, match="interpreter"):
        TritonBackend("cpu", TritonConfig(interpret=False, cache_dir=kiln_cache))


def test_int64_indexing_variant_computes_the_same(cpu_backend: TritonBackend) -> None:
    # The variant used when a tensor has more than 2**31 - 1 elements, checked on a small one.
    group = _softmax_group(3, 40)
    backend = TritonBackend("cpu", cpu_backend.config.replace(persistent_reduction_limit=8, max_rblock=16))
    generated = backend._generate(group, force_int64=True)
    assert "tl.program_id(0).to(tl.int64)" in generated.source
    source = TritonKernelSource(generated.name, generated.source, group, generated)
    (kernel,) = backend.compile([source])
    a, o = torch.randn(3, 40), torch.empty(3, 40)
    kernel(a, o)
    torch.testing.assert_close(o, a.softmax(-1))


def _sum_group(rows: int, cols: int, *, over: str) -> KernelGroup:
    """sum over dim 1 (`over="inner"`) or dim 0 (`over="outer"`) of a contiguous [rows, cols] input;
    `over="neither"`: over dim 1 of its transpose read with a stride of 3 (no walk contiguous)."""
    x = record("arg0_1", (rows, cols))
    outputs = rows if over == "inner" else cols
    length = cols if over == "inner" else rows
    out = record("buf0", (outputs,))

    def body(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
        if over == "neither":
            index = (3 * (cols * rs[0] + xs[0])) % (rows * cols)
        else:
            index = cols * xs[0] + rs[0] if over == "inner" else cols * rs[0] + xs[0]
        ops.store_reduction(
            "buf0", xs[0], ops.reduction(torch.float32, torch.float32, "sum", ops.load("arg0_1", index))
        )

    node = KernelNode(out, body, "reduction", 0, True, "sum")
    return KernelGroup(
        "fused_sum_0", "cpu", (sympy.Integer(outputs),), (sympy.Integer(length),), (node,), (x,), (out,)
    )


def test_split_plan_targets_about_a_thousand_programs() -> None:
    from codegen_triton.codegen.analysis import reduction_hint
    from codegen_triton.codegen.split import plan_split

    def looped(group: KernelGroup) -> KernelPlan:  # the plan's walk, as choose_plan gives it
        return KernelPlan("looped", hint=reduction_hint(group))

    full = plan_split(_sum_group(1, 1 << 20, over="inner"), looped(_sum_group(1, 1 << 20, over="inner")))
    assert full.split * full.split_chunk >= 1 << 20 and full.split_chunk % 2048 == 0
    assert 512 <= full.split <= 1024
    # Outer reductions count 64 outputs per program: 768 outputs -> 12 programs before the split,
    # cut into chunks of rows (a multiple of 128) up to about a thousand programs.
    outer = plan_split(_sum_group(16384, 768, over="outer"), looped(_sum_group(16384, 768, over="outer")))
    assert outer.split_chunk % 128 == 0 and outer.split * outer.split_chunk >= 16384
    assert 512 <= 12 * outer.split <= 1024
    # A square norm-weight gradient (2,048 columns over 2,048 tokens) splits: 32 programs alone.
    for rows, cols, over, split in (
        (2048, 2048, "outer", 8),  # a square norm-weight gradient: 32 programs alone
        (512, 2048, "outer", 0),  # short: not worth it
        (4096, 4096, "inner", 0),  # enough rows already
        (2, 4000, "inner", 0),  # short: not worth it
        # A walk that is neither launches one output per program (XBLOCK 1 first): 1,776 outputs
        # are enough programs (planned as 64 per program, they were cut into 14 chunks: 24,864)
        (1776, 1776, "neither", 0),
    ):
        group = _sum_group(rows, cols, over=over)
        planned = plan_split(group, looped(group))
        assert (planned.split >= split) if split else (planned.split == 0), (rows, cols, over, planned)
    assert reduction_hint(_sum_group(1776, 1776, over="neither")) == ""
    assert plan_split(_sum_group(2, 1 << 20, over="inner"), KernelPlan("persistent")).split == 0


def test_a_split_reductions_block_never_straddles_two_chunks() -> None:
    from codegen_triton.backend import _max_rblock

    assert _max_rblock(1024, 0) == 1024  # not split
    assert _max_rblock(1024, 4096) == 1024
    assert _max_rblock(1024, 384) == 128  # 256 would cover rows of two chunks
    assert _max_rblock(1024, 128) == 128


BINARY = ["pow", "atan2", "fmod", "maximum", "minimum", "truncdiv", "floordiv", "remainder"]
_TORCH_BINARY = {
    "pow": torch.pow,
    "atan2": torch.atan2,
    "fmod": torch.fmod,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "truncdiv": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "floordiv": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "remainder": torch.remainder,
}


def test_binary_math_matches_torch_including_nan(cpu_backend: TritonBackend) -> None:
    a_rec, b_rec = record("arg0_1", (40,)), record("arg1_1", (40,))
    outs = [record(f"buf{i}", (40,)) for i in range(len(BINARY))]

    def make(op: str, name: str) -> Body:
        def body(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
            a, b = ops.load("arg0_1", xs[0]), ops.load("arg1_1", xs[0])
            if op == "pow":
                a = ops.abs(a)
            ops.store(name, xs[0], getattr(ops, op)(a, b))

        return body

    nodes = [KernelNode(o, make(op, o.name), "pointwise") for op, o in zip(BINARY, outs)]
    group = pointwise_group("fused_binary_0", (40,), nodes, [a_rec, b_rec], outs)
    a, b = torch.randn(40) * 3, torch.randn(40) * 2
    a[3], b[5] = float("nan"), float("nan")
    results = [torch.empty(40) for _ in outs]
    run_group(cpu_backend, group, a, b, *results)
    for op, got in zip(BINARY, results):
        expected = _TORCH_BINARY[op](a.abs() if op == "pow" else a, b)
        torch.testing.assert_close(got, expected, msg=op, atol=1e-5, rtol=1e-5, equal_nan=True)


def test_looped_kernel_recomputes_a_value_of_an_earlier_loop(cpu_backend: TritonBackend) -> None:
    # Loop 0 computes t = x * 2 (internal, in-loop) and its max; loop 1 reads t again: in a looped
    # kernel t only lived inside loop 0's body, so the writer recomputes it from its producer.
    x, t, m, out = (
        record("arg0_1", (3, 40)),
        record("buf0", (3, 40)),
        record("buf1", (3,)),
        record("buf2", (3, 40)),
    )

    def b_t(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
        ops.store(
            "buf0",
            40 * xs[0] + rs[0],
            ops.mul(ops.load("arg0_1", 40 * xs[0] + rs[0]), ops.constant(2.0, torch.float32)),
        )

    def b_max(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
        value = ops.load("buf0", 40 * xs[0] + rs[0])
        ops.store_reduction("buf1", xs[0], ops.reduction(torch.float32, torch.float32, "max", value))

    def b_out(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
        ops.store(
            "buf2", 40 * xs[0] + rs[0], ops.sub(ops.load("buf0", 40 * xs[0] + rs[0]), ops.load("buf1", xs[0]))
        )

    nodes = (
        KernelNode(t, b_t, "pointwise", 0, True),
        KernelNode(m, b_max, "reduction", 0, True, "max"),
        KernelNode(out, b_out, "pointwise", 1, True),
    )
    group = KernelGroup(
        "fused_max_0", "cpu", (sympy.Integer(3),), (sympy.Integer(40),), nodes, (x,), (out,), (t, m)
    )
    backend = TritonBackend("cpu", cpu_backend.config.replace(persistent_reduction_limit=8, max_rblock=16))
    a, o = torch.randn(3, 40), torch.empty(3, 40)
    source = run_group(backend, group, a, o)
    assert source.count("for roffset") == 2
    torch.testing.assert_close(o, a * 2 - (a * 2).amax(-1, keepdim=True))


def test_unsupported_dtype_error_names_the_group(cpu_backend: TritonBackend) -> None:
    x, out = record("arg0_1", (4,), torch.complex64), record("buf0", (4,), torch.complex64)

    def body(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
        ops.store("buf0", xs[0], ops.load("arg0_1", xs[0]))

    group = pointwise_group(
        "fused_copy_0", (4,), [KernelNode(out, body, "pointwise", origins=("clone",))], [x], [out]
    )
    with pytest.raises(NotImplementedError, match="complex64") as info:
        cpu_backend.generate(group)
    assert any("fused_copy_0" in note and "clone" in note for note in getattr(info.value, "__notes__", []))
