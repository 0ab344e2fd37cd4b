"""A fuzz program as data: input leaves, the arguments viewed from them, statements, outputs; and its source.

A program is a frozen record so the shrinker can take it apart and put smaller copies together with
`dataclasses.replace`. Its Python source (`render`) is what actually runs, in the worker and in a
found failure's pytest file alike: the `harness` module's text, ``make_inputs(ref)`` and
``program(*args)``.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODES = ("no_grad", "grad", "double")
"""no_grad: inference; grad: outputs and input gradients; double: also the gradients of those gradients."""

AUTOCAST_PLACES = ("", "outside", "inside")
"""Where a program runs under ``torch.autocast(DEVICE, dtype=torch.bfloat16)``: not at all, around the
compiled call (the caller's autocast), or as a block in the program's body (traced into the graph)."""

FLOAT_NAMES = ("float16", "bfloat16", "float32", "float64")
_FLOAT_DTYPE = re.compile(r"torch\.(float16|bfloat16|float32|half|float)\b")


@dataclass(frozen=True)
class Leaf:
    """One tensor `make_inputs` creates (see `harness.make_leaf`); the gradients compared are the leaves'."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    fill: str = "normal"
    seed: int = 0
    channels_last: bool = False
    requires_grad: bool = False

    def render(self) -> str:
        """The `make_leaf` call creating this leaf."""
        extra = ""
        if self.channels_last:
            extra += ", channels_last=True"
        if self.requires_grad:
            extra += ", requires_grad=True"
        return f"make_leaf({self.seed}, {self.shape!r}, torch.{self.dtype}, {self.fill!r}, ref{extra}, grow=grow, relayout=relayout)"


@dataclass(frozen=True)
class Param:
    """One argument of ``program``: a view expression of a leaf (``{0}`` stands for the leaf).

    Layouts are views: ``{0}.transpose(0, 1)``, ``{0}[:, ::2]``, ``{0}.expand(4, 3)``, ``{0}[1:]``; two
    params of one leaf overlap or are the same tensor passed twice.
    """

    name: str
    leaf: str
    view: str = "{0}"

    def render(self) -> str:
        """The expression of this argument."""
        return self.view.format(self.leaf)


@dataclass(frozen=True)
class Stmt:
    """``out = template.format(*args)``: one op of the program.

    `op` names the grammar rule (it is what signatures and the shrinker's bookkeeping count);
    `inplace` marks statements that mutate their first argument (they have effects beyond `out`);
    `may_raise` marks statements generated to raise in eager (an integer division by zero, an
    out-of-range index), whose exceptions Kiln must reproduce. `autocast_off` puts the statement in
    a ``torch.autocast("cpu", enabled=False)`` block (consecutive ones share a block).
    """

    out: str
    op: str
    template: str
    args: tuple[str, ...]
    inplace: bool = False
    may_raise: bool = False
    autocast_off: bool = False

    def expression(self) -> str:
        """The right-hand side with the argument names filled in."""
        return self.template.format(*self.args)

    def render(self) -> str:
        """The statement's line of source."""
        return f"{self.out} = {self.expression()}"


@dataclass(frozen=True)
class Program:
    """A whole fuzz program: run ``program(*args)`` in `mode` on ``make_inputs()``, then on inputs
    of other sizes (`grows`)."""

    seed: int
    mode: str
    leaves: tuple[Leaf, ...]
    params: tuple[Param, ...]
    stmts: tuple[Stmt, ...]
    outputs: tuple[str, ...]
    notes: tuple[str, ...] = field(default=(), compare=False)
    autocast: str = ""  # one of AUTOCAST_PLACES
    grows: tuple[int, ...] = ()
    """After two calls at the leaves' own sizes, one call per entry with every size of at least 2
    grown by it (`harness.grown`): the first new sizes recompile (automatic dynamic shapes), the
    next reuse that graph with its symbolic sizes."""
    relayout: bool = False
    """Then one call on the leaves' own sizes and values in another memory layout (see
    `harness.make_leaf`): the guards on strides, and kernels that must not assume the first call's."""

    def ops(self) -> list[str]:
        """The grammar rules used, in order."""
        return [s.op for s in self.stmts]

    def float_dtypes(self) -> set[str]:
        """The float dtypes values of this program can pass through: its leaves', those its statements
        name, and float32 (the default dtype) whenever an integer or bool can become a float."""
        names = {leaf.dtype for leaf in self.leaves if leaf.dtype in FLOAT_NAMES}
        for stmt in self.stmts:
            names.update(m.replace("half", "float16") for m in re.findall(r"torch\.(float16|bfloat16|float32|float64|half)\b", stmt.template))
        if any(leaf.dtype not in FLOAT_NAMES for leaf in self.leaves):
            names.add("float32")
        if self.autocast and names & {"float32", "float64"}:
            names.add("bfloat16")
        return names

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (see `from_json`)."""
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> Program:
        """The program `to_json` wrote."""
        return Program(
            seed=data["seed"],
            mode=data["mode"],
            leaves=tuple(Leaf(**{**leaf, "shape": tuple(leaf["shape"])}) for leaf in data["leaves"]),
            params=tuple(Param(**p) for p in data["params"]),
            stmts=tuple(Stmt(**{**s, "args": tuple(s["args"])}) for s in data["stmts"]),
            outputs=tuple(data["outputs"]),
            notes=tuple(data.get("notes", ())),
            autocast=data.get("autocast", ""),
            grows=tuple(data.get("grows", ())),
            relayout=bool(data.get("relayout", False)),
        )


HARNESS_SOURCE = (Path(__file__).parent / "harness.py").read_text()


def render_body(program: Program, ref: bool = False) -> str:
    """``make_inputs`` and ``program`` as source; `ref=True` turns every float dtype in the body into float64."""
    lines = [f"MODE = {program.mode!r}"]
    if program.autocast == "outside":
        lines.append("AUTOCAST = torch.bfloat16  # the caller's autocast, around the compiled call")
    else:
        lines.append("AUTOCAST = None")
    lines.append(f"GROWS = {program.grows!r}  # the later calls' input sizes: grown by each (see `grown`)")
    lines.append(f"RELAYOUT = {program.relayout!r}  # a last call on inputs in another memory layout")
    lines += ["", "", "def make_inputs(ref=False, grow=0, relayout=False):"]
    for leaf in program.leaves:
        lines.append(f"    {leaf.name} = {leaf.render()}")
    leaves = ", ".join(leaf.name for leaf in program.leaves)
    args = ", ".join(p.render() for p in program.params)
    lines.append(f"    return [{leaves}], [{args}]")
    lines += ["", "", f"def program({', '.join(p.name for p in program.params)}):"]
    indent = "    "
    if program.autocast == "inside" and program.stmts:  # (the shrinker may leave no statement)
        lines.append('    with torch.autocast(DEVICE, dtype=torch.bfloat16):')
        indent = "        "
    off = False
    for stmt in program.stmts:
        if stmt.autocast_off and not off:
            lines.append(f'{indent}with torch.autocast(DEVICE, enabled=False):')
        off = stmt.autocast_off
        text = stmt.render()
        lines.append(f"{indent}{'    ' if off else ''}{_FLOAT_DTYPE.sub('torch.float64', text) if ref else text}")
    outputs = "".join(f"{name}, " for name in program.outputs)
    lines.append(f"    return ({outputs})")
    return "\n".join(lines) + "\n"


def render(program: Program, ref: bool = False) -> str:
    """The complete module source: the harness, then `render_body`."""
    header = f"# Kiln fuzz program, seed {program.seed}, mode {program.mode}\nF = torch.nn.functional\n"
    return HARNESS_SOURCE + "\n\n" + header + render_body(program, ref)


def used_names(program: Program) -> set[str]:
    """Every name a statement or the return reads."""
    names = set(program.outputs)
    for stmt in program.stmts:
        names.update(stmt.args)
    return names
