"""Records the C++ handler works with: values, the kernel's shared state, a body's scope."""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy
import torch

from inductor_ir.ir.checks import RuntimeCheck

__all__ = ["BodyScope", "CppValue", "KernelState", "Unvectorizable"]


class Unvectorizable(Exception):
    """Raised by the vector handler for a body it cannot vectorize; the kernel is made scalar."""


@dataclass(frozen=True)
class CppValue:
    """A C++ variable holding a value of ``dtype`` (a vector when ``vector``)."""

    name: str
    dtype: torch.dtype
    vector: bool = False
    uniform: str | None = None  # a vector with every lane equal to this scalar variable

    def __str__(self) -> str:
        return self.name


@dataclass
class KernelState:
    """What all bodies of one kernel share: pointer names, fresh names, reduction accumulators."""

    pointers: dict[str, str]
    storage: dict[str, torch.dtype]
    internal: frozenset[str]
    counter: int = 0
    accumulators: dict[tuple[str, int], str] = field(default_factory=dict)
    vector_accumulators: set[str] = field(default_factory=set)
    # welford reduction key -> the key whose accumulator it shares (itself when it owns one); decided
    # by the first run of the body (the vector run) and kept by the others, so every run agrees
    welford_owner: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    # accumulator variable -> (reduction type, vector?): how partial results of threads combine
    combinable: dict[str, tuple[str, bool]] = field(default_factory=dict)
    # accumulator of a reduction vectorized across outputs -> its reduction type, for those whose
    # partial results fold lane by lane (sum, prod, max, min, any): a row split may combine them
    outer_kinds: dict[str, str] = field(default_factory=dict)
    canonical: dict[str, str] = field(default_factory=dict)  # temporary -> its expression, spelled out
    # per-row arrays of values that reductions finish after their loop (codegen/reduction.py's
    # row moments): array name -> its C++ declaration, declared in the body of each pointwise index
    row_arrays: dict[str, str] = field(default_factory=dict)
    # the reduction (accumulator) -> where its row moments read the row: a pointer expression into an
    # input the loop loads from directly, or None for its row array; decided by the first run
    row_sources: dict[str, str | None] = field(default_factory=dict)
    # temporaries computed before the reduction loops they are loop-invariant in (CppOpsHandler._emit)
    invariant: set[str] = field(default_factory=set)
    # temporaries that are plain loads of a stored buffer -> (buffer, index)
    plain_loads: dict[str, tuple[str, sympy.Expr]] = field(default_factory=dict)
    # integer temporary -> the index expression (in loop variables) it holds, where known
    symbolic: dict[str, sympy.Expr] = field(default_factory=dict)
    # runtime checks (runtime/kiln_cpu_checks.h): whether to emit them, and each check's site number
    # in the library's failure record (1, 2, ...; deterministic: bodies run in a fixed order)
    runtime_checks: bool = True
    checks: dict[RuntimeCheck, int] = field(default_factory=dict)
    # indirect-index symbols into a dim of static size 0: their check always fails, nothing is read
    unreadable: set[sympy.Symbol] = field(default_factory=set)
    # vector indirect indices checked lane by lane where read: name -> (wrap, size, site) as C++ text
    lane_checks: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    # those no gather has read yet -> (the lines holding it, its whole-vector check line there): a
    # gather reading one removes that line, so an index no load moves with is still checked
    unread_lane_checks: dict[str, tuple[list[str], str]] = field(default_factory=dict)

    def check_site(self, check: RuntimeCheck) -> int:
        """The site number of ``check`` in the failure record (equal checks share one)."""
        return self.checks.setdefault(check, len(self.checks) + 1)

    def fresh(self, prefix: str) -> str:
        """A new variable name ``<prefix><n>``."""
        self.counter += 1
        return f"{prefix}{self.counter}"


@dataclass
class BodyScope:
    """Where one body run writes its lines and finds values (nested for ``masked``).

    lines: the loop body; pre: lines before the loop (accumulator declarations); post: lines after
    it (reduction results and their stores); values: internal buffers stored so far in this body;
    reduced: internal buffers holding finished reductions (one value per pointwise index);
    stored: the last value stored to each output and its index (loads at that index reuse it);
    vector_symbols: indirect-index symbols whose values are vectors;
    block_pre / block_post: lines around each block of the innermost vector loop of a reduction
    (float32 partial accumulators declared, then folded into the wide ones; see codegen/reduction.py);
    hoisted: where values invariant in the reduction loops go (None: into ``pre``); a reduction
    vectorized across outputs keeps them apart from its accumulator declarations (codegen/tiling.py).
    """

    lines: list[str]
    pre: list[str]
    post: list[str]
    values: dict[str, CppValue]
    reduced: dict[str, CppValue] = field(default_factory=dict)
    stored: dict[str, tuple[sympy.Expr, CppValue]] = field(default_factory=dict)
    cse: dict[str, CppValue] = field(default_factory=dict)
    # welford reductions run so far in this body: "<type>:<value>:<dtype>" -> the reduction's key
    welford_keys: dict[str, tuple[str, int]] = field(default_factory=dict)
    vector_symbols: dict[sympy.Symbol, str] = field(default_factory=dict)
    block_pre: list[str] = field(default_factory=list)
    block_post: list[str] = field(default_factory=list)
    hoisted: list[str] | None = None


_UNARY_MATH = (
    "exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh cosh tanh "
    "asinh acosh atanh erf erfc lgamma sigmoid floor ceil trunc round reciprocal"
).split()
_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
