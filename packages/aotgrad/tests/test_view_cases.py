"""Views whose validity depends on strides: attention's `view` after `transpose`/`permute` in
training, with torch's and with stride-changing decompositions; values and gradients vs eager."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from aotgrad_helpers import RecordingCompiler, assert_close_grads, strict

import aotgrad
from aotgrad.decompositions import default_decompositions

aten = torch.ops.aten


def _grads(out: torch.Tensor, tensors: list[torch.Tensor], seed: torch.Tensor) -> list[torch.Tensor | None]:
    return list(torch.autograd.grad(out, tensors, seed, allow_unused=True))


def _check_training(module: torch.nn.Module, x: torch.Tensor, **options: Any) -> None:
    """Compile `module` with fallbacks off; outputs and gradients (input and parameters) match eager."""
    compiled = aotgrad.aot_graph(module, [x], fw_compiler=aotgrad.eager_compiler, config=strict(), **options)
    fresh = torch.randn_like(x).requires_grad_(x.requires_grad)
    out, ref = compiled(fresh), module(fresh)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    seed = torch.randn_like(ref)
    tensors = [*([fresh] if fresh.requires_grad else []), *module.parameters()]
    assert_close_grads(_grads(out, tensors, seed), _grads(ref, tensors, seed), rtol=1e-4, atol=1e-4)


class SelfAttention(torch.nn.Module):
    """`nn.MultiheadAttention(x, x, x)` (so `F.multi_head_attention_forward`), first output."""

    def __init__(self, batch_first: bool, need_weights: bool) -> None:
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(32, 4, batch_first=batch_first)
        self.need_weights = need_weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attention(x, x, x, need_weights=self.need_weights)[0]


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_attention_training_matches_eager(batch_first: bool, need_weights: bool) -> None:
    # need_weights=False runs CPU flash attention: its backward reads the log-sum-exp, which the
    # decomposition torch registers for it does not return (the gradients came out wrong).
    torch.manual_seed(0)
    _check_training(SelfAttention(batch_first, need_weights), torch.randn(3, 7, 32, requires_grad=True))


class MaskedSelfAttention(torch.nn.Module):
    """Self-attention with a padding mask the module closes over (a constant of the graph)."""

    def __init__(self, mask: torch.Tensor, need_weights: bool) -> None:
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(32, 4, batch_first=True)
        self.mask = mask  # a plain attribute, not a buffer
        self.need_weights = need_weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attention(x, x, x, key_padding_mask=self.mask, need_weights=self.need_weights)[0]


@pytest.mark.parametrize("need_weights", [False, True])
def test_attention_with_a_constant_padding_mask(need_weights: bool) -> None:
    # The mask becomes `zeros_like(mask).masked_fill_(mask, -inf)`: an in-place op on a tensor made
    # from a graph constant, which functionalization must see through too.
    torch.manual_seed(0)
    mask = torch.rand(3, 7) > 0.6
    mask[:, 0] = False
    _check_training(MaskedSelfAttention(mask, need_weights), torch.randn(3, 7, 32, requires_grad=True))


@pytest.mark.parametrize("layout", ["transposed", "permuted", "sliced"])
def test_sdpa_backward_with_non_contiguous_qkv(layout: str) -> None:
    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(2, 6, 32)

    torch.manual_seed(0)
    if layout == "transposed":  # (batch, seq, heads, dim) stored, (batch, heads, seq, dim) seen
        make = lambda: torch.randn(2, 6, 4, 8).transpose(1, 2)  # noqa: E731
    elif layout == "permuted":
        make = lambda: torch.randn(6, 8, 2, 4).permute(2, 3, 0, 1)  # noqa: E731
    else:
        make = lambda: torch.randn(2, 4, 6, 16)[..., ::2]  # noqa: E731
    q, k, v = (make().requires_grad_() for _ in range(3))
    compiled = aotgrad.aot_function(attention, fw_compiler=aotgrad.eager_compiler, config=strict())
    out, ref = compiled(q, k, v), attention(q, k, v)
    torch.testing.assert_close(out, ref)
    seed = torch.randn_like(ref)
    assert_close_grads(_grads(out, [q, k, v], seed), _grads(ref, [q, k, v], seed))


class EncoderBlock(torch.nn.Module):
    """torchvision's ViT encoder block: pre-LN, batch-first self-attention, GELU MLP."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(dim, eps=1e-6)
        self.self_attention = torch.nn.MultiheadAttention(dim, heads, batch_first=True)
        self.dropout = torch.nn.Dropout(0.0)
        self.ln_2 = torch.nn.LayerNorm(dim, eps=1e-6)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 2 * dim), torch.nn.GELU(), torch.nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln_1(x)
        y, _ = self.self_attention(y, y, y, need_weights=False)
        x = self.dropout(y) + x
        return x + self.mlp(self.ln_2(x))


