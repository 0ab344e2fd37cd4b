"""The GPU tier: the inductor backend with Triton kernels on CUDA (skipped without a GPU)."""

from __future__ import annotations

import pytest
import torch

import frontend

from .models import MLP, TinyResNet

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("fresh_cache")]


@pytest.mark.parametrize("mode", [None, "max-autotune-no-cudagraphs"])
def test_inductor_on_cuda_matches_eager(mode: str | None) -> None:
    model = TinyResNet().cuda().eval()
    compiled = frontend.compile(model, mode=mode, options={"fallback_to_eager": False})
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(8, 3, 16, 16, device="cuda")
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-3)


def test_training_on_cuda_matches_eager() -> None:
    torch.manual_seed(0)
    model, reference = MLP().cuda(), MLP().cuda()
    reference.load_state_dict(model.state_dict())
    compiled = frontend.compile(model, options={"fallback_to_eager": False})
    x, target = torch.randn(32, 16, device="cuda"), torch.randint(4, (32,), device="cuda")
    torch.nn.functional.cross_entropy(compiled(x), target).backward()
    torch.nn.functional.cross_entropy(reference(x), target).backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4)


def test_graph_mixing_cpu_and_cuda_falls_back_and_stays_right() -> None:
    def mixed(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (x.cpu() * 2 + y).cuda()

    x, y = torch.randn(4, device="cuda"), torch.randn(4)
    torch.testing.assert_close(frontend.compile(mixed)(x, y), mixed(x, y))


def _wrapping_then_widened(a: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (-a).to(torch.int64), (a + a).to(torch.int64), (a - 1 - a.max()).to(torch.int64), (a * -1).long()


def _wrapping_then_summed(a: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return ((-1) * a).sum(), (a * 3).sum(), (-a).sum(), (a * a).sum()


def _extremes(dtype: torch.dtype) -> torch.Tensor:
    info = torch.iinfo(dtype)
    return torch.tensor([[info.max], [info.min], [123], [-7]], dtype=dtype, device="cuda")


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64], ids=str)
def test_signed_int_arithmetic_wraps_before_a_wider_use(dtype: torch.dtype) -> None:
    """fuzz (cuda target): `-a` of int16 -32768, widened to int64, gave +32768 on an H200: computed
    on uint16 bit patterns (or in int32), then narrowed to int16 and sign-extended, the GPU code
    dropped the wrap. Narrow results are now wrapped by arithmetic and held in int32."""
    a = _extremes(dtype)
    compiled = frontend.compile(_wrapping_then_widened, options={"fallback_to_eager": False})
    for k, (got, want) in enumerate(zip(compiled(a), _wrapping_then_widened(a), strict=True)):
        assert torch.equal(got, want), (k, got, want)


def _narrow_edges(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return a // b, torch.div(a, b, rounding_mode="trunc"), a.abs(), a << 1, (a * a).sum(0, dtype=a.dtype), a * 3


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16], ids=str)
def test_signed_int_division_abs_shift_and_sum_wrap(dtype: torch.dtype) -> None:
    """An int8/int16 result of arithmetic is held in int32 in Triton code, wrapped: -128 // -1,
    |-128| and 64 << 1 are -128 in int8, as in eager."""
    a = _extremes(dtype)
    b = torch.tensor([[-1], [-1], [5], [-2]], dtype=dtype, device="cuda")
    compiled = frontend.compile(_narrow_edges, options={"fallback_to_eager": False})
    for k, (got, want) in enumerate(zip(compiled(a, b), _narrow_edges(a, b), strict=True)):
        assert got.dtype == want.dtype and torch.equal(got, want), (k, got, want)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64], ids=str)
def test_signed_int_arithmetic_wraps_before_a_wider_sum(dtype: torch.dtype) -> None:
    """fuzz (cuda target): `((-1) * a).sum()` of int16 [32767, -32768, 123, -7] gave -115, eager -65651."""
    a = _extremes(dtype)
    compiled = frontend.compile(_wrapping_then_summed, options={"fallback_to_eager": False})
    for k, (got, want) in enumerate(zip(compiled(a), _wrapping_then_summed(a), strict=True)):
        assert torch.equal(got, want), (k, got, want)


@pytest.mark.parametrize("shapes", [((1,), (2, 1), (1,)), ((1, 2), (2, 2), (1,)), ((3, 4), (5, 4), (5,))])
def test_linear_with_a_broadcast_bias_then_a_consumer(shapes: tuple[tuple[int, ...], ...]) -> None:
    """A float32 addmm runs as mm plus a bias add fused into its consumer; a bias of one element
    broadcasts over the columns (it was read past its end: fuzz 98a7d97f02, 1708cbdaad, 402010ccef)."""

    def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, w, b) * 2 + 1

    generator = torch.Generator().manual_seed(51)
    x, w, b = (torch.randn(s, generator=generator).cuda() for s in shapes)
    compiled = frontend.compile(f, options={"fallback_to_eager": False})
    torch.testing.assert_close(compiled(x, w, b), f(x, w, b))


