"""Cases of test_runtime_checks.py, run in a child process: a regression may crash it (SIGSEGV, SIGFPE).

Each case compiles an ATen graph with ``inductor_ir.compile_graph`` and the C++ backend, runs valid
inputs (compared with eager) and invalid ones, and prints one JSON line: whether valid inputs
matched, the exception eager raised and the one the compiled graph raised. ``{"start": name}`` comes
first, so a crash names its case.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend, CppConfig


def _compile(fn: Callable[..., Any], inputs: list[torch.Tensor], tracing: str = "real", **config: Any) -> Any:
    gm = make_fx(fn, decomposition_table=inductor_ir.decompositions(), tracing_mode=tracing)(*inputs)
    backend = CppBackend(CppConfig.from_env(**config))
    compiled = inductor_ir.compile_graph(gm, list(inputs), backends={"cpu": backend})
    return compiled


def _outcome(fn: Callable[..., Any], args: list[torch.Tensor]) -> tuple[str | None, str, Any]:
    try:
        return None, "", fn(*args)
    except Exception as error:  # what is raised is the result
        return type(error).__name__, str(error), None


def _as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _same(actual: Any, expected: Any) -> bool:
    try:
        torch.testing.assert_close(_as_tuple(actual), _as_tuple(expected), equal_nan=True)
    except AssertionError:
        return False
    return True


def _check(
    case: str, fn: Callable[..., Any], valid: list[torch.Tensor], invalid: list[list[torch.Tensor]], **config: Any
) -> None:
    print(json.dumps({"start": case}), flush=True)
    compiled = _compile(fn, valid, **config)
    eager_out = fn(*valid)
    ok = _same(compiled(*valid), eager_out)
    results = []
    for args in invalid:
        eager, _, _ = _outcome(fn, args)
        raised, message, _ = _outcome(compiled, args)
        results.append({"eager": eager, "compiled": raised, "message": message})
    again = _same(compiled(*valid), eager_out)
    sources = "\n".join(source.source for source in compiled.sources)
    record = {"case": case, "valid": ok and again, "failures": results, "checked": "kiln::checked_" in sources}
    print(json.dumps(record), flush=True)


def main() -> None:
    """Run every case."""
    generator = torch.Generator().manual_seed(0)
    table = torch.randn(50, 40, generator=generator)
    rows = torch.randint(0, 50, (9,), generator=generator)

    # Two kernels in two translation units of one library (one failure record, merged by the linker).
    def two_kernels(w: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        first = F.embedding(i, w).sum(1)
        product = torch.mm(w.t(), w)
        return first, F.embedding(j, product).sum(0)

    j = torch.randint(0, 40, (5,), generator=generator)
    _check(
        "two_translation_units",
        two_kernels,
        [table, rows, j],
        [[table, rows, j.index_fill(0, torch.tensor([3]), 40)], [table, rows.index_fill(0, torch.tensor([0]), 50), j]],
        kernels_per_part=1,
        compile_workers=2,
    )

    # An empty table: every lookup fails, and nothing is read from its (null) data pointer.
    empty = torch.empty(0, 64)
    _check("empty_table", lambda w, i: F.embedding(i, w) * 2, [empty, torch.empty(0, dtype=torch.long)], [])
    print(json.dumps({"start": "empty_table_lookup"}), flush=True)
    # Traced with fake tensors: tracing reads no index value (an eager lookup would fail).
    lookup = _compile(lambda w, i: F.embedding(i, w) * 2, [empty, torch.tensor([0, 0])], tracing="fake")
    raised, message, _ = _outcome(lookup, [empty, torch.tensor([0, 1])])
    eager, _, _ = _outcome(lambda w, i: F.embedding(i, w) * 2, [empty, torch.tensor([0, 1])])
    failures = [{"eager": eager, "compiled": raised, "message": message}]
    print(json.dumps({"case": "empty_table_lookup", "valid": True, "failures": failures, "checked": True}), flush=True)

    # Lanes outside a mask (padding around gathered rows) are not checked; lanes inside are.
    x = torch.randn(8, 37, generator=generator)
    picks = torch.tensor([7, -8, 3])
    _check(
        "masked_lanes",
        lambda x, i: F.pad(x[i], (3, 5)) + 1,
        [x, picks],
        [[x, torch.tensor([7, 8, 3])], [x, torch.tensor([7, -9, 3])]],
    )

    # A gather big enough for OpenMP threads, with bad indices in many lanes: one error, no crash.
    big = torch.randn(600, 130, generator=generator)
    index = torch.randint(0, 130, (600, 130), generator=generator)
    spoiled = torch.where(torch.rand(600, 130, generator=generator) < 0.1, 500, index)
    _check("parallel_gather", lambda x, i: torch.gather(x, 1, i) * 3, [big, index], [[big, spoiled]], parallel_threshold=1024)

    # Lane-invariant divisors (one per row) and vector ones, in vector loops and scalar tails.
    a = torch.randint(-999, 999, (6, 35), generator=generator)
    per_row = torch.randint(1, 9, (6, 1), generator=generator)
    _check(
        "row_divisor",
        lambda a, d: (a // d, a % d),
        [a, per_row],
        [[a, per_row.index_fill(0, torch.tensor([4]), 0)]],
    )

    # An index into an expanded (stride-0) dim: no gather reads its lanes, each is still checked.
    one = torch.randn(1, 1, generator=generator)
    lanes = torch.randint(-7, 7, (64,), generator=generator)
    _check(
        "unread_lanes",
        lambda x, i: x.expand(7, 7)[:, i] * 2,
        [one, lanes],
        [[one, lanes.index_fill(0, torch.tensor([37]), -8)], [one, lanes.index_fill(0, torch.tensor([5]), 7)]],
    )

    # runtime_checks=False: no check in the source, valid inputs still give eager's values.
    _check(
        "unchecked",
        lambda w, i, a, b: (F.embedding(i, w).sum(1), x[i % 8] * 2, a // b),
        [table, rows, a, per_row],
        [],
        runtime_checks=False,
    )


if __name__ == "__main__":
    main()
