"""Library idioms from the model zoo and the OpInfo sweep that capture traces without a graph break:
numpy on Python numbers, `importlib.util.find_spec`, transformers' `warning_once`, truth of a module,
an unbound parent `forward`, torch functions given a module or an options object, builtins over
symbolic sizes, composite ops on symbolic sizes, and tensor methods called through the class. Each is
compared with eager on seeded inputs, with its graph count."""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import logging
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from capture_helpers import RecordingBackend
from torch import nn

import capture


def _compile(fn: Any, **options: Any) -> tuple[Any, RecordingBackend, list[str]]:
    backend = RecordingBackend()
    breaks: list[str] = []
    hooks = capture.CaptureHooks(on_graph_break=[lambda event: breaks.append(str(event.reason))])
    return capture.optimize(backend, hooks=hooks, **options)(fn), backend, breaks


def _inputs(seed: int, *shapes: tuple[int, ...]) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator) for shape in shapes]


def _kernels_available() -> bool:
    return importlib.util.find_spec("kiln_no_such_kernel_package") is not None


def test_find_spec_is_answered_at_trace_time() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        x = x.relu()
        if _kernels_available() or importlib.util.find_spec("torch") is None:
            return x
        return x.sigmoid() * 2

    compiled, backend, breaks = _compile(f)
    for seed in (0, 1):
        (x,) = _inputs(seed, (3, 4))
        torch.testing.assert_close(compiled(x), f(x))
    assert backend.count == 1 and not breaks


def test_numpy_on_python_numbers_folds_and_numpy_scalars_are_graph_safe() -> None:
    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.d_model = 16

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, Any]:
            scale = np.sqrt(self.d_model)
            offset = np.log(float(self.d_model) / 4.0)
            y = x * scale + offset - np.float32(0.5) + np.int64(3)
            return y * np.sqrt(4.0), scale

    model = Scaled()
    compiled, backend, breaks = _compile(model)
    for seed in (0, 1):
        (x,) = _inputs(seed, (2, 5))
        got, scale = compiled(x)
        expected, expected_scale = model(x)
        torch.testing.assert_close(got, expected)
        assert type(scale) is type(expected_scale) and scale == expected_scale
    assert backend.count == 1 and not breaks
    assert "np." not in backend.graphs[0].code


def test_tensor_of_a_numpy_scalar_keeps_its_dtype() -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x + torch.tensor(np.float64(1.5)), torch.tensor(np.int32(2)) * x

    compiled, backend, _ = _compile(f)
    (x,) = _inputs(0, (4,))
    for got, expected in zip(compiled(x), f(x)):
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got, expected)
    assert backend.count == 1


def test_numpy_call_with_an_array_result_still_breaks() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x + float(np.arange(3).sum())

    compiled, _, _breaks = _compile(f)
    (x,) = _inputs(0, (4,))
    torch.testing.assert_close(compiled(x), f(x))


@functools.lru_cache(None)
def warning_once(self: logging.Logger, *args: Any) -> None:
    """transformers' `logger.warning_once` (utils/logging.py): an lru_cache'd `Logger.warning`."""
    self.warning(*args)


warning_once.__module__ = "transformers.utils.logging"
warning_once.__wrapped__.__module__ = "transformers.utils.logging"  # type: ignore[attr-defined]


class _Logger(logging.Logger):
    warning_once = warning_once  # transformers sets `logging.Logger.warning_once = warning_once`


@pytest.mark.parametrize("as_method", [False, True])
def test_warning_once_is_emitted_while_tracing_without_a_break(caplog: pytest.LogCaptureFixture,
                                                                as_method: bool) -> None:
    logger = _Logger(f"kiln_test_warning_once_{as_method}")
    warning_once.cache_clear()

    def f(x: torch.Tensor) -> torch.Tensor:
        x = x.sin()
        if as_method:
            logger.warning_once("the fast path is not available")
        else:
            warning_once(logger, "the fast path is not available")
        return x * 2

    compiled, backend, breaks = _compile(f)
    with caplog.at_level(logging.WARNING, logger=logger.name):
        logger.addHandler(caplog.handler)
        for seed in (0, 1, 2):
            (x,) = _inputs(seed, (3,))
            torch.testing.assert_close(compiled(x), f(x))
    assert backend.count == 1 and not breaks  # no recompile: the bound method is a new object on each read
    assert [r.getMessage() for r in caplog.records] == ["the fast path is not available"]


