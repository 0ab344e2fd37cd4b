"""Edits of a program that keep it a program: the shrinker's moves (and the generator's last tidy-up).

Every function returns a new `Program` (programs are frozen); none checks that the result still
type-checks: the caller runs it (eager rejects what is ill-typed).
"""

from __future__ import annotations

from dataclasses import replace

from tools.fuzz.program import Program, Stmt, used_names


def remove_unused(program: Program) -> Program:
    """Drop pure statements nobody reads, then arguments and leaves nobody uses.

    In-place statements and statements meant to raise stay: their effect is not their result.
    """
    stmts = list(program.stmts)
    changed = True
    while changed:
        changed = False
        reads: set[str] = set(program.outputs)
        for stmt in stmts:
            reads.update(stmt.args)
        for i in range(len(stmts) - 1, -1, -1):
            stmt = stmts[i]
            if stmt.out not in reads and not stmt.inplace and not stmt.may_raise:
                del stmts[i]
                changed = True
                break
    pruned = replace(program, stmts=tuple(stmts))
    reads = used_names(pruned)
    params = tuple(p for p in program.params if p.name in reads)
    leaves_used = {p.leaf for p in params}
    leaves = tuple(leaf for leaf in program.leaves if leaf.name in leaves_used)
    return replace(pruned, params=params, leaves=leaves)


def rename(program: Program, old: str, new: str, start: int = 0) -> Program:
    """Every read of `old` from statement `start` on (and in the outputs) reads `new` instead."""
    stmts = list(program.stmts)
    for i in range(start, len(stmts)):
        stmt = stmts[i]
        if old in stmt.args:
            stmts[i] = replace(stmt, args=tuple(new if a == old else a for a in stmt.args))
    outputs = tuple(dict.fromkeys(new if o == old else o for o in program.outputs))
    return replace(program, stmts=tuple(stmts), outputs=outputs)


def bypass(program: Program, index: int, arg: int) -> Program:
    """Statement `index` removed; whoever read its result reads its `arg`-th argument instead."""
    stmt = program.stmts[index]
    without = replace(program, stmts=program.stmts[:index] + program.stmts[index + 1 :])
    return remove_unused(rename(without, stmt.out, stmt.args[arg], index))


def drop_output(program: Program, index: int) -> Program:
    """The program without its `index`-th output (and what only that output needed)."""
    outputs = program.outputs[:index] + program.outputs[index + 1 :]
    return remove_unused(replace(program, outputs=outputs))


def replace_stmt(program: Program, index: int, stmt: Stmt) -> Program:
    """Statement `index` replaced by `stmt`."""
    return replace(program, stmts=program.stmts[:index] + (stmt,) + program.stmts[index + 1 :])
