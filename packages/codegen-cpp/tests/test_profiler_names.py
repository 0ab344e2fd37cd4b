"""Under ``torch.profiler`` every call of a C++ kernel is recorded under the kernel's name, so a profile of
a compiled model shows where Kiln's own kernels spend their time (not only ATen's calls around them)."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend


def test_kernel_calls_appear_in_a_profile_under_their_names(backend: CppBackend) -> None:
    torch.manual_seed(0)
    x = torch.randn(64, 512)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x.sin(), dim=-1) * 2

    gm = make_fx(fn, decomposition_table=inductor_ir.decompositions())(x)
    compiled = inductor_ir.compile_graph(gm, [x], backends={"cpu": backend})
    kernels = {s.name for s in compiled.sources}
    assert kernels
    with torch.profiler.profile() as profile:
        for _ in range(3):
            result = compiled(x)
    counts = {event.key: event.count for event in profile.key_averages()}
    assert {name: counts.get(name) for name in kernels} == dict.fromkeys(kernels, 3)
    torch.testing.assert_close(result, fn(x))
    # and outside a profile, calls record nothing and give the same values
    torch.testing.assert_close(compiled(x), fn(x))
