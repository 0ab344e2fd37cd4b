"""Matrix products with rows that are not 16-byte aligned are computed in padded buffers (CUDA)."""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from inductor_ir import matmul_alignment
from inductor_ir.matmul_alignment import MatmulPadding, aligned_matmul, matmul_padding

BF16 = torch.bfloat16


def test_padding_decisions() -> None:
    # GPT-2's head: hidden (4096, 768) @ weight.t() (768, 50257): N is padded to a multiple of 8.
    head = [((4096, 768), (768, 1)), ((768, 50257), (1, 768))]
    assert matmul_padding("mm", head, (4096, 50257), BF16) == MatmulPadding(4096, 768, 50264)
    # Its backward: grad (4096, 50257) @ weight (50257, 768): K is padded.
    grad = [((4096, 50257), (50257, 1)), ((50257, 768), (768, 1))]
    assert matmul_padding("mm", grad, (4096, 768), BF16) == MatmulPadding(4096, 50264, 768)
    # grad.t() @ hidden: the first operand is stored transposed, so its M is its contiguous extent.
    wgrad = [((50257, 4096), (1, 50257)), ((4096, 768), (768, 1))]
    assert matmul_padding("mm", wgrad, (50257, 768), BF16) == MatmulPadding(50264, 4096, 768)
    assert matmul_padding("addmm", [None, *head], (4096, 50257), BF16) == MatmulPadding(4096, 768, 50264)
    assert matmul_padding("mm", head, (4096, 50257), torch.float32) is None  # only 16-bit dtypes
    aligned = [((4096, 768), (768, 1)), ((768, 50264), (50264, 1))]
    assert matmul_padding("mm", aligned, (4096, 50264), BF16) is None
    small = [((64, 96), (96, 1)), ((96, 1001), (1, 96))]
    assert matmul_padding("mm", small, (64, 1001), BF16) is None  # too small to pay for the copies
    assert matmul_padding("convolution", head, (4096, 50257), BF16) is None


def _small_ints(*shape: int) -> torch.Tensor:
    # Random small integers: every product and sum is exact, whatever the kernel's order.
    return torch.randint(-3, 4, shape).to(BF16)


@pytest.mark.parametrize("transposed", [False, True])
def test_aligned_matmul_matches_eager(monkeypatch: pytest.MonkeyPatch, transposed: bool) -> None:
    monkeypatch.setattr(matmul_alignment, "_MIN_MACS", 1)
    a = _small_ints(3, 20, 33)
    b = _small_ints(3, 41, 33).transpose(1, 2) if transposed else _small_ints(3, 33, 41)
    operands = [(tuple(t.shape), tuple(t.stride())) for t in (a, b)]
    padding = matmul_padding("bmm", operands, (3, 20, 41), BF16)
    assert padding == MatmulPadding(20, 40, 48)
    out = aligned_matmul(torch.ops.aten.bmm.default, padding, a, b)
    assert out.shape == (3, 20, 41)
    torch.testing.assert_close(out, torch.bmm(a, b))
    for bias in (_small_ints(41), _small_ints(20, 41), _small_ints(20, 1)):
        addmm = matmul_padding("addmm", [None, *[(t.shape[1:], t.stride()[1:]) for t in (a, b)]], (20, 41), BF16)
        assert addmm is not None
        got = aligned_matmul(torch.ops.aten.addmm.default, addmm, bias, a[0], b[0], beta=0.5, alpha=2)
        torch.testing.assert_close(got, torch.addmm(bias, a[0], b[0], beta=0.5, alpha=2))
    # A transposed first operand pads M too.
    at = _small_ints(33, 21).t()
    padding = matmul_padding("mm", [(tuple(at.shape), tuple(at.stride())), ((33, 41), (41, 1))], (21, 41), BF16)
    assert padding == MatmulPadding(24, 40, 48)
    torch.testing.assert_close(aligned_matmul(torch.ops.aten.mm.default, padding, at, b[0]), at @ b[0])


@pytest.mark.gpu
def test_language_model_head_runs_padded_on_cuda() -> None:
    def head(hidden: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return hidden @ weight.t()

    hidden, weight = torch.randn(2048, 512, device="cuda", dtype=BF16), torch.randn(4001, 512, device="cuda", dtype=BF16)
    gm = make_fx(head)(hidden, weight)
    compiled = inductor_ir.compile_graph(gm, [hidden, weight], backends={})
    assert "aligned_matmul(" in compiled.wrapper
    out = compiled(hidden, weight)
    assert out.stride() == (4001, 1)
    torch.testing.assert_close(out, head(hidden, weight), rtol=2e-2, atol=2e-2)


def test_transposed_operands_are_padded_in_their_stored_order() -> None:
    weight = _small_ints(41, 33)  # a Linear weight; the product reads weight.t()
    padded = matmul_alignment._pad_to(weight.t(), 40, 48)
    assert padded.shape == (40, 48) and padded.stride() == (1, 40)  # the stored (48, 40) matrix, transposed
    torch.testing.assert_close(padded[:33, :41], weight.t())
    assert bool((padded[33:] == 0).all()) and bool((padded[:, 41:] == 0).all())


@pytest.mark.parametrize("transposed", [False, True])
def test_padding_copies_once_and_zeroes_only_the_margins(transposed: bool) -> None:
    from inductor_ir.matmul_alignment import _pad_to

    for _ in range(3):  # dirty memory for the padded buffers to reuse
        torch.full((4, 40, 24), float("nan")).sum()
    t = torch.randn(4, 19, 13)
    if transposed:
        t = torch.randn(4, 13, 19).mT  # stored transposed: padded in its stored order
    padded = _pad_to(t, 24, 16)
    assert padded.shape == (4, 24, 16)
    torch.testing.assert_close(padded, torch.constant_pad_nd(t, (0, 3, 0, 5), 0.0), rtol=0, atol=0)
    if transposed:
        assert padded.stride(-2) == 1  # still stored transposed
