"""Assembling a whole kernel module: imports, signature, block indices, the nodes' lines in loop order."""

from __future__ import annotations

import dataclasses
import inspect
import re
from dataclasses import dataclass

import sympy
import torch

from codegen_triton.codegen.checks import CheckSite
from codegen_triton.codegen.kernel import KernelPlan, KernelWriter
from inductor_ir.backend import KernelGroup

__all__ = ["GeneratedKernel", "kernel_name", "write_kernel"]

_PREFIX = {"pointwise": "poi", "tiled": "poi", "persistent": "per", "looped": "red"}
_GPU_MATH = "from triton.language.extra import libdevice"
_INTERPRETER_MATH = "from codegen_triton.runtime import interpret_math as libdevice"


@dataclass(frozen=True)
class GeneratedKernel:
    """A kernel module's source and what launching it needs.

    Attributes:
        name: the kernel function's name (`triton_poi_fused_sin_cos_0`).
        source: the module text.
        kind: the plan's kind ("pointwise", "tiled", "persistent", "looped").
        arg_names: runtime arguments in order: pointers, size symbols, numels.
        numels: the SymPy value of each numel argument ("xnumel", "ynumel", "rnumel").
        uses_random: whether the kernel draws random numbers (`tl.rand`/`tl.randn`).
        split: for a split reduction, the number of chunks (grid axis 1 of this kernel); 0 otherwise.
        split_chunk: for a split reduction, the length of each chunk (RBLOCK divides it).
        workspaces: dtypes of the split reduction's workspaces (`xnumel * split` elements each).
        finish: the split reduction's second kernel (same module), which reads the workspaces first.
        persistent: for a looped reduction of symbolic size, a persistent variant (same module) to
            launch instead whenever the runtime reduction size is at most `persistent_limit`.
        persistent_limit: see `persistent`.
        hint: the reduction's memory walk ("inner", "outer" or ""; see `KernelPlan.hint`).
        checks: the function's runtime checks by site number (see `codegen/checks.py`).
    """

    name: str
    source: str
    kind: str
    arg_names: tuple[str, ...]
    numels: dict[str, sympy.Expr]
    uses_random: bool = False
    split: int = 0
    workspaces: tuple[torch.dtype, ...] = ()
    finish: GeneratedKernel | None = None
    persistent: GeneratedKernel | None = None
    persistent_limit: int = 0
    hint: str = ""
    checks: dict[int, CheckSite] = dataclasses.field(default_factory=dict)
    split_chunk: int = 0


def kernel_name(group: KernelGroup, plan: KernelPlan) -> str:
    """`triton_<poi|per|red>_<group name>`, e.g. `triton_poi_fused_sin_cos_0`."""
    return f"triton_{_PREFIX[plan.kind]}_{group.name}"


def _axis_numels(writer: KernelWriter) -> dict[str, sympy.Expr]:
    numels: dict[str, sympy.Expr] = {}
    for dims in writer.dims:
        numels[f"{dims.axis}numel"] = dims.numel()
    if "xnumel" not in numels:
        numels["xnumel"] = sympy.Integer(1)
    return numels


def _index_lines(writer: KernelWriter, axis: str, program_axis: int, view: str) -> list[str]:
    block = {"x": "XBLOCK", "y": "YBLOCK"}[axis]
    pid = f"tl.program_id({program_axis})"
    if writer.plan.use_int64:
        pid += ".to(tl.int64)"
    return [
        f"{axis}offset = {pid} * {block}",
        f"{axis}index = {axis}offset + tl.arange(0, {block}){view}",
        f"{axis}mask = {axis}index < {axis}numel",
    ]


def _header(writer: KernelWriter, numels: dict[str, sympy.Expr]) -> list[str]:
    lines = [f"{name} = {int(value)}" for name, value in numels.items() if isinstance(value, sympy.Integer)]
    kind = writer.plan.kind
    if kind == "pointwise":
        lines += _index_lines(writer, "x", 0, "[:]")
    elif kind == "tiled":
        lines += _index_lines(writer, "y", 1, "[:, None]") + _index_lines(writer, "x", 0, "[None, :]")
    else:
        lines += _index_lines(writer, "x", 0, "[:, None]")
        lines.append("rbase = tl.arange(0, RBLOCK)[None, :]")
    for axis in ("y", "x"):
        if any(d.axis == axis for d in writer.dims):
            lines += writer.dims_of(axis).definitions(writer.printer)
    if kind == "persistent":
        lines += ["rindex = rbase", "rmask = rindex < rnumel"]
        lines += writer.dims_of("r").definitions(writer.printer)
    return lines


