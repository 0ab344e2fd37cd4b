"""In-place ops through a strided, narrowed or selected view of a one-element tensor.

After functionalization the write is a `slice_scatter`/`select_scatter` whose "is this element in
the view" mask folds to constants: a one-element block. `tl.load` rejects a block mask on a scalar
pointer, so such loads read through a one-element block pointer.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend


def _strided_or(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = a.clone()
    out[::2].bitwise_or_(-3)
    return out


def _narrow_sub(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = a.clone()
    out.narrow(0, 0, 1).sub_(b)
    return out


def _select_lerp(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = a.to(torch.float16)
    out.select(0, -1).lerp_(b.to(torch.float16).reshape(()), 0.3)
    return out


def _unsqueezed_addcmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = a.reshape(()).to(torch.float32).clone()
    out.unsqueeze(-1).narrow(0, 0, 1).addcmul_(b.reshape(1).float(), b.reshape(1).float(), value=-0.5)
    return out


PROGRAMS = (_strided_or, _narrow_sub, _select_lerp, _unsqueezed_addcmul)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_in_place_through_view_of_one_element(cpu_backend: TritonBackend, program: Callable[..., torch.Tensor]) -> None:
    generator = torch.Generator().manual_seed(11)
    a = torch.randint(-10, 11, (1, 1), generator=generator)
    b = torch.randint(-10, 11, (1, 1), generator=generator)
    gm = make_fx(torch.func.functionalize(program), decomposition_table=inductor_ir.decompositions())(a, b)
    compiled = inductor_ir.compile_graph(gm, [a, b], backends={"cpu": cpu_backend})
    got, want = compiled(a, b), program(a, b)
    assert got.dtype == want.dtype and torch.equal(got, want), (got, want)
