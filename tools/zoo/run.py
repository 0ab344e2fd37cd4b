"""Run one zoo model in this process: build it, make its four inputs, eager references, then each compiler."""

from __future__ import annotations

import time
import traceback
from typing import Any

import torch

from tools.zoo.inputs import MAKERS
from tools.zoo.measure import CALLS, measure
from tools.zoo.models import ModelSpec, build, find

TOLERANCE = {"kiln": 1e-4, "dynamo": 1e-4, "kiln-default": 2e-3}
"""Scaled max error allowed against eager. Capture-only runs the same ops as eager (differences come
only from how decompositions or fused fast paths are chosen); Kiln's kernels reorder reductions."""

SEED = 0


def make_calls(spec: ModelSpec, config: Any) -> list[dict[str, Any]]:
    """The keyword arguments of the four calls (see `tools.zoo.measure.CALLS`)."""
    maker = MAKERS[spec.inputs]
    calls = []
    for variant, offset in CALLS:
        generator = torch.Generator().manual_seed(SEED + 1 + offset)
        calls.append(maker(config, generator, variant))
    return calls


def run_model(name: str, compilers: list[str]) -> dict[str, Any]:
    """Everything the report needs about model `name` under each of `compilers`, as plain data."""
    spec = find(name)
    result: dict[str, Any] = {"model": name, "family": spec.family, "source": spec.source, "inputs": spec.inputs}
    started = time.perf_counter()
    try:
        torch.manual_seed(SEED)
        model, config = build(spec)
        result["parameters"] = sum(p.numel() for p in model.parameters())
        calls = make_calls(spec, config)
        with torch.no_grad():
            expected = [model(**kwargs) for kwargs in calls]
    except Exception as error:
        result["error"] = f"build or eager run failed: {type(error).__name__}: {error}"[:2000]
        result["traceback"] = traceback.format_exc()[-3000:]
        return result
    result["build_seconds"] = round(time.perf_counter() - started, 3)
    for compiler in compilers:
        result[compiler] = measure(compiler, model, calls, expected, TOLERANCE[compiler]).to_json()
    result["seconds"] = round(time.perf_counter() - started, 3)
    return result