class _TruthOfModule(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(4)
        self.empty = nn.ModuleList()
        self.layers = nn.ModuleList([nn.Linear(4, 4)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.relu()
        if self.norm:
            x = self.norm(x)
        if self.empty:
            x = x + 100
        if self.layers:
            x = self.layers[0](x)
        return x * 2


def test_truth_of_a_module() -> None:
    model = _TruthOfModule()
    compiled, backend, breaks = _compile(model)
    for seed in (0, 1):
        (x,) = _inputs(seed, (2, 4))
        torch.testing.assert_close(compiled(x), model(x))
    assert backend.count == 1 and not breaks
    model.empty.append(nn.Identity())  # the container's length is guarded
    (x,) = _inputs(2, (2, 4))
    torch.testing.assert_close(compiled(x), model(x))
    assert backend.count == 2


class _ChannelsLayerNorm(nn.LayerNorm):
    """squeezebert's layer norm over channels: the parent's `forward` called unbound."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 2, 1)
        x = nn.LayerNorm.forward(self, x)
        return x.permute(0, 2, 1)


def test_unbound_parent_forward_on_a_module_subclass() -> None:
    torch.manual_seed(0)
    model = _ChannelsLayerNorm(4)
    nn.init.normal_(model.weight)
    compiled, backend, breaks = _compile(model)
    for seed in (0, 1):
        (x,) = _inputs(seed, (2, 4, 3))
        torch.testing.assert_close(compiled(x), model(x))
    assert backend.count == 1 and not breaks


def test_torch_function_given_a_module_argument() -> None:
    distance = nn.PairwiseDistance()

    def f(a: torch.Tensor, p: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        return F.triplet_margin_with_distance_loss(a, p, n, distance_function=distance, margin=0.5)

    compiled, backend, breaks = _compile(f)
    for seed in (0, 1):
        inputs = _inputs(seed, (3, 5), (3, 5), (3, 5))
        torch.testing.assert_close(compiled(*inputs), f(*inputs))
    assert backend.count == 1 and not breaks


def test_all_and_min_over_symbolic_sizes_guard_like_comparisons() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        if not all(x.shape):
            return x.new_zeros(1)
        if min(x.shape[0], x.shape[1]) <= 3 or max(x.shape) > 100 or any(s == 7 for s in x.shape):
            return x.cos()
        return x.sin() + 1

    compiled, backend, breaks = _compile(f)
    for rows, cols in ((8, 8), (8, 8), (8, 12), (8, 16), (2, 16)):
        (x,) = _inputs(rows * cols, (rows, cols))
        torch.testing.assert_close(compiled(x), f(x))
    assert not breaks
    assert backend.count == 3  # static, then dynamic for cols; then the min(...) <= 3 branch flips


@pytest.mark.parametrize("case", ["baddbmm", "pad", "zero_pad", "interpolate"])
def test_composite_ops_on_symbolic_sizes(case: str) -> None:
    def f(x: torch.Tensor, b: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        if case == "baddbmm":
            return torch.baddbmm(b, x, w)
        if case == "pad":
            return F.pad(x, (0, (5 - x.shape[2] % 5) % 5, 0, 0))
        if case == "zero_pad":
            return nn.ZeroPad2d((0, 0, 1, -1))(x)
        return F.interpolate(x.unsqueeze(1), size=(x.shape[1] // 2, 6), mode="bilinear", align_corners=False)

    compiled, backend, breaks = _compile(f, dynamic=True)
    for seq in (8, 12):
        x, b, w = _inputs(seq, (2, seq, 4), (2, 1, 4), (2, 4, 4))
        torch.testing.assert_close(compiled(x, b, w), f(x, b, w))
    assert backend.count == 1 and not breaks


@pytest.mark.parametrize("name", ["__radd__", "__rmul__", "__rand__", "__ror__", "__rxor__", "__getitem__",
                                  "cfloat", "tensor_split", "sum"])
def test_tensor_methods_called_through_the_class(name: str) -> None:
    method = getattr(torch.Tensor, name)
    integer = name in ("__rand__", "__ror__", "__rxor__")

    def f(x: torch.Tensor) -> Any:
        if name == "__getitem__":
            return method(x, (slice(None), 1))
        if name in ("cfloat", "sum"):
            return method(x)
        if name == "tensor_split":
            return method(x, 2, 1)
        return method(x, 3 if integer else 2.5)

    compiled, backend, breaks = _compile(f)
    (x,) = _inputs(0, (4, 3))
    if integer:
        x = (x * 10).long()
    torch.testing.assert_close(compiled(x), f(x))
    assert backend.count == 1 and not breaks


def test_an_op_reading_tensor_values_is_a_graph_break_not_an_eager_error() -> None:
    def f(x: torch.Tensor, indices: torch.Tensor) -> Any:
        return torch.tensor_split(x.sin(), indices, 1)

    # Without scalar outputs in the graph (by default the indices are read as unbacked SymInts).
    off = capture.CaptureConfig(capture_scalar_outputs=False)
    compiled, _, breaks = _compile(f, config=off)
    (x,) = _inputs(0, (3, 6))
    indices = torch.tensor([1, 4])
    for got, expected in zip(compiled(x, indices), f(x, indices)):
        torch.testing.assert_close(got, expected)
    assert any("reads the values of a tensor argument" in reason for reason in breaks)


def test_numpy_ufunc_of_a_symbolic_size_is_traced() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x / np.sqrt(x.shape[-1])

    compiled, backend, breaks = _compile(f, dynamic=True)
    for cols in (4, 9, 16):
        (x,) = _inputs(cols, (2, cols))
        torch.testing.assert_close(compiled(x), f(x))
    assert backend.count == 1 and not breaks


def test_function_marked_constant_is_called_once_at_trace_time() -> None:
    calls: list[str] = []

    @functools.lru_cache
    def is_fast_path_available(name: str = "kiln_no_such_kernel_package") -> bool:
        calls.append(name)
        if importlib.util.find_spec(name) is not None:
            return bool(importlib.metadata.version(name))  # a call capture does not trace
        return False

    is_fast_path_available.__wrapped__._dynamo_marked_constant = True  # type: ignore[attr-defined]

    def f(x: torch.Tensor) -> torch.Tensor:
        x = x.cos()
        if is_fast_path_available() or is_fast_path_available("torch") is False:
            return x
        return x * 3

    compiled, backend, breaks = _compile(f)
    for seed in (0, 1):
        (x,) = _inputs(seed, (5,))
        torch.testing.assert_close(compiled(x), f(x))
    assert backend.count == 1 and not breaks
    assert calls == ["kiln_no_such_kernel_package", "torch"]


def test_sizes_in_tuples_with_symbolic_sizes() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        if 0 in x.shape or 7 in x.shape[1:]:
            return x.new_zeros(1)
        return x.view(x.shape[:1] + (2,) + x.shape[1:-1] + (x.shape[-1] // 2,)).sum(1)

    compiled, backend, breaks = _compile(f, dynamic=True)
    for cols in (4, 8, 12):
        (x,) = _inputs(cols, (3, 5, cols))
        torch.testing.assert_close(compiled(x), f(x))
    assert backend.count == 1 and not breaks


def test_a_torch_size_argument_is_a_constant() -> None:
    def f(x: torch.Tensor, shape: torch.Size) -> torch.Tensor:
        rows, cols = shape[:2]
        return x.view(rows, cols, -1).sum(-1) * len(shape)

    compiled, backend, breaks = _compile(f)
    for seed, shape in ((0, torch.Size([2, 3, 4])), (1, torch.Size([2, 3, 4])), (2, torch.Size([3, 2, 4]))):
        (x,) = _inputs(seed, (24,))
        torch.testing.assert_close(compiled(x, shape), f(x, shape))
    assert backend.count == 2 and not breaks  # the Size is guarded by value


def test_slice_builtin_over_symbolic_sizes() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1] - 2
        parts = []
        for i in range(3):
            indices = [slice(0, None)] * x.ndim
            indices[1] = slice(i, i + n)
            parts.append(x[tuple(indices)])
        return torch.cat(parts, dim=-1)

    compiled, backend, breaks = _compile(f, dynamic=True)
    for cols in (6, 9):
        (x,) = _inputs(cols, (2, cols, 3))
        torch.testing.assert_close(compiled(x), f(x))
    assert backend.count == 1 and not breaks