def test_floor_division_and_remainder_of_subnormals_match_eager() -> None:
    """Eager's CUDA kernels keep float32 subnormals (fuzz 63174c45b6: 1e-40 // -1.5 gave -0.0, eager -1.0)."""

    def f(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.div(a, b, rounding_mode="floor"), torch.remainder(a, b), torch.fmod(a, b), torch.sqrt(a.abs())

    a = torch.tensor([1e-40, -1e-40, 3e-39, 1.5, -2.5, 1e-40, 7.0], device="cuda")
    b = torch.tensor([-1.5, 1.5, 2.0, 1e-40, -1e-40, 3e-39, 2.0], device="cuda")
    compiled = frontend.compile(f, options={"fallback_to_eager": False})
    for got, want in zip(compiled(a, b), f(a, b)):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=0, equal_nan=True)


def test_an_integer_matrix_product_raises_on_cuda_as_eager_does() -> None:
    """CUDA has no integer matmul (eager raises); Kiln's fake kernels allowed it and computed one."""

    def product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a @ b) + 1

    a = torch.randint(-5, 5, (4, 3), device="cuda")
    with pytest.raises(RuntimeError) as eager:
        product(a, a.t())
    with pytest.raises(RuntimeError) as compiled:
        frontend.compile(product, options={"fallback_to_eager": False})(a, a.t())
    assert str(eager.value) in str(compiled.value)


def test_cpu_scalars_a_graph_makes_itself_run_on_the_gpu() -> None:
    """fuzz a48fe64ae8, d6135d1e6b: a graph's own CPU 0-dim tensors met CUDA tensors, so the graph
    "mixed devices" and ran eagerly (an error with fallback_to_eager=False)."""

    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        shifted = x - torch.scalar_tensor(-1.5, dtype=torch.float64)
        return torch.zeros((), dtype=torch.float64) + x, shifted.t().pow_(2)

    x = torch.randn(3, 1, generator=torch.Generator().manual_seed(53)).cuda()
    compiled = frontend.compile(f, options={"fallback_to_eager": False})
    for got, want in zip(compiled(x), f(x), strict=True):
        assert got.dtype == want.dtype and got.device == want.device
        torch.testing.assert_close(got, want)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class _RotaryGroupedAttention(torch.nn.Module):
    """A LLaMA-style attention block: q/k/v projections viewed (batch, seq, heads, dim) and
    transposed, rotary embeddings (a `cat` in `rotate_half`), keys and values shared by 4 heads."""

    def __init__(self, width: int = 256, heads: int = 4, kv_heads: int = 1) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.dim = heads, kv_heads, width // heads
        self.q = torch.nn.Linear(width, width, bias=False)
        self.kv = torch.nn.Linear(width, 2 * kv_heads * self.dim, bias=False)
        self.o = torch.nn.Linear(width, width, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.heads, self.dim).transpose(1, 2)
        k, v = self.kv(x).view(b, s, 2, self.kv_heads, self.dim).unbind(2)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        group = self.heads // self.kv_heads
        k = k[:, :, None].expand(b, self.kv_heads, group, s, self.dim).reshape(b, self.heads, s, self.dim)
        v = v[:, :, None].expand(b, self.kv_heads, group, s, self.dim).reshape(b, self.heads, s, self.dim)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(out.transpose(1, 2).reshape(b, s, -1))


def test_attention_results_are_not_copied_into_recorded_layouts(monkeypatch: pytest.MonkeyPatch) -> None:
    import inductor_ir.wrapper

    copies: list[tuple[object, object]] = []
    original = inductor_ir.wrapper.ensure_layout

    def counting(result: torch.Tensor, size: tuple[int, ...], stride: tuple[int, ...]) -> torch.Tensor:
        out = original(result, size, stride)
        if out is not result:
            copies.append((result.stride(), stride))
        return out

    monkeypatch.setattr(inductor_ir.wrapper, "ensure_layout", counting)
    torch.manual_seed(0)
    model = _RotaryGroupedAttention().cuda()
    x = torch.randn(2, 128, 256, device="cuda")
    cos, sin = torch.randn(128, 64, device="cuda"), torch.randn(128, 64, device="cuda")
    compiled = frontend.compile(model, options={"fallback_to_eager": False})
    grads = []
    for fn in (compiled, model):
        model.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = fn(x, cos, sin)
        (out.float() * torch.linspace(-1, 1, out.numel(), device="cuda").view_as(out)).sum().backward()
        grads.append([out.float()] + [p.grad.clone() for p in model.parameters()])
    for got, want in zip(*grads):
        torch.testing.assert_close(got, want, rtol=3e-2, atol=3e-2)
    assert copies == [], f"attention results copied into recorded layouts: {copies}"