def _loop_head(writer: KernelWriter) -> list[str]:
    rindex = "roffset + rbase"
    if writer.plan.use_int64:
        rindex = "(roffset + rbase).to(tl.int64)"
    return [f"rindex = {rindex}", "rmask = rindex < rnumel", *writer.dims_of("r").definitions(writer.printer)]


def _drop_unused_definitions(text: str, names: set[str]) -> str:
    """Remove `x1 = ...`-style index variable definitions that no other line uses."""
    lines = text.split("\n")
    kept: list[str] = []
    for line in lines:
        target = line.strip().split(" = ", 1)[0]
        if target in names:
            pattern = re.compile(rf"\b{re.escape(target)}\b")
            definition = line.strip()
            if not any(pattern.search(other) and other.strip() != definition for other in lines):
                continue
        kept.append(line)
    return "\n".join(kept)


@dataclass
class _Function:
    """One `@triton.jit` function of a kernel module, before the module is put together."""

    name: str
    lines: list[str]
    arg_names: tuple[str, ...]
    numels: dict[str, sympy.Expr]
    checks: dict[int, CheckSite] = dataclasses.field(default_factory=dict)


def _drive_nodes(
    writer: KernelWriter, group: KernelGroup, *, skip_after_loop: bool = False
) -> dict[int, int]:
    """Run every node's body in loop order; returns where each loop body's own lines start."""
    body_start: dict[int, int] = {}
    if writer.plan.kind != "looped":
        for node in group.nodes:
            writer.set_reduction_region(node.in_reduction_loop)
            writer.run_node(node)
        writer.set_reduction_region(False)
        return body_start
    for loop in range(group.num_loops):
        body = writer.enter_loop(loop)
        body.lines.extend(_loop_head(writer))
        body_start[id(body)] = len(body.lines)
        for node in group.nodes:
            if node.loop == loop and node.in_reduction_loop:
                writer.run_node(node)
        writer.leave_loop()
        if skip_after_loop:
            continue
        for node in group.nodes:
            if node.loop == loop and not node.in_reduction_loop:
                writer.run_node(node)
    return body_start


def _function(
    writer: KernelWriter,
    name: str,
    numels: dict[str, sympy.Expr],
    body_start: dict[int, int],
    interpret: bool,
) -> _Function:
    group, plan = writer.group, writer.plan
    pointer_args = list(dict.fromkeys(writer.pointers.values()))  # an in/out pointer serves two buffers
    size_args = [symbol.name for symbol in group.size_symbols]
    numel_args = [n for n in ("xnumel", "ynumel", "rnumel") if n in numels]
    blocks = {"pointwise": ["XBLOCK"], "tiled": ["YBLOCK", "XBLOCK"]}.get(plan.kind, ["XBLOCK", "RBLOCK"])
    signature = ", ".join([*pointer_args, *size_args, *numel_args, *(f"{b}: tl.constexpr" for b in blocks)])
    # Triton compiles device asserts (the runtime checks) only in debug mode.
    out = ["@triton.jit(debug=True)" if writer.check_sites else "@triton.jit", f"def {name}({signature}):"]
    rnumel = numels.get("rnumel", sympy.Integer(1))
    start, bound = "0", "rnumel"
    if isinstance(rnumel, sympy.Integer):
        bound = str(int(rnumel))
    elif interpret:
        bound = "libdevice.loop_bound(rnumel)"
    if plan.split:
        start = "libdevice.loop_bound(rstart)" if interpret else "rstart"
        bound = f"{start} + {plan.split_chunk}"
    loop_bodies = {id(s) for s in writer.sections if s.indent == 2}
    for section in writer.sections:
        if id(section) in loop_bodies:
            if len(section.lines) == body_start.get(id(section), 0):
                continue
            out.append(f"    for roffset in range({start}, {bound}, RBLOCK):")
        out.extend("    " * section.indent + line for line in section.lines)
    out.append("")
    text = _drop_unused_definitions("\n".join(out), writer.definition_names())
    ordered: dict[str, sympy.Expr] = {n: numels[n] for n in numel_args}
    checks = {site: key for key, site in writer.check_sites.items()}
    return _Function(name, text.split("\n"), tuple(pointer_args + size_args + numel_args), ordered, checks)


