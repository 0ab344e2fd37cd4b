"""The harness's own models: pointwise and normalization microbenchmarks, MLPs and small conv nets.

Sizes: the CPU shapes are small enough for 2 threads (the pointwise chain has 4M
elements); CUDA shapes are large enough to keep an H200 busy.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import nn

from tools.bench.registry import BuildContext, Workload, benchmark_model, randn

# ---------------------------------------------------------------- pointwise


class PointwiseChain(nn.Module):
    """A chain of elementwise math that a fusing compiler turns into one kernel."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.sin(x) * torch.cos(x) + 0.5 * torch.exp(-x * x)
        y = torch.tanh(y) + torch.relu(x) * 0.1
        return torch.sigmoid(y) * x + 1.0


@benchmark_model("pointwise_chain", family="pointwise", quick_on=("cpu", "cuda"))
def pointwise_chain(ctx: BuildContext) -> Workload:
    """sin, cos, exp, tanh, relu, sigmoid chained over 4M elements (64M on CUDA)."""
    side = 8192 if ctx.large else 2048
    return Workload(
        PointwiseChain().to(ctx.device),
        lambda g: (randn(g, side, side, device=ctx.device),),
        inputs_require_grad=True,
    )


class BiasGelu(nn.Module):
    """Bias add, tanh-GELU and a scale: a typical transformer epilogue."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(width) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x + self.bias, approximate="tanh") * 1.5


@benchmark_model("bias_gelu", family="pointwise")
def bias_gelu(ctx: BuildContext) -> Workload:
    """Bias + GELU(tanh) + scale on a (rows, 4096) activation."""
    rows = 16384 if ctx.large else 512
    return Workload(
        BiasGelu(4096).to(ctx.device),
        lambda g: (randn(g, rows, 4096, device=ctx.device),),
        inputs_require_grad=True,
    )


# ---------------------------------------------------------------- normalization


class SoftmaxLayerNorm(nn.Module):
    """Softmax over the last dimension, a residual add, then LayerNorm."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        with torch.no_grad():
            self.norm.weight.normal_(1.0, 0.1)
            self.norm.bias.normal_(0.0, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(torch.softmax(x, dim=-1) + x)


@benchmark_model("softmax_layernorm", family="normalization", quick_on=("cpu", "cuda"))
def softmax_layernorm(ctx: BuildContext) -> Workload:
    """softmax + residual + LayerNorm on (32, 128, 512) ((64, 1024, 1024) on CUDA)."""
    shape = (64, 1024, 1024) if ctx.large else (32, 128, 512)
    return Workload(
        SoftmaxLayerNorm(shape[-1]).to(ctx.device),
        lambda g: (randn(g, *shape, device=ctx.device),),
        inputs_require_grad=True,
    )


class RMSNorm(nn.Module):
    """Root-mean-square normalization with a learned scale (LLaMA style)."""

    def __init__(self, width: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


@benchmark_model("rmsnorm", family="normalization")
def rmsnorm(ctx: BuildContext) -> Workload:
    """RMSNorm on (64, 128, 512) ((64, 2048, 1024) on CUDA)."""
    shape = (64, 2048, 1024) if ctx.large else (64, 128, 512)
    return Workload(
        RMSNorm(shape[-1]).to(ctx.device),
        lambda g: (randn(g, *shape, device=ctx.device),),
        inputs_require_grad=True,
    )


# ---------------------------------------------------------------- MLPs


def _mlp(widths: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for index, (fan_in, fan_out) in enumerate(itertools.pairwise(widths)):
        layers.append(nn.Linear(fan_in, fan_out))
        if index < len(widths) - 2:
            layers.append(nn.GELU())
    return nn.Sequential(*layers)


@benchmark_model("mlp", family="mlp", quick_on=("cpu", "cuda"))
def mlp(ctx: BuildContext) -> Workload:
    """Three Linear layers with GELU: 512-2048-2048-512, batch 64 (1024-4096-4096-1024, batch 2048 on CUDA)."""
    width, batch = (1024, 2048) if ctx.large else (512, 64)
    model = _mlp([width, 4 * width, 4 * width, width]).to(ctx.device)
    return Workload(model, lambda g: (randn(g, batch, width, device=ctx.device),))


class ResidualBlock(nn.Module):
    """Pre-LayerNorm residual block: x + Linear(GELU(Linear(LN(x))))."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


@benchmark_model("mlp_residual", family="mlp")
def mlp_residual(ctx: BuildContext) -> Workload:
    """Six pre-LayerNorm residual MLP blocks, width 256, batch 128 (width 1024, batch 1024 on CUDA)."""
    width, batch = (1024, 1024) if ctx.large else (256, 128)
    model = nn.Sequential(*[ResidualBlock(width) for _ in range(6)]).to(ctx.device)
    return Workload(model, lambda g: (randn(g, batch, width, device=ctx.device),))


# ---------------------------------------------------------------- conv nets


def _conv_bn_relu(fan_in: int, fan_out: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(fan_in, fan_out, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(fan_out),
        nn.ReLU(),
    )


class SmallConvNet(nn.Module):
    """Three conv-BatchNorm-ReLU stages, global average pooling and a classifier."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(_conv_bn_relu(3, 32), _conv_bn_relu(32, 64, 2), _conv_bn_relu(64, 64))
        self.classifier = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).mean(dim=(2, 3)))


def _image_inputs(ctx: BuildContext, batch: int, side: int):  # type: ignore[no-untyped-def]
    return lambda g: (randn(g, batch, 3, side, side, device=ctx.device),)


@benchmark_model("convnet_bn", family="conv")
def convnet_bn(ctx: BuildContext) -> Workload:
    """Small conv net with BatchNorm on 8x3x32x32 images (64x3x64x64 on CUDA)."""
    batch, side = (64, 64) if ctx.large else (8, 32)
    return Workload(SmallConvNet().to(ctx.device), _image_inputs(ctx, batch, side))


class BasicBlock(nn.Module):
    """ResNet basic block: two 3x3 conv-BN with a (projected) shortcut."""

    def __init__(self, fan_in: int, fan_out: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            _conv_bn_relu(fan_in, fan_out, stride),
            nn.Conv2d(fan_out, fan_out, 3, padding=1, bias=False),
            nn.BatchNorm2d(fan_out),
        )
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or fan_in != fan_out:
            self.shortcut = nn.Sequential(nn.Conv2d(fan_in, fan_out, 1, stride=stride, bias=False), nn.BatchNorm2d(fan_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.body(x) + self.shortcut(x))


@benchmark_model("resnet_tiny", family="conv")
def resnet_tiny(ctx: BuildContext) -> Workload:
    """A stem and three basic residual blocks (32-64-128) on 8x3x32x32 images (64x3x64x64 on CUDA)."""
    batch, side = (64, 64) if ctx.large else (8, 32)
    model = nn.Sequential(
        _conv_bn_relu(3, 32),
        BasicBlock(32, 32, 1),
        BasicBlock(32, 64, 2),
        BasicBlock(64, 128, 2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(128, 10),
    ).to(ctx.device)
    return Workload(model, _image_inputs(ctx, batch, side))
