"""Idioms from real model code (transformers, torchvision): config objects, masks, dtype plumbing, warnings."""

from __future__ import annotations

import logging
import math
import warnings
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as nnf
from torch import nn

from ._registry import args, ints, module, program, randn, x

F = "model_patterns"
LOGGER = logging.getLogger("kiln.corpus")


@dataclass
class TinyConfig:
    """A transformers-style config object."""

    hidden_size: int = 16
    num_heads: int = 4
    hidden_act: str = "gelu"
    layer_norm_eps: float = 1e-5
    use_cache: bool = False
    output_attentions: bool = False


ACT2FN = {"gelu": nnf.gelu, "relu": nnf.relu, "silu": nnf.silu}


@dataclass
class ModelOutput:
    """A transformers-style output record."""

    last_hidden_state: torch.Tensor
    attentions: tuple[torch.Tensor, ...] | None = None


@module(F, args(lambda: randn(2, 5, 16), lambda: (torch.rand(2, 5) > 0.3).long()))
class SelfAttentionWithMask(nn.Module):
    """BERT-style self-attention with an extended additive mask built from torch.finfo."""

    def __init__(self) -> None:
        super().__init__()
        self.config = TinyConfig()
        self.qkv = nn.Linear(16, 48)
        self.out = nn.Linear(16, 16)
        self.eval()

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = hidden.size()
        heads = self.config.num_heads
        head_dim = self.config.hidden_size // heads
        q, k, v = self.qkv(hidden).split(self.config.hidden_size, dim=-1)
        q, k, v = (t.view(batch, seq, heads, head_dim).transpose(1, 2) for t in (q, k, v))
        extended = (1.0 - attention_mask[:, None, None, :].to(hidden.dtype)) * torch.finfo(hidden.dtype).min
        scores = q @ k.transpose(-1, -2) / math.sqrt(head_dim) + extended
        context = scores.softmax(-1) @ v
        return self.out(context.transpose(1, 2).reshape(batch, seq, -1))


@module(F, x(2, 5, 16))
class ConfigDrivenMLP(nn.Module):
    """Activation looked up in an ACT2FN table by a config string."""

    def __init__(self) -> None:
        super().__init__()
        self.config = TinyConfig(hidden_act="silu")
        self.up = nn.Linear(16, 32)
        self.down = nn.Linear(32, 16)
        self.act = ACT2FN[self.config.hidden_act]
        self.norm = nn.LayerNorm(16, eps=self.config.layer_norm_eps)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.norm(hidden + self.down(self.act(self.up(hidden))))


@module(F, x(2, 5, 16))
class ReturnsModelOutput(nn.Module):
    """Returns a dataclass output; optional fields depend on config flags."""

    def __init__(self) -> None:
        super().__init__()
        self.config = TinyConfig()
        self.fc = nn.Linear(16, 16)

    def forward(self, hidden: torch.Tensor) -> tuple[Any, ...]:
        out = ModelOutput(last_hidden_state=self.fc(hidden))
        if self.config.output_attentions:
            out.attentions = (hidden,)
        return (out.last_hidden_state, out.attentions)


@module(F, args(lambda: ints(50, 2, 6)))
class EmbeddingsWithPositions(nn.Module):
    """Token + position embeddings, positions from a buffer sliced by the sequence length."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens = nn.Embedding(50, 8)
        self.positions = nn.Embedding(16, 8)
        self.register_buffer("position_ids", torch.arange(16).expand((1, -1)), persistent=False)
        self.norm = nn.LayerNorm(8)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        seq = input_ids.shape[1]
        return self.norm(self.tokens(input_ids) + self.positions(self.position_ids[:, :seq]))


@program(F, x(2, 6, 8))
def causal_mask_from_shape(scores: torch.Tensor) -> torch.Tensor:
    seq = scores.shape[-1]
    mask = torch.tril(torch.ones(seq, seq, dtype=torch.bool, device=scores.device))
    return scores.masked_fill(~mask[: scores.shape[1], :], torch.finfo(scores.dtype).min).softmax(-1)


@program(F, x(2, 4, 8))
def rotary_embedding(q: torch.Tensor) -> torch.Tensor:
    dim = q.shape[-1]
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
    t = torch.arange(q.shape[-2]).float()
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    rotated = torch.cat((-q[..., dim // 2 :], q[..., : dim // 2]), dim=-1)
    return q * emb.cos() + rotated * emb.sin()


@program(F, x(4, 8))
def dtype_plumbing(a: torch.Tensor) -> torch.Tensor:
    input_dtype = a.dtype
    h = a.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    return (h * torch.rsqrt(variance + 1e-6)).to(input_dtype)


@program(F, x(4))
def warnings_warn_in_forward(a: torch.Tensor) -> torch.Tensor:
    if a.dim() == 1:
        warnings.warn("corpus: 1-d input, adding a batch dimension", stacklevel=1)
        a = a.unsqueeze(0)
    return a * 2


@program(F, x(4))
def logger_call_in_forward(a: torch.Tensor) -> torch.Tensor:
    LOGGER.debug("corpus: forward with %d elements", a.numel())
    return a.sin()


@program(F, x(4))
def jit_is_scripting_check(a: torch.Tensor) -> torch.Tensor:
    if not torch.jit.is_scripting() and not torch.jit.is_tracing():
        return a.relu()
    return a


@program(F, x(4, 4))
def default_dtype_and_device(a: torch.Tensor) -> torch.Tensor:
    b = torch.ones(4, dtype=torch.get_default_dtype(), device=a.device)
    return a + b


@program(F, x(2, 3, 8, 8))
def torchvision_style_residual(a: torch.Tensor) -> torch.Tensor:
    identity = a
    out = nnf.relu(a * 0.5)
    out = out + 0.1
    out += identity
    return nnf.relu(out).flatten(1).mean(1)


@program(F, args(lambda: randn(2, 5, 8), lambda: None, lambda: True))
def optional_arguments_as_in_hf(hidden: torch.Tensor, head_mask: Any, return_dict: Any) -> Any:
    if head_mask is not None:
        hidden = hidden * head_mask
    outputs = (hidden.tanh(), hidden.mean(1))
    if not return_dict:
        return outputs
    return {"hidden": outputs[0], "pooled": outputs[1]}


@program(F, x(2, 8))
def kwargs_pop_pattern(a: torch.Tensor) -> torch.Tensor:
    def layer(t: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        scale = kwargs.pop("scale", 1.0)
        bias = kwargs.get("bias", 0.0)
        return t * scale + bias + len(kwargs)

    return layer(a, scale=2.0, bias=1.0, unused=None)


@program(F, x(2, 4, 8))
def head_split_and_merge(a: torch.Tensor) -> torch.Tensor:
    b, s, d = a.shape
    heads = 2
    per_head = a.view(b, s, heads, d // heads).permute(0, 2, 1, 3)
    merged = per_head.permute(0, 2, 1, 3).contiguous().view(b, s, d)
    return merged - a


@program(F, x(3, 10))
def label_smoothing_loss(logits: torch.Tensor) -> torch.Tensor:
    target = torch.arange(3) % 10
    return nnf.cross_entropy(logits, target, label_smoothing=0.1) + nnf.mse_loss(logits, logits.tanh())


@program(F, x(2, 8))
def getattr_config_with_default(a: torch.Tensor) -> torch.Tensor:
    config = TinyConfig()
    eps = getattr(config, "rms_norm_eps", config.layer_norm_eps)
    return a / (a.abs().mean(-1, keepdim=True) + eps)
