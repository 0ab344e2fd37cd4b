"""Group norm with infinite weights and biases gives eager's inf and NaN in Triton kernels (CPU tier).

ATen's group-norm kernels (CPU and CUDA) compute, per (sample, channel), ``scale = rstd * w`` and
``shift = b - scale * mean``, then ``x * scale + shift`` in float32: an infinite weight gives NaN
where ``x`` and the group's mean have the same sign (inf - inf) and +-inf where their signs differ.
The inputs keep every group mean away from 0: at an exact 0 the outcome follows the sign of the
mean's rounding residue, which differs between eager's kernels and ours (see
codegen-cpp's test_group_norm_nonfinite.py).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend

# The interpreter computes with NumPy, which warns at each inf - inf: the NaN is the point here.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")

_INF = float("inf")
_GROUPS = 4
_CHANNELS = 8
_GROUP_MEANS = (1.0, -1.0, 0.75, -0.75)  # one per group: far from 0, both signs

# (input dtype, weight and bias dtype): half inputs with float32 parameters take ATen's mixed-type path.
_DTYPES = [
    (torch.float32, torch.float32),
    (torch.float16, torch.float16),
    (torch.bfloat16, torch.bfloat16),
    (torch.float16, torch.float32),
]


def _group_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.group_norm(x, _GROUPS, w, b)


def _inputs(spatial: int, dtype: torch.dtype, param_dtype: torch.dtype, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    offsets = torch.tensor(_GROUP_MEANS).repeat_interleave(_CHANNELS // _GROUPS)[:, None]
    x = torch.randn(2, _CHANNELS, spatial, generator=generator) * 0.5 + offsets
    w = torch.randn(_CHANNELS, generator=generator)
    b = torch.randn(_CHANNELS, generator=generator)
    w[1], w[2], w[5], w[6] = _INF, -_INF, _INF, -_INF  # channel 1 finite bias, 2 and 6 infinite ones
    b[2], b[3], b[6] = -_INF, _INF, _INF  # 3: a finite weight with an infinite bias
    means = x.double().reshape(2, _GROUPS, -1).mean(-1)
    assert bool((means.abs() > 0.2).all()), means  # away from 0: the means' rounding cannot flip a sign
    return [x.to(dtype), w.to(param_dtype), b.to(param_dtype)]


def _assert_eagers_nonfinite(got: torch.Tensor, want: torch.Tensor, where: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, where
    assert want.isnan().any() and want.isinf().any(), f"{where}: a weak case"
    for name in ("isnan", "isposinf", "isneginf"):
        assert torch.equal(getattr(got, name)(), getattr(want, name)()), f"{where}: {name} differs"
    tolerance = 1e-5 if want.dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got, want, equal_nan=True, rtol=tolerance, atol=tolerance, msg=where)


@pytest.mark.parametrize(("dtype", "param_dtype"), _DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def test_infinite_weights_and_biases_give_eagers_nan_and_inf(
    cpu_backend: TritonBackend, dtype: torch.dtype, param_dtype: torch.dtype
) -> None:
    example = _inputs(15, dtype, param_dtype, seed=11)
    gm = make_fx(_group_norm, decomposition_table=inductor_ir.decompositions())(*example)
    compiled = inductor_ir.compile_graph(gm, example, backends={"cpu": cpu_backend})
    for seed in (11, 12):
        inputs = _inputs(15, dtype, param_dtype, seed)
        _assert_eagers_nonfinite(compiled(*inputs), _group_norm(*inputs), f"{dtype} seed={seed}")


@pytest.mark.parametrize(("dtype", "param_dtype"), _DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def test_infinite_weights_and_biases_at_symbolic_sizes(
    cpu_backend: TritonBackend, dtype: torch.dtype, param_dtype: torch.dtype
) -> None:
    # One compile over a symbolic spatial size serves every size (the fuzz finding recompiled at one).
    example = _inputs(9, dtype, param_dtype, seed=21)
    trace = make_fx(_group_norm, tracing_mode="symbolic", decomposition_table=inductor_ir.decompositions())
    with torch.no_grad():
        gm = trace(*example)
    compiled = inductor_ir.compile_graph(gm, example, backends={"cpu": cpu_backend})
    for spatial in (2, 17, 70):
        inputs = _inputs(spatial, dtype, param_dtype, seed=30 + spatial)
        _assert_eagers_nonfinite(compiled(*inputs), _group_norm(*inputs), f"{dtype} spatial={spatial}")
