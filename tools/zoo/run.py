"""Run one zoo model in this process: build it, make its inputs, eager references, then each compiler.

In the default mode the reference is eager's four inference calls. In training or autocast modes
(`tools.zoo.modes`) eager's results are also recomputed in float64 (a copy of the model and the
inputs made float64, no autocast), so that a difference from eager that is only rounding is not
reported as wrong; in training mode eager's parameters before each step are kept, and each
compiler starts each step from them.
"""

from __future__ import annotations

import copy
import time
import traceback
from typing import Any

import torch

from tools.zoo import training
from tools.zoo.inputs import MAKERS
from tools.zoo.measure import measure
from tools.zoo.models import ModelSpec, build, find
from tools.zoo.modes import Mode, to_float64, tolerance

SEED = 0


def make_calls(spec: ModelSpec, config: Any, mode: Mode | None = None) -> list[dict[str, Any]]:
    """The keyword arguments of the mode's calls (see `tools.zoo.modes`)."""
    maker = MAKERS[spec.inputs]
    calls = []
    for variant, offset in (mode or Mode()).calls:
        generator = torch.Generator().manual_seed(SEED + 1 + offset)
        calls.append(maker(config, generator, variant))
    return calls


def _eager_training(model: torch.nn.Module, calls: list[dict[str, Any]], mode: Mode) -> tuple[list[Any], list[Any]]:
    """Eager's steps: each call's results and the parameters and buffers it started from."""
    expected, states = [], []
    for index, kwargs in enumerate(calls):
        states.append(training.snapshot(model))
        expected.append(training.train_call(model, model, kwargs, index, mode))
        training.step(model)
    return expected, states


def _float64_reference(model: torch.nn.Module, calls: list[dict[str, Any]], mode: Mode,
                       states: list[Any] | None) -> tuple[list[Any] | None, str]:
    """The float64 eager run of every call (no autocast), or None and why it could not run."""
    exact = Mode(mode.task)
    try:
        reference = copy.deepcopy(model).double()
        out = []
        for index, kwargs in enumerate(calls):
            if states is not None:
                training.restore(reference, states[index])
                out.append(training.train_call(reference, reference, to_float64(kwargs), index, exact, torch.float64))
            else:
                with torch.no_grad():
                    out.append(reference(**to_float64(kwargs)))
        return out, ""
    except Exception as error:
        return None, f"{type(error).__name__}: {error}"[:300]


def run_model(name: str, compilers: list[str], mode: Mode | None = None) -> dict[str, Any]:
    """Everything the report needs about model `name` under each of `compilers`, as plain data."""
    mode = mode or Mode()
    spec = find(name)
    result: dict[str, Any] = {"model": name, "family": spec.family, "source": spec.source, "inputs": spec.inputs}
    if not mode.default:
        result["mode"] = mode.label
    started = time.perf_counter()
    references: list[Any] | None = None
    states: list[Any] | None = None
    try:
        torch.manual_seed(SEED)
        model, config = build(spec, train=mode.task == "train")
        result["parameters"] = sum(p.numel() for p in model.parameters())
        calls = make_calls(spec, config, mode)
        if mode.task == "train":
            if training.eager_is_random(model, calls[0], mode):
                model.eval()  # dropout that the config could not switch off: eval mode keeps eager repeatable
                result["train_in_eval_mode"] = True
            expected, states = _eager_training(model, calls, mode)
        else:
            with torch.no_grad(), mode.autocast_context():
                expected = [model(**kwargs) for kwargs in calls]
    except Exception as error:
        result["error"] = f"build or eager run failed: {type(error).__name__}: {error}"[:2000]
        result["traceback"] = traceback.format_exc()[-3000:]
        return result
    if not mode.default:
        references, why = _float64_reference(model, calls, mode, states)
        if why:
            result["no_float64_reference"] = why
    result["build_seconds"] = round(time.perf_counter() - started, 3)
    for compiler in compilers:
        result[compiler] = measure(compiler, model, calls, expected, tolerance(compiler, mode), mode, references,
                                   states).to_json()
    result["seconds"] = round(time.perf_counter() - started, 3)
    return result
