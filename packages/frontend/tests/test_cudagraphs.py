"""CUDA graph replay (mode="reduce-overhead", backend="cudagraphs"): CPU behaviour and the GPU tier."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch

import frontend
from frontend.backends.registry import lookup_backend
from frontend.config import Config
from frontend.context import CompileContext
from frontend.cudagraphs import CudaGraphRunner, ReplayCounter, guard_outputs


def _context(**options: Any) -> CompileContext:
    return CompileContext.for_config(Config().with_options(options), "fn")


def test_runner_passes_cpu_calls_through() -> None:
    calls: list[int] = []

    def run(x: torch.Tensor) -> list[torch.Tensor]:
        calls.append(1)
        return [x * 2]

    runner = CudaGraphRunner(run, _context(cudagraphs=True))
    x = torch.randn(4)
    for _ in range(3):
        torch.testing.assert_close(runner(x)[0], x * 2)
    assert len(calls) == 3 and runner.recordings_made == 0


class SimulatedRecorder:
    """A CPU stand-in for CUDA graphs with the same memory semantics.

    A replay recomputes from the *static input tensors* (whatever memory they hold now) and writes
    into the *same output tensors* as the recording, exactly what a CUDA graph replay does.
    """

    def __init__(self) -> None:
        self.recordings = 0

    def handles(self, tensors: Any) -> bool:
        return True

    def record(self, run: Any, static_inputs: list[Any]) -> tuple[Any, Any]:
        self.recordings += 1
        outputs = run(*static_inputs)

        def replay() -> None:
            for buffer, fresh in zip(outputs, run(*static_inputs)):
                buffer.copy_(fresh)

        return replay, outputs


def _linear_relu(x: torch.Tensor, w: torch.Tensor) -> list[torch.Tensor]:
    return [torch.relu(x @ w) + 1]


@pytest.mark.parametrize("copy_outputs", [True, False])
def test_replay_logic_static_inputs_shapes_and_moved_parameters(copy_outputs: bool) -> None:
    recorder = SimulatedRecorder()
    context = _context(cudagraphs=True, cudagraph_copy_outputs=copy_outputs)
    runner = CudaGraphRunner(_linear_relu, context, "forward", recorder=recorder)
    weight = torch.randn(6, 6)
    results = []
    for size in (4, 4, 4, 4, 3, 3, 3):  # warm-up, record, replay, replay; then a new shape
        x = torch.randn(size, 6)
        out = runner(x, weight)[0]
        torch.testing.assert_close(out, _linear_relu(x, weight)[0])
        results.append((x, out.clone()))
    assert recorder.recordings == 2 and runner.replays == 5
    with torch.no_grad():
        weight.mul_(-1)  # the parameter is read in place: the next replay sees the update
    x = torch.randn(4, 6)
    torch.testing.assert_close(runner(x, weight)[0], _linear_relu(x, weight)[0])
    moved = weight.clone()  # a parameter replaced by a new tensor: recorded again, then copied
    torch.testing.assert_close(runner(x, moved)[0], _linear_relu(x, moved)[0])
    assert recorder.recordings == 3
    other = torch.randn(6, 6)
    torch.testing.assert_close(runner(x, other)[0], _linear_relu(x, other)[0])
    assert recorder.recordings == 3  # copied into the static buffer now, no new recording


def test_kept_outputs_stay_valid_with_copies_and_raise_without() -> None:
    weight = torch.randn(6, 6)
    xs = [torch.randn(4, 6) for _ in range(4)]
    copying = CudaGraphRunner(_linear_relu, _context(cudagraphs=True), recorder=SimulatedRecorder())
    kept = [copying(x, weight)[0] for x in xs]
    for x, out in zip(xs, kept):
        torch.testing.assert_close(out, _linear_relu(x, weight)[0])
    aliasing = CudaGraphRunner(
        _linear_relu, _context(cudagraphs=True, cudagraph_copy_outputs=False), recorder=SimulatedRecorder()
    )
    kept = [aliasing(x, weight)[0] for x in xs]
    torch.testing.assert_close(kept[-1], _linear_relu(xs[-1], weight)[0])
    with pytest.raises(frontend.CudaGraphOutputOverwrittenError):
        kept[-2].sum()


def test_cudagraphs_backend_on_cpu_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    gm = torch.fx.symbolic_trace(lambda x: torch.tanh(x) * 3)
    x = torch.randn(6)
    with caplog.at_level(logging.DEBUG, logger="kiln.fallbacks"):
        compiled = lookup_backend("cudagraphs")(gm, [x], _context())
    torch.testing.assert_close(compiled(x), torch.tanh(x) * 3)
    assert "needs CUDA tensors" in caplog.text


@pytest.mark.gpu
def test_runner_records_per_shape_and_keeps_outputs_safe() -> None:
    weight = torch.randn(16, 16, device="cuda")

    def run(x: torch.Tensor, w: torch.Tensor) -> list[torch.Tensor]:
        return [torch.relu(x @ w) + 1]

    runner = CudaGraphRunner(run, _context(cudagraphs=True))
    kept = []
    for size in (8, 8, 8, 8, 4, 4, 4):
        x = torch.randn(size, 16, device="cuda")
        out = runner(x, weight)[0]
        torch.testing.assert_close(out, run(x, weight)[0])
        kept.append((x, out))
    for x, out in kept:  # earlier outputs were not overwritten by later replays
        torch.testing.assert_close(out, run(x, weight)[0])
    assert runner.recordings_made == 2 and runner.replays >= 4
    with torch.no_grad():
        weight.mul_(2)  # read in place: replays see the update
    x = torch.randn(8, 16, device="cuda")
    torch.testing.assert_close(runner(x, weight)[0], run(x, weight)[0])


@pytest.mark.gpu
def test_reduce_overhead_matches_eager() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).cuda().eval()
    compiled = frontend.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(4):
            x = torch.randn(16, 32, device="cuda")
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_cudagraphs_backend_trains() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1)).cuda()
    compiled = frontend.compile(model, backend="cudagraphs")
    for _ in range(3):
        x = torch.randn(16, 32, device="cuda")
        model.zero_grad(set_to_none=True)
        compiled(x).sum().backward()
        got = [p.grad.clone() for p in model.parameters()]
        model.zero_grad(set_to_none=True)
        model(x).sum().backward()
        for g, p in zip(got, model.parameters()):
            torch.testing.assert_close(g, p.grad, rtol=1e-3, atol=1e-4)


def test_uncopied_outputs_raise_naming_the_fix_once_overwritten() -> None:
    counter = ReplayCounter("forward graph of model")
    static = [torch.randn(3, 4)]
    counter.replays += 1
    (first,) = guard_outputs(static, counter)
    torch.testing.assert_close(first * 2, static[0] * 2)  # valid until the next replay
    assert type(first * 2) is torch.Tensor  # results of ops are ordinary tensors
    counter.replays += 1
    (second,) = guard_outputs(static, counter)
    second.sum()
    with pytest.raises(frontend.CudaGraphOutputOverwrittenError, match=r"clone\(\)") as info:
        first + 1
    assert "forward graph of model" in str(info.value)
    assert "cudagraph_copy_outputs" in str(info.value)


@pytest.mark.gpu
def test_reduce_overhead_without_copies_detects_overwritten_outputs() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU()).cuda().eval()
    compiled = frontend.compile(model, mode="reduce-overhead", options={"cudagraph_copy_outputs": False})
    with torch.no_grad():
        outputs = []
        for _ in range(4):  # warm-up, record, replay, replay
            x = torch.randn(8, 32, device="cuda")
            out = compiled(x)
            torch.testing.assert_close(out, model(x), rtol=1e-3, atol=1e-3)
            outputs.append(out)
        with pytest.raises(frontend.CudaGraphOutputOverwrittenError):
            outputs[-2] + 1
