"""Rows a kernel stores in one reduction loop and loads back in a later one.

A training graph saves softmax's output for the backward, and a layer norm of ``softmax(x) + y`` needs
that row again after its statistics: the C++ backend (``reloads_stored_rows``) runs both in one kernel,
the later loop loading the stored row back through the output's pointer. Each program is swept over
many widths in one traced graph (vector bodies and scalar tails), so each test costs one library
compile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend

WIDTHS = (2, 3, 15, 16, 17, 40, 100)


def _softmax_then_norm(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    s = torch.softmax(x, -1)
    return s, torch.nn.functional.layer_norm(s + y, (x.shape[-1],))


def _exp_then_scaled_sum(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # The stored row is read by a reduction of the later loop, after a reduction of its own loop.
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return e, (e * e.sum(-1, keepdim=True)).sum(-1)


def _each(fn: Callable[..., Any], arity: int) -> Callable[..., tuple[torch.Tensor, ...]]:
    def run(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        results: list[torch.Tensor] = []
        for start in range(0, len(args), arity):
            results += list(fn(*args[start : start + arity]))
        return tuple(results)

    return run


def _compare(backend: CppBackend, fn: Callable[..., Any], inputs: list[torch.Tensor]) -> inductor_ir.CompiledGraph:
    gm = make_fx(fn, decomposition_table=inductor_ir.decompositions())(*inputs)
    compiled = inductor_ir.compile_graph(gm, inputs, backends={"cpu": backend})
    fresh = [torch.randn_like(t) * 3 for t in inputs]
    for k, (got, want) in enumerate(zip(compiled(*fresh), fn(*fresh))):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, msg=lambda m, k=k: f"output {k}: {m}")
    return compiled


def test_softmax_saved_and_normalized_in_one_kernel(backend: CppBackend) -> None:
    torch.manual_seed(0)
    inputs = [t for n in WIDTHS for t in (torch.randn(5, n), torch.randn(5, n))]
    compiled = _compare(backend, _each(_softmax_then_norm, 2), inputs)
    # One kernel per width: softmax, the statistics and the normalization, the last loop loading the
    # stored softmax row back.
    assert len(compiled.schedule.kernel_groups) == len(WIDTHS)
    for source in compiled.sources:
        assert "kiln::load(out_ptr" in source.source or "kiln::load1(out_ptr" in source.source


def test_a_reduction_of_a_later_loop_reads_the_stored_row(backend: CppBackend) -> None:
    torch.manual_seed(1)
    inputs = [torch.randn(4, n) for n in WIDTHS]
    compiled = _compare(backend, _each(_exp_then_scaled_sum, 1), inputs)
    # Apart, each width takes two kernels; rows of 15 and more take one (narrower ones sum unrolled).
    wide = [n for n in WIDTHS if n >= 15]
    assert len(compiled.schedule.kernel_groups) <= 2 * len(WIDTHS) - len(wide)
    assert sum("load(out_ptr" in s.source or "load1(out_ptr" in s.source for s in compiled.sources) >= len(wide)


def test_symbolic_widths_reload_the_row(backend: CppBackend) -> None:
    torch.manual_seed(2)
    x, y = torch.randn(6, 9), torch.randn(6, 9)
    gm = make_fx(_softmax_then_norm, decomposition_table=inductor_ir.decompositions(), tracing_mode="symbolic")(x, y)
    compiled = inductor_ir.compile_graph(gm, [x, y], backends={"cpu": backend})
    assert len(compiled.schedule.kernel_groups) == 1
    for width in (2, 5, 16, 17, 45):
        x, y = torch.randn(3, width) * 3, torch.randn(3, width)
        for got, want in zip(compiled(x, y), _softmax_then_norm(x, y)):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