class TinyViT(torch.nn.Module):
    """torchvision's VisionTransformer in miniature: patches by conv, class token, positions."""

    def __init__(self, dim: int = 32, heads: int = 4, layers: int = 2, image: int = 16, patch: int = 4) -> None:
        super().__init__()
        self.dim = dim
        self.conv_proj = torch.nn.Conv2d(3, dim, kernel_size=patch, stride=patch)
        seq = (image // patch) ** 2 + 1
        self.class_token = torch.nn.Parameter(torch.randn(1, 1, dim))
        self.pos_embedding = torch.nn.Parameter(torch.randn(1, seq, dim) * 0.02)
        self.layers = torch.nn.Sequential(*[EncoderBlock(dim, heads) for _ in range(layers)])
        self.ln = torch.nn.LayerNorm(dim, eps=1e-6)
        self.head = torch.nn.Linear(dim, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        n = images.shape[0]
        x = self.conv_proj(images).reshape(n, self.dim, -1).permute(0, 2, 1)
        x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1) + self.pos_embedding
        return self.head(self.ln(self.layers(x))[:, 0])


def test_vit_training_matches_eager() -> None:
    torch.manual_seed(0)
    _check_training(TinyViT(), torch.randn(2, 3, 16, 16))


def _layout_keeping_layer_norm(
    x: torch.Tensor, shape: list[int], weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A layer-norm decomposition whose output keeps the input's layout (as pointwise ops do),
    where the fused kernel returns a contiguous tensor: what a code generator's table may do."""
    dims = list(range(x.dim() - len(shape), x.dim()))
    var, mean = torch.var_mean(x, dims, correction=0, keepdim=True)
    rstd = torch.rsqrt(var + eps)
    out = (x - mean) * rstd
    out = out * weight if weight is not None else out
    return (out + bias if bias is not None else out), mean, rstd


def test_views_survive_a_decomposition_that_changes_strides() -> None:
    # torchvision ViT on CUDA: "Cannot view a tensor with shape [32,197,768] and strides
    # (768, 24576, 1)": the forward recorded `view`s valid for the fused layer norm's contiguous
    # output; decomposed below autograd, the output kept the transposed attention layout.
    table = default_decompositions()
    table[aten.native_layer_norm.default] = _layout_keeping_layer_norm
    torch.manual_seed(0)
    _check_training(TinyViT(layers=1), torch.randn(2, 3, 16, 16), decompositions=table)


def test_transformers_vit_training_matches_eager() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.ViTConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, image_size=16,
        patch_size=4, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    model = transformers.ViTModel(config, add_pooling_layer=False).train()
    compiled = aotgrad.aot_module(model, fw_compiler=aotgrad.eager_compiler, config=strict())
    pixels = torch.randn(2, 3, 16, 16)
    out = compiled(pixel_values=pixels).last_hidden_state
    ref = model(pixel_values=pixels).last_hidden_state
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    seed = torch.randn_like(ref)
    params = list(model.parameters())
    assert_close_grads(_grads(out, params, seed), _grads(ref, params, seed), rtol=1e-4, atol=1e-4)


def test_backward_without_inputs_is_not_handed_to_the_compiler() -> None:
    # Inputs require grad but no output does (nothing saved, no tangent): the backward graph has no
    # inputs and only returns Nones; code generators are not asked to compile it.
    def mask_count(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return (w > 0).sum(), w.detach().argmax()

    forward, backward = RecordingCompiler(), RecordingCompiler()
    w = torch.randn(5, 3, requires_grad=True)
    compiled = aotgrad.aot_function(mask_count, fw_compiler=forward, bw_compiler=backward, config=strict())
    count, index = compiled(w)
    assert int(count) == int((w > 0).sum()) and int(index) == int(w.argmax())
    assert len(forward.graphs) == 1 and backward.graphs == []
