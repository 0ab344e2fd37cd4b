"""Delta debugging of a failing program down to a minimal one that fails the same way.

`shrink(program, fails)` repeats passes until none makes progress (or the budget of `fails` calls
runs out); each pass proposes smaller variants and keeps the first one `fails` accepts:

1. mode: double backward -> backward -> inference;
2. outputs: drop one;
3. statements, last to first: remove one, its readers reading one of its arguments instead (for an
   in-place statement: the value before the update), then drop what nobody reads;
4. arguments: a plain contiguous leaf instead of a view, the same tensor passed twice split in two;
5. leaves: no requires_grad, plain values, not channels-last;
6. sizes: each size used by the leaves made smaller everywhere at once, then each dimension alone.

`fails` is the oracle: it runs a candidate and says whether it still fails *in the same way*
(`tools.fuzz.runner` compares verdict kinds); it must also reject candidates eager rejects.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import torch

from tools.fuzz.edit import bypass, drop_output, remove_unused
from tools.fuzz.program import Leaf, Param, Program

Oracle = Callable[[Program], bool]


@dataclass
class ShrinkStats:
    """How the shrinking went: oracle calls made, candidates accepted, seconds spent."""

    calls: int = 0
    accepted: int = 0
    seconds: float = 0.0


def _size(program: Program) -> tuple[int, ...]:
    """What shrinking minimizes, most important first."""
    numel = sum(max(1, int(torch.Size(leaf.shape).numel())) for leaf in program.leaves)
    views = sum(p.view != "{0}" for p in program.params)
    flags = sum(leaf.requires_grad + leaf.channels_last + (leaf.fill not in ("normal", "small")) for leaf in program.leaves)
    return (len(program.stmts), len(program.outputs), views, len(program.leaves), numel, flags, ("no_grad", "grad", "double").index(program.mode))


def _mode_moves(p: Program) -> Iterator[Program]:
    if p.mode == "double":
        yield replace(p, mode="grad")
    if p.mode != "no_grad":
        leaves = tuple(replace(leaf, requires_grad=False) for leaf in p.leaves)
        yield replace(p, mode="no_grad", leaves=leaves)


def _output_moves(p: Program) -> Iterator[Program]:
    if len(p.outputs) > 1:
        for i in range(len(p.outputs)):
            yield drop_output(p, i)


def _stmt_moves(p: Program) -> Iterator[Program]:
    for i in range(len(p.stmts) - 1, -1, -1):
        args = p.stmts[i].args
        for k, arg in enumerate(args):
            if arg not in args[:k]:
                yield bypass(p, i, k)


def _param_shape(p: Program, param: Param) -> tuple[int, ...] | None:
    leaf = next(leaf for leaf in p.leaves if leaf.name == param.leaf)
    try:
        value = eval(param.render(), {"torch": torch, param.leaf: torch.empty(leaf.shape, device="meta")})
    except Exception:
        return None
    return tuple(value.shape)


def _param_moves(p: Program) -> Iterator[Program]:
    for i, param in enumerate(p.params):
        sharing = sum(q.leaf == param.leaf for q in p.params)
        if param.view == "{0}" and sharing == 1:
            continue
        shape = _param_shape(p, param)
        if shape is None:
            continue
        leaf = next(leaf for leaf in p.leaves if leaf.name == param.leaf)
        own = replace(leaf, name=f"{leaf.name}_{param.name}", shape=shape, channels_last=False)
        params = p.params[:i] + (Param(param.name, own.name, "{0}"),) + p.params[i + 1 :]
        yield remove_unused(replace(p, leaves=p.leaves + (own,), params=params))


def _leaf_moves(p: Program) -> Iterator[Program]:
    for i, leaf in enumerate(p.leaves):
        simpler: list[Leaf] = []
        if leaf.requires_grad and sum(x.requires_grad for x in p.leaves) > 1:
            simpler.append(replace(leaf, requires_grad=False))
        if leaf.channels_last:
            simpler.append(replace(leaf, channels_last=False))
        if leaf.fill not in ("normal", "small"):
            simpler.append(replace(leaf, fill="normal" if leaf.dtype.startswith(("float", "bfloat")) else "small"))
        for new in simpler:
            yield replace(p, leaves=p.leaves[:i] + (new,) + p.leaves[i + 1 :])


def _smaller(size: int) -> list[int]:
    return [s for s in dict.fromkeys((1, 2, 3, size // 2, size - 1)) if 0 < s < size]


def _with_size(p: Program, old: int, new: int, only: tuple[int, int] | None = None) -> Program:
    leaves = list(p.leaves)
    for i, leaf in enumerate(leaves):
        shape = tuple(new if s == old and (only is None or only == (i, d)) else s for d, s in enumerate(leaf.shape))
        leaves[i] = replace(leaf, shape=shape)
    if only is not None:
        return replace(p, leaves=tuple(leaves))
    pattern = re.compile(rf"\b{old}\b")
    params = tuple(replace(q, view=pattern.sub(str(new), q.view)) for q in p.params)
    return replace(p, leaves=tuple(leaves), params=params)


def _size_moves(p: Program) -> Iterator[Program]:
    sizes = sorted({s for leaf in p.leaves for s in leaf.shape if s > 1}, reverse=True)
    for size in sizes:
        for new in _smaller(size):
            yield _with_size(p, size, new)
    for i, leaf in enumerate(p.leaves):
        for d, size in enumerate(leaf.shape):
            for new in _smaller(size):
                yield _with_size(p, size, new, only=(i, d))


PASSES: tuple[Callable[[Program], Iterator[Program]], ...] = (
    _mode_moves, _output_moves, _stmt_moves, _param_moves, _leaf_moves, _size_moves,
)


def shrink(program: Program, fails: Oracle, max_calls: int = 150, max_seconds: float = 600.0) -> tuple[Program, ShrinkStats]:
    """The smallest variant of `program` found that `fails` still accepts, with statistics.

    Args:
        program: a program `fails` accepts.
        fails: the oracle (see the module docstring).
        max_calls: at most this many oracle calls.
        max_seconds: and at most this long.
    """
    stats = ShrinkStats()
    started = time.perf_counter()
    best = program
    seen: set[str] = set()

    def out_of_budget() -> bool:
        return stats.calls >= max_calls or time.perf_counter() - started > max_seconds

    progress = True
    while progress and not out_of_budget():
        progress = False
        for moves in PASSES:
            improved = True
            while improved and not out_of_budget():
                improved = False
                for candidate in moves(best):
                    if out_of_budget():
                        break
                    key = repr(candidate.to_json())
                    if key in seen or _size(candidate) >= _size(best):
                        continue
                    seen.add(key)
                    stats.calls += 1
                    if fails(candidate):
                        best = candidate
                        stats.accepted += 1
                        improved = progress = True
                        break
    stats.seconds = time.perf_counter() - started
    return best, stats
