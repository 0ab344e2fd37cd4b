"""Outputs written over a dying input's memory: one `in_out_ptr` argument for both buffers.

The memory plan lets a kernel output take over the memory of an input that dies in the kernel; the
kernel then loads that input and stores that output through one pointer, never through two
arguments naming the same memory. Runs in Triton's interpreter on CPU tensors.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend
from codegen_triton.backend import _dedupe_key

SIZES = (1, 2, 3, 5, 8, 13, 17, 31, 40)


def _square_sums(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
    results: list[torch.Tensor] = []
    for start in range(0, len(args), 3):
        x, w, y = args[start : start + 3]
        a = x @ w + y
        results += [(a**2).sum(), a]
    return tuple(results)


def test_in_place_output_is_one_pointer_argument(cpu_backend: TritonBackend) -> None:
    inputs = [t for n in SIZES for t in (torch.randn(n, 7), torch.randn(7, 3), torch.randn(n, 3))]
    compiled = inductor_ir.compile_graph(make_fx(_square_sums)(*inputs), inputs, backends={"cpu": cpu_backend})
    for k, (actual, expected) in enumerate(zip(compiled(*inputs), _square_sums(*inputs))):
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4, msg=lambda m, k=k: f"output {k}: {m}")
    groups = [g for g in compiled.schedule.kernel_groups if g.in_place]
    assert len(groups) == len(SIZES)
    for source in compiled.sources:
        group = source.group
        signature = re.search(r"def \w+\(([^)]*)\)", source.source)
        assert signature is not None
        pointers = [a.strip() for a in signature.group(1).split(",") if "ptr" in a]
        assert len(pointers) == len(set(pointers)) == len(group.inputs) + len(group.outputs), signature.group(0)
        assert sum(p.startswith("in_out_ptr") for p in pointers) == len(group.in_place)
        if group.in_place:
            assert "tl.load(in_out_ptr0 + " in source.source and "tl.store(in_out_ptr0 + " in source.source


def test_in_place_is_part_of_the_kernel_identity(cpu_backend: TritonBackend) -> None:
    inputs = [torch.randn(6, 7), torch.randn(7, 3), torch.randn(6, 3)]
    program = inductor_ir.lower(make_fx(_square_sums)(*inputs), inputs)
    (group,) = inductor_ir.schedule(program, {"cpu": cpu_backend}).kernel_groups
    assert group.in_place
    apart = dataclasses.replace(group, inputs=(*group.inputs, group.in_place[0].input), in_place=())
    shared_source, apart_source = cpu_backend.generate(group), cpu_backend.generate(apart)
    assert "in_out_ptr0" in shared_source.source and "in_out_ptr0" not in apart_source.source
    assert _dedupe_key(shared_source) != _dedupe_key(apart_source)


def _conv_then_gather(x: torch.Tensor, w: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    y = torch.nn.functional.conv1d(x, w, None, stride=1, padding=0, dilation=2)
    return torch.take_along_dim(y, index % y.size(-1), -1)


def test_kernels_of_one_text_with_other_numels_stay_apart(
    cpu_backend: TritonBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fuzz 9af217864f: at symbolic sizes the copies of a (3, s0) and a (1, s0) tensor have one
    source text (numels are arguments): shared, the second launched with the first's numel (3 * s0)
    and wrote past its buffer (heap corruption in Triton's interpreter, out of bounds on a GPU)."""
    import frontend
    from codegen_triton.backend import TritonKernelCall
    from frontend.backends import inductor as inductor_backend

    monkeypatch.setattr(inductor_backend, "load_kernel_backend", lambda device_type, config: cpu_backend)
    launched: list[tuple[int, int]] = []
    real_launch = TritonKernelCall._launch

    def recording(self: TritonKernelCall, args: tuple[Any, ...], numels: tuple[int, ...]) -> None:
        outputs = args[len(self.signature.input_dtypes) : self.signature.buffer_count]
        launched.append((numels[0], min(t.numel() for t in outputs)))
        real_launch(self, args, numels)

    monkeypatch.setattr(TritonKernelCall, "_launch", recording)
    frontend.reset()
    compiled = frontend.compile(_conv_then_gather, options={"fallback_to_eager": False})
    index = torch.tensor([[[7]]])
    for size in (2, 3, 5):  # 3: sizes become symbolic (the batch stays static: the conv guards it)
        x = torch.randn(size, size, 1, dtype=torch.float16, generator=torch.Generator().manual_seed(size))
        w = torch.randn(1, size, 1, dtype=torch.float16, generator=torch.Generator().manual_seed(size + 10))
        with torch.autocast("cpu", dtype=torch.bfloat16):  # copies of both to bfloat16 before the conv
            got, want = compiled(x, w, index), _conv_then_gather(x, w, index)
        torch.testing.assert_close(got, want)
    assert launched and all(numel <= size for numel, size in launched), launched
