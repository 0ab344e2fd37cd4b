"""Outputs and gradients of compiled training graphs match eager on fresh random inputs."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.fx
from aotgrad_helpers import RecordingCompiler, TransformerBlock, assert_close_grads, strict

import aotgrad

PARTITIONS = [aotgrad.min_cut, aotgrad.save_all]


def _compile(model: torch.nn.Module, example: list[torch.Tensor], partition=aotgrad.min_cut, compiler=None):
    gm = torch.fx.symbolic_trace(model)
    fw = compiler or aotgrad.eager_compiler
    return aotgrad.aot_graph(gm, example, fw_compiler=fw, partition=partition, config=strict())


def _grads(out: torch.Tensor, tensors: list[torch.Tensor], seed_grad: torch.Tensor) -> list[torch.Tensor | None]:
    return list(torch.autograd.grad(out, tensors, seed_grad, allow_unused=True))


@pytest.mark.parametrize("partition", PARTITIONS)
def test_mlp_matches_eager(partition) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8), torch.nn.Tanh())
    x = torch.randn(6, 16, requires_grad=True)
    compiled = _compile(model, [x], partition)
    x2 = torch.randn(6, 16, requires_grad=True)  # a fresh input, not the example one
    out, ref = compiled(x2), model(x2)
    torch.testing.assert_close(out, ref)
    seed = torch.randn_like(ref)
    tensors = [x2, *model.parameters()]
    assert_close_grads(_grads(out, tensors, seed), _grads(ref, tensors, seed))


def test_backward_runs_as_one_compiled_op() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    x = torch.randn(3, 4, requires_grad=True)
    out = _compile(model, [x])(x)
    assert "CompiledFunction" in type(out.grad_fn).__name__
    out.sum().backward()
    assert x.grad is not None and model[0].weight.grad is not None


class ConvBN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn(self.conv(x)))
        return self.head(y.mean(dim=(2, 3)))


def test_conv_batchnorm_train_mode_updates_running_stats_like_eager() -> None:
    torch.manual_seed(0)
    model = ConvBN().train()
    twin = copy.deepcopy(model)
    x = torch.randn(4, 3, 8, 8)
    compiled = _compile(model, [x])
    for _ in range(3):  # three steps: the stats must track eager's every time
        x = torch.randn(4, 3, 8, 8)
        out, ref = compiled(x), twin(x)
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
        seed = torch.randn_like(ref)
        assert_close_grads(
            _grads(out, list(model.parameters()), seed), _grads(ref, list(twin.parameters()), seed),
            rtol=1e-4, atol=1e-5,
        )
        torch.testing.assert_close(model.bn.running_mean, twin.bn.running_mean)
        torch.testing.assert_close(model.bn.running_var, twin.bn.running_var)
        assert int(model.bn.num_batches_tracked) == int(twin.bn.num_batches_tracked)
    assert int(model.bn.num_batches_tracked) == 3


def test_batchnorm_eval_mode_is_inference() -> None:
    model = ConvBN()
    with torch.no_grad():
        model.bn.running_mean.normal_()
        model.bn.running_var.uniform_(0.5, 2.0)
    model.eval()
    x = torch.randn(2, 3, 8, 8)
    recorder = RecordingCompiler()
    with torch.no_grad():
        compiled = _compile(model, [x], compiler=recorder)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    assert len(recorder.graphs) == 1  # forward only: no backward graph on the inference path


def test_transformer_block_with_dropout_matches_eager_under_same_seed() -> None:
    torch.manual_seed(1)
    block = TransformerBlock(p=0.2).train()
    x = torch.randn(2, 8, 32, requires_grad=True)
    compiled = _compile(block, [x])
    x = torch.randn(2, 8, 32, requires_grad=True)
    torch.manual_seed(123)
    out = compiled(x)
    torch.manual_seed(123)
    ref = block(x)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    seed = torch.randn_like(ref)
    tensors = [x, *block.parameters()]
    assert_close_grads(_grads(out, tensors, seed), _grads(ref, tensors, seed), rtol=1e-4, atol=1e-5)


def test_dropout_forward_and_backward_agree() -> None:
    # The gradient of sum(dropout(x)) is the mask scaled: zero exactly where the output is zero.
    x = torch.rand(64, 64) + 1.0
    x.requires_grad_(True)
    compiled = aotgrad.aot_function(
        lambda t: torch.nn.functional.dropout(t, 0.5, training=True), fw_compiler=aotgrad.eager_compiler
    )
    out = compiled(x)
    (grad,) = torch.autograd.grad(out.sum(), [x])
    assert torch.equal(out == 0, grad == 0)
    torch.testing.assert_close(out[out != 0], (x * 2)[out != 0])


def test_layer_norm_and_softmax() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.softmax(torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b), dim=-1)

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    args = [torch.randn(4, 5, 16), torch.randn(16), torch.randn(16)]
    args = [a.requires_grad_(True) for a in args]
    out, ref = compiled(*args), fn(*args)
    torch.testing.assert_close(out, ref)
    seed = torch.randn_like(ref)
    assert_close_grads(_grads(out, args, seed), _grads(ref, args, seed))


def test_only_some_inputs_require_grad() -> None:
    def fn(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return (a @ b).sin() * c, c.cos()

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    a = torch.randn(3, 4, requires_grad=True)
    b = torch.randn(4, 5)
    c = torch.randn(3, 5, requires_grad=True)
    (out, other), (ref, ref_other) = compiled(a, b, c), fn(a, b, c)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(other, ref_other)
    assert not b.requires_grad and out.requires_grad
    seed = torch.randn_like(ref)
    assert_close_grads(_grads(out, [a, c], seed), _grads(ref, [a, c], seed))
    # Now b requires grad too: a new gradient pattern compiles a new graph.
    b.requires_grad_(True)
    out = compiled(a, b, c)[0]
    assert_close_grads(_grads(out, [a, b, c], seed), _grads(fn(a, b, c)[0], [a, b, c], seed))


def test_no_grad_mode_takes_inference_path() -> None:
    recorder = RecordingCompiler()
    compiled = aotgrad.aot_function(torch.nn.functional.silu, fw_compiler=recorder, config=strict())
    x = torch.randn(10, requires_grad=True)
    with torch.no_grad():
        out = compiled(x)
    assert not out.requires_grad
    torch.testing.assert_close(out, torch.nn.functional.silu(x).detach())
    assert len(recorder.graphs) == 1


def test_float64_and_bfloat16_tolerances() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return (x.exp() * x.sigmoid()).sum(-1)

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    for dtype, tol in ((torch.float64, 1e-12), (torch.bfloat16, 2e-2)):
        x = torch.randn(8, 8, dtype=dtype, requires_grad=True)
        out, ref = compiled(x), fn(x)
        torch.testing.assert_close(out, ref, rtol=tol, atol=tol)
        seed = torch.randn_like(ref)
        assert_close_grads(_grads(out, [x], seed), _grads(ref, [x], seed), rtol=tol, atol=tol)


def test_detach_and_no_grad_blocks_stop_gradients_as_in_eager() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        scale = x.detach().abs().mean()
        with torch.no_grad():
            shift = (x * w).sum()
        return (x * w).sin() * scale + shift * x

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    x, w = torch.randn(5, requires_grad=True), torch.randn(5, requires_grad=True)
    out, ref = compiled(x, w), fn(x, w)
    torch.testing.assert_close(out, ref)
    seed = torch.randn_like(ref)
    assert_close_grads(_grads(out, [x, w], seed), _grads(ref, [x, w], seed))


def test_hugging_face_gpt2_trains_like_eager() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(
        n_embd=32, n_layer=1, n_head=4, vocab_size=64, n_positions=16, bos_token_id=0, eos_token_id=0
    )
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).train()

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gpt2 = model

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.gpt2(input_ids=ids).logits

    wrapper = Logits()
    compiled = aotgrad.aot_module(wrapper, fw_compiler=aotgrad.eager_compiler, config=strict())
    ids = torch.randint(0, 64, (2, 12))
    torch.manual_seed(7)
    out = compiled(ids)
    torch.manual_seed(7)
    ref = wrapper(ids)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    seed = torch.randn_like(ref)
    params = list(model.parameters())
    assert_close_grads(_grads(out, params, seed), _grads(ref, params, seed), rtol=1e-3, atol=1e-4)


def test_dropout_on_non_contiguous_input_draws_eagers_mask() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.dropout(x.transpose(0, 1) * 2, 0.5).sum(0)

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    x = torch.randn(6, 4, 3, requires_grad=True)
    torch.manual_seed(11)
    out = compiled(x)
    torch.manual_seed(11)
    ref = fn(x)
    torch.testing.assert_close(out, ref)
    seed = torch.randn_like(ref)
    assert_close_grads(_grads(out, [x], seed), _grads(ref, [x], seed))


ZOO = {
    "lstm": (lambda: torch.nn.LSTM(4, 8, batch_first=True), lambda: torch.randn(2, 3, 4)),
    "gru": (lambda: torch.nn.GRU(4, 8), lambda: torch.randn(3, 2, 4)),
    "encoder_layer": (
        lambda: torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True),
        lambda: torch.randn(2, 5, 16),
    ),
    "groupnorm_pool": (
        lambda: torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.GroupNorm(2, 8), torch.nn.MaxPool2d(2)),
        lambda: torch.randn(2, 3, 9, 9),
    ),
    "instancenorm_stats": (
        lambda: torch.nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
        lambda: torch.randn(2, 3, 6, 6),
    ),
}


@pytest.mark.parametrize("name", sorted(ZOO))
def test_torch_nn_layers_train_like_eager(name: str) -> None:
    make_module, make_input = ZOO[name]
    torch.manual_seed(0)
    model = make_module().train()
    twin = copy.deepcopy(model)
    compiled = aotgrad.aot_module(model, fw_compiler=aotgrad.eager_compiler, config=strict())
    x = make_input()
    torch.manual_seed(3)
    out = compiled(x)
    torch.manual_seed(3)
    ref = twin(x)
    out, ref = (out[0], ref[0]) if isinstance(ref, tuple) else (out, ref)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    seed = torch.randn_like(ref)  # a random seed gradient: sum() would hide errors under normalization
    assert_close_grads(
        _grads(out, list(model.parameters()), seed), _grads(ref, list(twin.parameters()), seed), rtol=1e-4, atol=1e-5
    )
    for got, want in zip(model.buffers(), twin.buffers()):
        torch.testing.assert_close(got, want)


def test_batchnorm_train_mode_under_no_grad_still_updates_stats() -> None:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).train()
    twin = copy.deepcopy(model)
    compiled = aotgrad.aot_module(model, fw_compiler=aotgrad.eager_compiler, config=strict())
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 3, 6, 6)
            torch.testing.assert_close(compiled(x), twin(x), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(model[1].running_var, twin[1].running_var)
    assert int(model[1].num_batches_tracked) == 2


def test_backward_twice_with_retain_graph() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.GELU())
    x = torch.randn(2, 4, requires_grad=True)
    out = _compile(model, [x])(x)
    out.sum().backward(retain_graph=True)
    first = x.grad.clone()
    out.sum().backward()  # the saved values survive the first backward when retained
    torch.testing.assert_close(x.grad, 2 * first)