def _module(functions: list[_Function], interpret: bool) -> str:
    """A kernel module: imports, the combine helpers its functions use, the functions."""
    from codegen_triton.runtime import triton_helpers

    body = "\n".join(line for function in functions for line in [*function.lines, ""])
    used: list[str] = []
    for helper in re.findall(r"helpers\.(\w+)", body):
        if helper not in used:
            used.append(helper)
    out = [
        "import triton",
        "import triton.language as tl",
        _INTERPRETER_MATH if interpret else _GPU_MATH,
        "",
        "",
        "",
    ]
    for helper in used:
        out += [*inspect.getsource(getattr(triton_helpers, helper).fn).rstrip().splitlines(), "", ""]
    return "\n".join(out) + body.replace("helpers.", "").rstrip() + "\n"


def _write_function(
    group: KernelGroup, plan: KernelPlan, interpret: bool, runtime_checks: bool
) -> tuple[_Function, bool]:
    writer = KernelWriter(group, plan, runtime_checks, interpret)
    numels = _axis_numels(writer)
    writer.header.lines.extend(_header(writer, numels))
    body_start = _drive_nodes(writer, group)
    return _function(writer, kernel_name(group, plan), numels, body_start, interpret), writer.uses_random


def write_kernel(
    group: KernelGroup,
    plan: KernelPlan,
    *,
    interpret: bool,
    dynamic_persistent_limit: int = 0,
    runtime_checks: bool = True,
) -> GeneratedKernel:
    """The source of one Triton kernel computing `group` under `plan`.

    Args:
        group: the fused group.
        plan: kernel kind and index width (see `choose_plan`).
        interpret: import NumPy stand-ins for libdevice (Triton's interpreter, CPU testing).
        dynamic_persistent_limit: when > 0 and `plan` is a looped reduction of symbolic size, also
            write a persistent variant, launched when the runtime size is at most this limit.
        runtime_checks: assert indirect indices in range and integer divisors nonzero.
    """
    if plan.split:
        return _write_split(group, plan, interpret=interpret, runtime_checks=runtime_checks)
    function, uses_random = _write_function(group, plan, interpret, runtime_checks)
    rnumel = sympy.Mul(*group.reduction_size)
    if plan.kind != "looped" or dynamic_persistent_limit <= 0 or isinstance(rnumel, sympy.Integer):
        source = _module([function], interpret)
        return GeneratedKernel(
            function.name, source, plan.kind, function.arg_names, function.numels, uses_random, hint=plan.hint,
            checks=function.checks,
        )
    variant, _ = _write_function(group, dataclasses.replace(plan, kind="persistent"), interpret, runtime_checks)
    source = _module([function, variant], interpret)
    persistent = GeneratedKernel(
        variant.name, source, "persistent", variant.arg_names, variant.numels, uses_random, hint=plan.hint,
        checks=variant.checks,
    )
    return GeneratedKernel(
        function.name,
        source,
        plan.kind,
        function.arg_names,
        function.numels,
        uses_random,
        persistent=persistent,
        persistent_limit=dynamic_persistent_limit,
        hint=plan.hint,
        checks=function.checks,
    )


def _write_split(group: KernelGroup, plan: KernelPlan, *, interpret: bool, runtime_checks: bool) -> GeneratedKernel:
    """Both kernels of a split reduction, in one module (see `codegen_triton.codegen.split`)."""
    from codegen_triton.codegen.split import workspaces, write_finish

    writer = KernelWriter(group, plan, runtime_checks, interpret)
    numels = _axis_numels(writer)
    writer.header.lines.extend(_header(writer, numels))
    writer.header.lines += ["rsplit = tl.program_id(1)", f"rstart = rsplit * {plan.split_chunk}"]
    body_start = _drive_nodes(writer, group, skip_after_loop=True)
    partial = _function(writer, kernel_name(group, plan) + "_split", numels, body_start, interpret)
    finisher = write_finish(group, plan, runtime_checks, interpret)
    finish_numels = _axis_numels(finisher)
    finisher.header.lines[:0] = _header(finisher, finish_numels)
    finish_name = f"triton_per_{group.name}_finish"
    finish = _function(finisher, finish_name, finish_numels, {}, interpret)
    source = _module([partial, finish], interpret)
    uses_random = writer.uses_random or finisher.uses_random
    finish_kernel = GeneratedKernel(
        finish.name, source, "persistent", finish.arg_names, finish.numels, uses_random, hint="inner",
        checks=finish.checks,
    )
    return GeneratedKernel(
        partial.name,
        source,
        "looped",
        partial.arg_names,
        partial.numels,
        uses_random,
        plan.split,
        tuple(dtype for _, dtype in workspaces(group)),
        finish_kernel,
        hint=plan.hint,
        checks=partial.checks,
        split_chunk=plan.split_chunk,
    )
