"""Outputs written over a dying input's memory: one `in_out_ptr` argument, never two restrict pointers.

The memory plan lets a kernel output take over the memory of an input that dies in the kernel. The
kernel's pointer arguments are `__restrict__`, so passing that memory as an input pointer and as an
output pointer was undefined behaviour, and g++ -O3 did miscompile it (vector loops and their scalar
tails reloading an overwritten input). Each program is swept over many shapes in ONE traced graph,
so each test costs one library compile.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend, CppConfig
from codegen_cpp.codegen.kernel import generate_kernel
from codegen_cpp.compile.cache import KernelCache

SIZES = range(1, 41)


def _each(fn: Callable[..., Any], arity: int) -> Callable[..., tuple[torch.Tensor, ...]]:
    """``fn`` applied to consecutive groups of ``arity`` arguments, all results in one tuple."""

    def run(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        results: list[torch.Tensor] = []
        for start in range(0, len(args), arity):
            out = fn(*args[start : start + arity])
            results += list(out) if isinstance(out, tuple) else [out]
        return tuple(results)

    return run


def _compile_and_compare(backend: CppBackend, fn: Callable[..., Any], inputs: list[torch.Tensor]) -> inductor_ir.CompiledGraph:
    compiled = inductor_ir.compile_graph(make_fx(fn)(*inputs), inputs, backends={"cpu": backend})
    expected, actual = fn(*inputs), compiled(*inputs)
    assert len(actual) == len(expected)
    for k, (a, e) in enumerate(zip(actual, expected)):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-4, msg=lambda m, k=k: f"output {k}: {m}")
    return compiled


def _square_sum(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    a = x @ w + y
    return (a**2).sum(), a


def _linear_mse(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    out = F.linear(x, w, b)  # nn.Linear(5, 2) under no_grad
    return F.mse_loss(out, y), F.mse_loss(F.linear(x, w, b), y, reduction="none"), out - y


def _assert_one_pointer_per_memory(compiled: inductor_ir.CompiledGraph) -> None:
    """Kernels with in-place outputs load their inputs through the in/out pointer, and take no
    pointer argument for those inputs."""
    for source in compiled.sources:
        group = source.group
        signature = source.source.split("{", 1)[0]
        pointers = re.findall(r"\b((?:in_|out_|in_out_)ptr\d+)\b", signature)
        assert len(pointers) == len(set(pointers)) == len(group.inputs) + len(group.outputs), signature
        assert signature.count("in_out_ptr") == len(group.in_place), signature
        for shared in group.in_place:
            assert shared.input.name not in {r.name for r in group.inputs}
            pointer = group.pointer_names()[shared.input.name]
            assert pointer.startswith("in_out_ptr") and f"kiln::load1({pointer} +" in source.source
        # Nothing read through a pointer the kernel writes is computed ahead of the loops.
        assert not re.search(r"const auto tmp\d+ = [^;]*out_ptr", source.source), source.source


def test_matmul_add_square_sum_over_shapes(backend: CppBackend) -> None:
    torch.manual_seed(0)
    inputs = [t for n in SIZES for t in (torch.randn(n, 7), torch.randn(7, 3), torch.randn(n, 3))]
    compiled = _compile_and_compare(backend, _each(_square_sum, 3), inputs)
    # Every `x @ w + y` is written over the matrix product's memory, read in the same kernel.
    assert sum(len(g.in_place) for g in compiled.schedule.kernel_groups) == len(SIZES)
    assert compiled.wrapper.count("# reuse in place") == len(SIZES)
    _assert_one_pointer_per_memory(compiled)


def test_linear_mse_loss_over_shapes(backend: CppBackend) -> None:
    torch.manual_seed(1)
    inputs = [
        t for n in SIZES for t in (torch.randn(n, 5), torch.randn(n, 2), torch.randn(2, 5), torch.randn(2))
    ]
    compiled = _compile_and_compare(backend, _each(_linear_mse, 4), inputs)
    _assert_one_pointer_per_memory(compiled)


def test_in_place_changes_the_kernel_and_its_cache_key(backend: CppBackend) -> None:
    """The same group with its in-place input passed as a separate argument is another kernel."""
    torch.manual_seed(2)
    inputs = [torch.randn(9, 7), torch.randn(7, 3), torch.randn(9, 3)]
    compiled = inductor_ir.compile_graph(make_fx(_square_sum)(*inputs), inputs, backends={"cpu": backend})
    (group,) = [g for g in compiled.schedule.kernel_groups if g.in_place]
    separate = dataclasses.replace(group, inputs=(*group.inputs, group.in_place[0].input), in_place=())
    config = CppConfig()
    shared, apart = generate_kernel(group, config).source, generate_kernel(separate, config).source
    assert "in_out_ptr0" in shared and "in_out_ptr0" not in apart
    cache = KernelCache(backend.config.resolved_cache_dir())
    fingerprint = backend.toolchain().fingerprint()
    assert cache.entry(shared, fingerprint).key != cache.entry(apart, fingerprint).key


def _moments_and_scaled(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    a = x @ w
    var, mean = torch.var_mean(a, -1, keepdim=True)
    return var, mean, a * 2  # written over the product's memory, in the loop reading it for the moments


def test_row_moments_never_read_a_row_the_loop_overwrites(backend: CppBackend) -> None:
    # The moments of a row are taken after its loop: from the input's memory when the loop only
    # loads it, but a row held in an in/out pointer may be overwritten by then, so it is copied.
    torch.manual_seed(3)
    inputs = [t for n in (16, 21, 40) for t in (torch.randn(5, 9), torch.randn(9, n))]
    compiled = _compile_and_compare(backend, _each(_moments_and_scaled, 2), inputs)
    assert sum(len(g.in_place) for g in compiled.schedule.kernel_groups) >= 3
    sources = "\n".join(s.source for s in compiled.sources)
    assert "row_moments(in_out_ptr" not in sources and "row_moments(acc" in sources
