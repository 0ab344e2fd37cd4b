"""int64's minimum as a constant compiles and computes as eager.

`amax` reductions and scatters of int64 start from -2**63; C++ cannot write that as the negated
literal `-9223372036854775808` (9223372036854775808 does not fit in int64: GCC makes it __int128, and
`kiln::maximum(int64_t&, __int128&)` has no overload).
"""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend

LOWEST = -(2**63)


def _programs(x: torch.Tensor, index: torch.Tensor, src: torch.Tensor, scatter_index: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        x.index_reduce(0, index, src, "amax"),
        x.index_reduce(0, index, src, "amin", include_self=False),
        x.scatter_reduce(1, scatter_index, src, "amax"),
        x.scatter_reduce(1, scatter_index, src, "amax", include_self=False),
        torch.where(x > 0, x, torch.full_like(x, LOWEST)),
        x.amax(0),
        x.clamp(min=LOWEST + 5) - (x == LOWEST).long(),
    )


def test_int64_lowest_constant_compiles_and_matches_eager(backend: CppBackend) -> None:
    generator = torch.Generator().manual_seed(19)
    x = torch.randint(-(2**40), 2**40, (5, 6), generator=generator)
    x[0, 0], x[1, 1] = LOWEST, 2**63 - 1
    index = torch.randint(0, 5, (4,), generator=generator)
    src = torch.randint(-(2**40), 2**40, (4, 6), generator=generator)
    scatter_index = torch.randint(0, 6, (4, 6), generator=generator)
    inputs = [x, index, src, scatter_index]
    compiled = inductor_ir.compile_graph(make_fx(_programs)(*inputs), inputs, backends={"cpu": backend})
    for k, (got, want) in enumerate(zip(compiled(*inputs), _programs(*inputs), strict=True)):
        assert got.dtype == want.dtype and torch.equal(got, want), f"program {k}: {got} != {want}"
