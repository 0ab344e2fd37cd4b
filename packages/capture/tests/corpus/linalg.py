"""Plain tensor programs: matmul variants, linear, conv, pooling, normalisation layers and attention."""

from __future__ import annotations

import torch
import torch.nn.functional as nnf

from ._registry import args, module, program, randn, x, xy

F = "linalg"


@program(F, xy((4, 5), (5, 3)))
def matmul_2d(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b + torch.mm(a, b) + torch.matmul(a, b)


@program(F, xy((2, 4, 5), (2, 5, 3)))
def batched_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.bmm(a, b) + a @ b


@program(F, xy((4, 5), (5,)))
def matrix_vector(a: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return a @ v + torch.mv(a, v) + v.dot(v)


@program(F, args(lambda: randn(3), lambda: randn(4, 5), lambda: randn(5, 3)))
def addmm_baddbmm(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.addmm(bias, a, b) + torch.baddbmm(bias, a[None], b[None])[0]


@program(F, xy((3, 4), (4, 5)))
def einsum_contractions(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.einsum("ij,jk->ik", a, b) + torch.einsum("ij->j", a).sum()


@program(F, args(lambda: randn(2, 8), lambda: randn(4, 8), lambda: randn(4)))
def functional_linear(a: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return nnf.linear(a, w, b)


@program(F, args(lambda: randn(1, 3, 8, 8), lambda: randn(4, 3, 3, 3)))
def conv2d_functional(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return nnf.conv2d(a, w, padding=1, stride=2)


@program(F, args(lambda: randn(2, 3, 10), lambda: randn(5, 3, 3)))
def conv1d_dilated(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return nnf.conv1d(a, w, dilation=2)


@program(F, x(1, 3, 8, 8))
def pooling(a: torch.Tensor) -> torch.Tensor:
    return nnf.max_pool2d(a, 2) + nnf.avg_pool2d(a, 2) + nnf.adaptive_avg_pool2d(a, 4)


@program(F, x(2, 5, 6))
def layer_norm_functional(a: torch.Tensor) -> torch.Tensor:
    return nnf.layer_norm(a, (6,))


@program(F, x(2, 5, 6))
def manual_rms_norm(a: torch.Tensor) -> torch.Tensor:
    return a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-6)


@program(F, x(2, 4, 3, 3))
def group_and_instance_norm(a: torch.Tensor) -> torch.Tensor:
    return nnf.group_norm(a, 2) + nnf.instance_norm(a)


@program(F, args(lambda: randn(2, 4, 6, 8), lambda: randn(2, 4, 6, 8), lambda: randn(2, 4, 6, 8)))
def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return nnf.scaled_dot_product_attention(q, k, v, is_causal=True)


@program(F, args(lambda: randn(2, 6, 8), lambda: randn(2, 6, 8)))
def manual_attention(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    scores = q @ k.transpose(-2, -1) / 8**0.5
    mask = torch.triu(torch.ones(6, 6, dtype=torch.bool), 1)
    return scores.masked_fill(mask, float("-inf")).softmax(-1) @ k


@program(F, x(1, 2, 4, 4))
def interpolate_and_pad(a: torch.Tensor) -> torch.Tensor:
    return nnf.pad(nnf.interpolate(a, scale_factor=2, mode="nearest"), (1, 1, 1, 1))


@program(F, x(4, 4))
def outer_and_kron(a: torch.Tensor) -> torch.Tensor:
    return torch.outer(a[0], a[1]) + torch.kron(a[:2, :2], a[2:, 2:])


@program(F, args(lambda: torch.randn(4, 4) + 4 * torch.eye(4)))
def linalg_solve_inverse(a: torch.Tensor) -> torch.Tensor:
    return torch.linalg.inv(a) @ a + torch.linalg.det(a)


@module(F, x(2, 3, 8, 8))
class ConvBnReluBlock(torch.nn.Module):
    """The ResNet stem pattern."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.MaxPool2d(2)
        self.eval()

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.pool(self.bn(self.conv(a)).relu())


@module(F, x(2, 5, 16))
class TransformerEncoderLayer(torch.nn.Module):
    """A torch.nn.TransformerEncoderLayer in eval mode."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.eval()

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.layer(a)


@module(F, x(2, 5, 8))
class LSTMLayer(torch.nn.Module):
    """An nn.LSTM."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(8, 6, batch_first=True)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        out, (h, c) = self.lstm(a)
        return out.sum(1) + h[0] + c[0]


@module(F, x(2, 5, 8))
class MultiheadAttentionModule(torch.nn.Module):
    """nn.MultiheadAttention."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(8, 2, batch_first=True)
        self.eval()

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        out, _ = self.attn(a, a, a, need_weights=False)
        return out


@module(F, x(3, 4, 6))
class StackedGRUAndLSTM(torch.nn.Module):
    """A GRU feeding a two-layer LSTM: nested tuple results of leaf modules."""

    def __init__(self) -> None:
        super().__init__()
        self.gru = torch.nn.GRU(6, 5, batch_first=True)
        self.lstm = torch.nn.LSTM(5, 4, num_layers=2, batch_first=True)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        seq, _ = self.gru(a)
        out, (h, c) = self.lstm(seq)
        return out[:, -1] + h[-1] - c.mean(0)
