"""Cases of test_runtime_checks.py, run in a child process under TRITON_INTERPRET=1 (an unchecked
out-of-bounds load in Triton's interpreter reads raw memory and may crash it).

Each case compiles an ATen graph with ``inductor_ir.compile_graph`` and the Triton backend on CPU
tensors, runs valid inputs (compared with eager) and invalid ones, and prints one JSON line: whether
valid inputs matched, the exception eager raised and the one the compiled graph raised, and what the
kernels' source holds. ``{"start": name}`` comes first, so a crash names its case.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend, TritonConfig

_CACHE = Path(os.environ.get("KILN_CACHE_DIR") or tempfile.mkdtemp(prefix="kiln-triton-checks-"))


def _as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _same(actual: Any, expected: Any) -> bool:
    try:
        torch.testing.assert_close(_as_tuple(actual), _as_tuple(expected), equal_nan=True)
    except AssertionError:
        return False
    return True


def _outcome(fn: Callable[..., Any], args: list[torch.Tensor]) -> tuple[str | None, str]:
    try:
        fn(*args)
    except Exception as error:  # what is raised is the result
        return type(error).__name__, str(error)
    return None, ""


def _check(
    case: str, fn: Callable[..., Any], valid: list[torch.Tensor], invalid: list[list[torch.Tensor]], checks: bool = True
) -> None:
    print(json.dumps({"start": case}), flush=True)
    gm = make_fx(fn, decomposition_table=inductor_ir.decompositions())(*valid)
    backend = TritonBackend(device_type="cpu", config=TritonConfig(cache_dir=_CACHE, runtime_checks=checks))
    compiled = inductor_ir.compile_graph(gm, list(valid), backends={"cpu": backend})
    expected = fn(*valid)
    ok = _same(compiled(*valid), expected)
    failures = []
    for args in invalid:
        eager, _ = _outcome(fn, args)
        raised, message = _outcome(compiled, args)
        failures.append({"eager": eager, "compiled": raised, "message": message})
    ok = ok and _same(compiled(*valid), expected)
    sources = "\n".join(source.source for source in compiled.sources)
    record = {
        "case": case,
        "valid": ok,
        "failures": failures,
        "asserts": "tl.device_assert" in sources,
        "debug": "@triton.jit(debug=True)" in sources,
    }
    print(json.dumps(record), flush=True)


def main() -> None:
    """Run every case."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(8, 37, generator=generator)
    _check(
        "getitem",
        lambda x, i: x[i] + 1,
        [x, torch.tensor([-1, 3, -8])],
        [[x, torch.tensor([-1, 100000, 2])], [x, torch.tensor([-9, 0, 1])]],
    )
    index = torch.randint(0, 37, (8, 5), generator=generator)
    _check(
        "gather",
        lambda x, i: torch.gather(x, 1, i) * 2,
        [x, index],
        [[x, index.index_fill(1, torch.tensor([2]), 37)], [x, index.index_fill(0, torch.tensor([1]), -1)]],
    )
    table = torch.randn(20, 12, generator=generator)
    rows = torch.randint(0, 20, (6,), generator=generator)
    _check(
        "embedding_sum",
        lambda w, i: F.embedding(i, w).sum(-1),
        [table, rows],
        [[table, rows.index_fill(0, torch.tensor([4]), 1 << 40)], [table, rows.index_fill(0, torch.tensor([0]), -1)]],
    )
    wide = torch.randn(10, 2048, generator=generator)  # a looped reduction (longer than one block)
    _check(
        "embedding_sum_looped",
        lambda w, i: F.embedding(i, w).sum(-1),
        [wide, rows % 10],
        [[wide, (rows % 10).index_fill(0, torch.tensor([2]), 10)]],
    )
    src = torch.randn(2, 37, generator=generator)
    scatter_index = torch.randint(0, 8, (2, 37), generator=generator)
    _check(
        "scatter_add",
        lambda x, i, s: torch.scatter_add(x, 0, i, s),
        [x, scatter_index, src],
        [[x, scatter_index.index_fill(1, torch.tensor([30]), 8), src]],
    )
    _check(
        "index_put",
        lambda x, i, s: torch.index_put(x, (i,), s, accumulate=True),
        [x, torch.tensor([-1, 2]), src],
        [[x, torch.tensor([8, 2]), src]],
    )
    _check(
        "masked_lanes",
        lambda x, i: F.pad(x[i], (3, 5)) + 1,
        [x, torch.tensor([7, -8, 3])],
        [[x, torch.tensor([7, 8, 3])]],
    )
    a = torch.randint(-999, 999, (45,), generator=generator)
    b = torch.randint(1, 30, (45,), generator=generator) * torch.where(torch.rand(45, generator=generator) < 0.5, -1, 1)
    _check(
        "integer_division",
        lambda a, b: (a // b, a % b, torch.fmod(a, b), torch.div(a, b, rounding_mode="trunc"), a.int() // b.int()),
        [a, b],
        [[a, b.index_fill(0, torch.tensor([44]), 0)]],
    )
    # A constant 0 divisor (the size of an empty dim) of a reduction over no elements divides nothing.
    _check("divisor_of_nothing", lambda a, i: torch.take_along_dim(a, i % a.size(0), 0).sum(),
           [torch.empty(0, 9, dtype=torch.int64), torch.empty(0, 9, dtype=torch.int64)], [])
    # A divisor defined before a looped reduction, the dividend inside it (fuzz 771fba8fea).
    looped = torch.randint(-9, 10, (1025,), generator=generator).to(torch.int8)
    _check("divisor_outside_the_loop", lambda a, d: torch.div(a, d, rounding_mode="floor").sum(0),
           [looped, torch.tensor(3, dtype=torch.int8)], [[looped, torch.tensor(0, dtype=torch.int8)]])
    numerator = torch.randn(30, generator=generator)
    zeros = torch.where(torch.rand(30, generator=generator) < 0.5, 0.0, torch.randn(30, generator=generator))
    _check("float_division", lambda x, z: (x / z, x // z, x % z, torch.fmod(x, z)), [numerator, zeros], [])
    _check(
        "unchecked",
        lambda x, i, w, r, a, b: (x[i] + 1, F.embedding(r, w).sum(-1), a // b),
        [x, torch.tensor([-1, 3, -8]), table, rows, a, b],
        [],
        checks=False,
    )
    from triton.runtime import interpreter

    # The interpreter's assert switch is on only while a checked kernel runs.
    print(json.dumps({"case": "interpreter_restored", "debug": interpreter.interpreter_builder.options.debug}))


if __name__ == "__main__":
    main()
