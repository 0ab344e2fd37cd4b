"""Capturing never changes the user's objects, and threads that miss the cache together compile once."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import torch
from capture_helpers import RecordingBackend

import capture


def test_tracing_a_leaf_module_leaves_its_parameters_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    seen: list[type] = []
    linear = torch.nn.functional.linear

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(type(model[0].weight))  # the user's module, while its forward runs on fake tensors
        return linear(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "linear", spy)
    capture.reset()
    compiled = capture.optimize(RecordingBackend())(model)
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), model(x))
    assert seen and all(kind is torch.nn.Parameter for kind in seen)


def test_threads_that_miss_together_compile_once() -> None:
    class SlowBackend(RecordingBackend):
        def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Any:
            time.sleep(0.2)  # long enough for every thread to miss the cache meanwhile
            return super().__call__(gm, example_inputs)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) * 2

    capture.reset()
    backend = SlowBackend()
    compiled = capture.optimize(backend)(fn)
    x = torch.randn(8)
    start = threading.Barrier(4)
    results: list[torch.Tensor] = []

    def call() -> None:
        start.wait()
        results.append(compiled(x))

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert backend.count == 1
    assert len(results) == 4
    for result in results:
        torch.testing.assert_close(result, fn(x))
