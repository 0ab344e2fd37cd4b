"""Random programs from the grammar: `generate(seed)` is a deterministic function of its seed.

Steps: pick a mode and one or two starting inputs; apply weighted grammar rules until the program
has its target length (each rule's statement is kept only if eager runs it); pick one to three
outputs, sometimes also returning a reduction of one of them (``return (a ** 2).sum(), a``); then
run the finished program on fresh inputs exactly as the worker will (`harness.run`), falling back
to inference mode when eager's backward rejects it and to another sub-seed when eager rejects it
altogether.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace

from tools.fuzz import harness
from tools.fuzz.builder import Builder, finish
from tools.fuzz.edit import remove_unused
from tools.fuzz.program import AUTOCAST_PLACES, MODES, Program, render
from tools.fuzz.rules_create import create
from tools.fuzz.rules_index import indexing, inplace, matmul
from tools.fuzz.rules_nn import nn
from tools.fuzz.rules_order import order
from tools.fuzz.rules_pointwise import binary, cast, shift, special, unary, where_clamp
from tools.fuzz.rules_scatter import scatter
from tools.fuzz.rules_shape import reduction, view
from tools.fuzz.rules_window import window

Rule = Callable[[Builder], bool]

RULES: dict[str, tuple[Rule, float]] = {
    "unary": (unary, 0.15),
    "binary": (binary, 0.22),
    "shift": (shift, 0.03),
    "where_clamp": (where_clamp, 0.07),
    "cast": (cast, 0.07),
    "reduction": (reduction, 0.13),
    "view": (view, 0.14),
    "indexing": (indexing, 0.07),
    "matmul": (matmul, 0.05),
    "inplace": (inplace, 0.10),
    "nn": (nn, 0.05),
    "special": (special, 0.06),
    "order": (order, 0.05),
    "scatter": (scatter, 0.05),
    "create": (create, 0.04),
    "window": (window, 0.04),
}
"""Rule name -> (rule, weight)."""


@dataclass(frozen=True)
class GenConfig:
    """Knobs of the generator.

    Attributes:
        max_stmts: the most statements a program gets (its length is uniform in 1..max_stmts).
        mode_weights: how often each mode (no_grad, grad, double) is drawn.
        autocast_weight: the share of programs run under bfloat16 autocast.
        rules: the rules to draw from, with weights (a subset focuses a run, e.g. only integer ops).
        grow_weight: the share of programs also called on inputs of other sizes (`Program.grows`).
        relayout_weight: the share also called on inputs in another memory layout (`Program.relayout`).
    """

    max_stmts: int = 10
    mode_weights: tuple[float, float, float] = (0.5, 0.35, 0.15)
    autocast_weight: float = 0.15
    rules: tuple[str, ...] = tuple(RULES)
    grow_weight: float = 0.5
    relayout_weight: float = 0.3


def _outputs(b: Builder) -> list[str]:
    """One to three statement results (the last one most often), maybe plus a reduction of one."""
    results = [s.out for s in b.stmts if s.out in b.values or s.may_raise]
    if not results:
        return []
    rng = b.rng
    read = {a for s in b.stmts for a in s.args}
    sinks = [r for r in results if r not in read]  # returning them keeps every statement alive
    chosen = [results[-1]]
    for _ in range(rng.choice([0, 1, 1, 2])):
        chosen.append(rng.choice(sinks if sinks and rng.random() < 0.8 else results))
    if rng.random() < 0.08 and b.params:  # an argument (mutated or not) returned as is
        chosen.append(rng.choice(b.params).name)
    if not b.stopped and rng.random() < 0.3:
        target = rng.choice(chosen)
        template = rng.choice(["({0} ** 2).sum()", "{0}.sum()", "{0}.abs().amax()", "{0}.sum(0)"])
        if b.try_add("reduce_output", template, (target,)):
            chosen.insert(0, b.stmts[-1].out)
    if b.mode != "no_grad" and not any(getattr(b.values.get(n), "requires_grad", False) for n in chosen):
        graded = [n for n in results if getattr(b.values.get(n), "requires_grad", False)]
        if graded:
            chosen.append(graded[-1])
    return list(dict.fromkeys(chosen))


def _build(seed: int, sub: int, config: GenConfig) -> Program | None:
    rng = random.Random(f"{seed}/{sub}")
    mode = rng.choices(MODES, config.mode_weights)[0]
    b = Builder(rng, mode, seed, leaf_seed=(seed * 50 + sub) * 100)
    base = b.random_shape()
    for _ in range(rng.choice([1, 1, 2])):
        b.new_input(b.broadcastable_to(base) if b.params else base)
    names = list(config.rules)
    weights = [RULES[n][1] for n in names]
    target = rng.randint(1, config.max_stmts)
    attempts = 0
    while len(b.stmts) < target and attempts < 12 * target and not b.stopped:
        attempts += 1
        rule = RULES[rng.choices(names, weights)[0]][0]
        snap = b.snapshot()
        if not rule(b):
            b.restore(snap)
    outputs = _outputs(b)
    if not outputs:
        return None
    return _with_autocast(remove_unused(finish(b, outputs)), rng, config.autocast_weight)


def _with_autocast(program: Program, rng: random.Random, weight: float) -> Program:
    """Sometimes run `program` under bfloat16 autocast (the caller's, or a block in its body), with a
    run of statements in an ``autocast(enabled=False)`` block: autocast must be applied exactly as
    eager applies it (once, and not inside the disabled block)."""
    if not program.stmts or rng.random() >= weight:
        return program
    place = rng.choice(AUTOCAST_PLACES[1:])
    stmts = list(program.stmts)
    if rng.random() < 0.6:
        start = rng.randrange(len(stmts))
        end = rng.randint(start + 1, len(stmts))
        stmts[start:end] = [replace(s, autocast_off=True) for s in stmts[start:end]]
    return replace(program, autocast=place, stmts=tuple(stmts))


GROWS = (1, 3)
"""The size steps of the later calls: the first recompiles (sizes become symbolic), the second
reuses that graph at yet other sizes."""


# Ops whose eager kernels do not check that their arguments' sizes agree: grown inputs (a hidden
# size grown in the state but not in the weights) corrupt eager's heap (seeds 185901546, 185902703:
# `torch.lstm` aborted the worker inside eager, before Kiln ran).
_UNCHECKED_SHAPES = frozenset({"lstm", "gru"})


def _with_grows(program: Program, rng: random.Random, weight: float) -> Program:
    """Sometimes call `program` again on inputs of grown sizes: as many of `GROWS` as eager runs
    (a program may spell sizes out, ``reshape(6, -1)``, and then only runs at its own)."""
    if rng.random() >= weight or not any(s >= 2 for leaf in program.leaves for s in leaf.shape):
        return program
    if any(stmt.op in _UNCHECKED_SHAPES for stmt in program.stmts):
        return program
    grows: list[int] = []
    for grow in GROWS:
        if check_eager(program, grow) is not None or not _eager_repeats(program, grow):
            break
        grows.append(grow)
    return replace(program, grows=tuple(grows))


def _with_relayout(program: Program, rng: random.Random, weight: float) -> Program:
    """Sometimes end with a call on the same values in another memory layout, where eager runs it
    (a ``view`` of a transposed input raises there) and gives the same results twice."""
    if rng.random() >= weight or not any(len(leaf.shape) >= 2 for leaf in program.leaves):
        return program
    if check_eager(program, relayout=True) is not None or not _eager_repeats(program, 0, relayout=True):
        return program
    return replace(program, relayout=True)


def _eager_repeats(program: Program, grow: int, relayout: bool = False) -> bool:
    """Whether eager gives the same results twice at grown sizes. Growing can break a relation
    between sizes that an eager kernel relies on without checking it (``torch.lstm``'s weights,
    ``4 * hidden`` rows): eager then reads past its buffers, a different answer each run."""
    namespace: dict[str, object] = {}
    exec(compile(render(program), f"<fuzz {program.seed}>", "exec"), namespace)
    runs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            runs.append(harness.run(namespace["program"], namespace["make_inputs"], program.mode,
                                    autocast=namespace.get("AUTOCAST"), grow=grow, relayout=relayout))
    try:
        harness.assert_matches(runs[0], runs[1])
    except AssertionError:
        return False
    return True


def check_eager(program: Program, grow: int = 0, relayout: bool = False) -> BaseException | None:
    """Run `program` eagerly as the worker will (`grow`: on inputs of grown sizes; `relayout`: in
    another memory layout); the exception eager raises, or None."""
    namespace: dict[str, object] = {}
    exec(compile(render(program), f"<fuzz {program.seed}>", "exec"), namespace)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            harness.run(
                namespace["program"], namespace["make_inputs"], program.mode, autocast=namespace.get("AUTOCAST"), grow=grow,
                relayout=relayout,
            )
    except Exception as error:
        return error
    return None


def _with_mode(program: Program, mode: str) -> Program:
    leaves = tuple(replace(leaf, requires_grad=False) for leaf in program.leaves) if mode == "no_grad" else program.leaves
    return replace(program, mode=mode, leaves=leaves)


def generate(seed: int, config: GenConfig | None = None) -> Program:
    """The program of `seed`: well-typed (eager runs it, or raises only where a statement is meant to)."""
    config = config or GenConfig()
    for sub in range(50):
        program = _build(seed, sub, config)
        if program is None:
            continue
        error = check_eager(program)
        if error is not None and program.mode != "no_grad":
            program = _with_mode(program, "no_grad")
            error = check_eager(program)
        if error is None:
            rng = random.Random(seed * 7919 + sub)
            return _with_relayout(_with_grows(program, rng, config.grow_weight), rng, config.relayout_weight)
        if any(s.may_raise for s in program.stmts):
            return program
    raise RuntimeError(f"no well-typed program for seed {seed} in 50 tries")


def describe(program: Program) -> str:
    """One line: seed, mode, statement count, ops, input dtypes."""
    dtypes = sorted({leaf.dtype for leaf in program.leaves})
    return f"seed={program.seed} mode={program.mode} stmts={len(program.stmts)} ops={','.join(program.ops())} dtypes={','.join(dtypes)}"
