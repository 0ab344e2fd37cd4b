"""The C++ kernel for one fused group: loops, vector loop with scalar tail, OpenMP, reductions.

Loops run over the group's iteration space as planned by codegen/space.py (size-1 dims dropped,
adjacent dims merged). Pointwise group: the outer loops run in parallel (when the kernel touches
enough elements), the innermost dimension runs as a vector loop of ``kiln::VEC`` lanes and a
scalar tail. Reduction group: the pointwise loops run in parallel; inside, each reduction loop
declares its accumulators, runs its reduction dimensions (the innermost vectorized, with a
scalar tail) and finishes with the reductions' results and the nodes that follow them. Two
variants: vectorized across outputs (when loads are contiguous along the last pointwise dim, not
along the reduction) and split across threads (one big reduction to a single value).
When a body cannot be vectorized (a store that does not move with the vector index), the whole
kernel is generated as scalar code.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import sympy

from codegen_cpp.codegen.dtypes import cpp_dtype
from codegen_cpp.codegen.handler import BodyScope, CppValue, KernelState, Unvectorizable
from codegen_cpp.codegen.indexing import Ranges
from codegen_cpp.codegen.lanes import VECTOR_LANES, lane_stride
from codegen_cpp.codegen.loops import INDENT as _INDENT
from codegen_cpp.codegen.loops import Block, LoopShapes
from codegen_cpp.codegen.loops import indent as _indent
from codegen_cpp.codegen.printer import cpp_index
from codegen_cpp.codegen.ranged import RangedOpsHandler
from codegen_cpp.codegen.reduction import combine_partial
from codegen_cpp.codegen.reuse import MAX_SCRATCH_ELEMENTS, LoopValueReuse
from codegen_cpp.codegen.space import IterationSpace, plan_space
from codegen_cpp.codegen.tiling import TiledAccumulators, tile_loop, tile_step, tile_vectors, tiled_values
from codegen_cpp.codegen.unused import drop_unused_values
from codegen_cpp.config import CppConfig
from inductor_ir.backend import KernelGroup, KernelNode, KernelSource
from inductor_ir.ir.checks import RuntimeCheck
from inductor_ir.ops_handler import set_ops_handler

__all__ = ["VECTOR_LANES", "CppKernelSource", "generate_kernel", "kernel_name"]



def kernel_name(group: KernelGroup) -> str:
    """``cpp_<group name>``, made a valid C identifier."""
    return "cpp_" + re.sub(r"\W", "_", group.name)


def _product(sizes: Sequence[sympy.Expr]) -> sympy.Expr:
    return sympy.Mul(*sizes) if sizes else sympy.Integer(1)


# How much cheaper a thread's share of a row-reducing kernel is than of a pointwise one (see ``_grain``).
ROW_REDUCTION_GRAIN_DIVISOR = 16
# The least rows a reduction across outputs splits across threads (`_KernelWriter._row_split_loop`).
ROW_SPLIT_MIN_ROWS = 512


def _parallel_condition(work: sympy.Expr, grain: int) -> str | None:
    """When a loop of ``work`` elements runs on threads: "" always, None never, else an ``if``.

    As ATen's ``parallel_for``: every thread gets at least ``grain`` elements, so a kernel runs on
    threads only from two grains of work (a parallel region costs a fork and a join, and on a busy
    machine a join can wait a whole time slice for a descheduled thread).
    """
    if work.is_Integer:
        return "" if int(work) >= 2 * grain else None
    return f"{cpp_index(work)} >= {2 * grain}"


def _thread_count() -> str:
    """The ``num_threads`` of every parallel region: the whole team, ``kiln_threads``.

    A region never asks for fewer threads than the team even when its work has fewer grains than
    there are threads: libgomp resizes its pool when consecutive regions ask for different counts,
    and the regions that follow (ATen's GEMMs, which use the whole pool) then pay for it. On a
    16-core host an MLP whose GELU kernels asked for 4 of 16 threads took 3.8 ms against eager's 1.95
    (its GEMMs alone: 1.8 ms); with every region on the whole team, 2.0 ms. Whether a loop runs on
    threads at all is `_parallel_condition`'s decision.
    """
    return "kiln_threads"


@dataclass(frozen=True)
class _Plan:
    """Decisions made before writing: the vector variable and whether to parallelize."""

    vector_var: sympy.Symbol | None
    parallel: str | None  # the `if(...)` condition, "" for always, None for never
    outer: bool = False  # reduction group vectorized across its last pointwise dim


class _KernelWriter(LoopShapes):
    def __init__(
        self,
        group: KernelGroup,
        config: CppConfig,
        space: IterationSpace,
        vectorize: bool,
        outer: bool = False,
        symbolic_scratch: bool = True,
    ) -> None:
        self.group = group
        self.config = config
        self.space = space
        self.xs, self.rs = space.loop_xs, space.loop_rs
        self.x_sizes, self.r_sizes = list(space.x_sizes), list(space.r_sizes)
        # An output written in place over an input is one `in_out_ptr` for both: two restrict
        # pointers to one memory would let the compiler reorder the input's loads past the stores.
        self.state = KernelState(
            pointers=group.pointer_names(),
            storage={r.name: r.dtype for r in group.buffers().values()},
            internal=frozenset(r.name for r in group.internal),
            runtime_checks=config.runtime_checks,
        )
        self.ranges: Ranges = {**dict(zip(self.xs, self.x_sizes)), **dict(zip(self.rs, self.r_sizes))}
        self.plan = self._plan(vectorize, outer)
        self.reuse: LoopValueReuse | None = None
        self.tile = 1  # output vectors per tile of a reduction vectorized across outputs
        self.row_split = False  # that reduction's rows split across threads (see `_row_split_loop`)
        # A symbolic reduction range may keep values in variable-length scratch arrays (reuse.py);
        # the condition under which that variant runs is then ``scratch_guard``.
        self.symbolic_scratch = symbolic_scratch
        self.scratch_guard: str | None = None

    # ------------------------------------------------------------------ planning
    def _plan(self, vectorize: bool, outer: bool) -> _Plan:
        group = self.group
        inner_sizes = self.r_sizes if group.is_reduction and not outer else self.x_sizes
        inner_vars = self.rs if group.is_reduction and not outer else self.xs
        vector_var = None
        if vectorize and self.config.vectorize and inner_sizes:
            last = sympy.sympify(inner_sizes[-1])
            if not (last.is_Integer and int(last) < VECTOR_LANES):
                vector_var = inner_vars[-1]
        work = _product(self.x_sizes) * _product(self.r_sizes)
        parallel = _parallel_condition(work, self._grain()) if self.x_sizes else None
        return _Plan(vector_var, parallel, outer and vector_var is not None)

    def _grain(self) -> int:
        """Elements per thread: ``parallel_threshold`` for pointwise work; a sixteenth of it for kernels
        that reduce rows (several passes over each row, as layer norm and softmax make: ATen splits
        those by rows, and a 64 x 512 layer norm left serial ran at half of eager's speed on 8 threads)."""
        if self.r_sizes:
            return max(1, self.config.parallel_threshold // ROW_REDUCTION_GRAIN_DIVISOR)
        return self.config.parallel_threshold

    def _threads(self) -> str:
        """The ``num_threads`` of a parallel region (see `_thread_count`)."""
        return _thread_count()

    def _pragma(self, collapse: int) -> list[str]:
        if self.plan.parallel is None or collapse == 0:
            return []
        text = f"#pragma omp parallel for num_threads({self._threads()})"
        if collapse > 1:
            text += f" collapse({collapse})"
        if self.plan.parallel:
            text += f" if({self.plan.parallel})"
        return [text]

    # ------------------------------------------------------------------ bodies
    def _run(
        self,
        nodes: Sequence[KernelNode],
        scope: BodyScope,
        vector_var: sympy.Symbol | None,
        in_loop: bool,
        written: frozenset[str] | None = None,
    ) -> None:
        hoist_from = self._hoistable_loops(vector_var) if in_loop else ()
        for node in nodes:
            handler = RangedOpsHandler(
                self.state,
                scope,
                vector_var,
                reduction_vars=self.rs,
                reduction_sizes=tuple(self.r_sizes),
                node_name=node.name,
                reuse=self.reuse if in_loop else None,
                hoist_from=hoist_from,
                written=written,
            )
            handler.ranges = self.ranges
            with set_ops_handler(handler):
                node.body(self.space.body_xs, self.space.body_rs if in_loop else ())

    def _hoistable_loops(self, vector_var: sympy.Symbol | None) -> tuple[str, ...]:
        """The reduction loop variables whose invariant values a body computes once before the loops
        (of a static, nonzero range)."""
        size = _product(self.r_sizes)
        if not (size.is_Integer and int(size) > 0):
            return ()
        return tuple(var.name for var in self.rs)

    def _written_from(self, loop: int) -> frozenset[str]:
        """The pointers the group's nodes of reduction loop ``loop`` and later ones write."""
        pointers = self.state.pointers
        return frozenset(pointers[n.name] for n in self.group.nodes if n.loop >= loop and n.name in pointers)

    # ------------------------------------------------------------------ loops
    def _pointwise(self) -> list[str]:
        group = self.group
        nodes = group.nodes
        sizes = self.x_sizes
        vector_var = self.plan.vector_var
        scalar_scope = BodyScope(lines=[], pre=[], post=[], values={})
        if vector_var is None:
            self._run(nodes, scalar_scope, None, in_loop=False)
            loops = list(zip(self.xs, sizes))
            return self._pragma(len(loops)) + self._nest(loops, scalar_scope.lines)
        vector_scope = BodyScope(lines=[], pre=[], post=[], values={})
        self._run(nodes, vector_scope, vector_var, in_loop=False)
        self._run(nodes, scalar_scope, None, in_loop=False)
        return self._vectorized_loops(sizes, vector_var, vector_scope.lines, scalar_scope.lines)

    def _vectorized_loops(
        self,
        sizes: list[sympy.Expr],
        vector_var: sympy.Symbol,
        vector_body: list[str],
        scalar_body: list[str],
        tile: int = 1,
        row_split: bool = False,
    ) -> list[str]:
        """Pointwise loops whose last dim runs ``vector_body`` per vector (per tile of ``tile``
        vectors, codegen/tiling.py) and ``scalar_body`` per tail index. ``row_split``: the body
        threads its own rows (`_row_split_loop`); the one tile runs on the calling thread."""
        end = f"{vector_var.name}_vec_end"
        pragma = self._pragma(1) if len(sizes) == 1 and not row_split else []
        step: list[str] = []
        if tile > 1:
            tile_var = sympy.Symbol(f"{vector_var.name}_tile")
            count = f"({end} - {tile_var.name}) / {VECTOR_LANES}"
            # One dimension: the tiles are what the threads share (a tile per thread).
            shared = self._threads() if pragma and not self.plan.parallel else None
            step = [f"const int64_t kiln_tile = {tile_step(sizes[-1], tile, shared)};"]
            vector_loop = [
                self._for(tile_var, "0", end, f"{VECTOR_LANES} * kiln_tile") + " {",
                _INDENT + f"const int64_t kiln_tile_n = {count} < kiln_tile ? {count} : kiln_tile;",
                *_indent(vector_body),
                "}",
            ]
        else:
            vector_loop = [self._for(vector_var, "0", end, VECTOR_LANES) + " {", *_indent(vector_body), "}"]
        if len(sizes) == 1:
            # One dimension: the vector loop itself is what the threads share.
            return [
                f"const int64_t {end} = ({cpp_index(sizes[0])}) / {VECTOR_LANES} * {VECTOR_LANES};",
                *step,
                *pragma,
                *vector_loop,
                self._for(vector_var, end, cpp_index(sizes[0])) + " {",
                *_indent(scalar_body),
                "}",
            ]
        inner = [
            "{",
            _INDENT + f"const int64_t {end} = ({cpp_index(sizes[-1])}) / {VECTOR_LANES} * {VECTOR_LANES};",
            *_indent(step),
            *_indent(vector_loop),
            _INDENT + self._for(vector_var, end, cpp_index(sizes[-1])) + " {",
            *_indent(scalar_body, 2),
            _INDENT + "}",
            "}",
        ]
        outer = list(zip(self.xs[:-1], sizes[:-1]))
        return self._pragma(len(outer)) + self._nest(outer, inner)

    def _reduction_loop(
        self, loop: int, values: dict[str, CppValue], vector_var: sympy.Symbol | None, outer: bool
    ) -> Callable[[], list[str]]:
        """Reduction loop ``loop`` for one pointwise index; ``values`` carries results on.

        Returns a function giving its lines: they are assembled once every loop has run, as a
        later loop may make an earlier one keep a value (see codegen/reuse.py).
        ``outer``: ``vector_var`` is the last pointwise variable (each lane is one pointwise index,
        the reduction loops are scalar); else it is the last reduction variable (or None).
        """
        if self.reuse is not None:
            self.reuse.loop = loop
        group = self.group
        in_loop = [n for n in group.nodes if n.loop == loop and n.in_reduction_loop]
        after = [n for n in group.nodes if n.loop == loop and not n.in_reduction_loop]
        sizes = self.r_sizes
        pre: list[str] = []
        post: list[str] = []
        written = self._written_from(loop)
        if outer:
            outer_block = Block([], [])
            hoisted: list[str] = []
            scope = BodyScope(
                lines=[], pre=pre, post=post, values={}, reduced=values, block_pre=outer_block.pre,
                block_post=outer_block.post, hoisted=hoisted,
            )
            self._run(in_loop, scope, vector_var, in_loop=True, written=written)
            after_scope = BodyScope(lines=post, pre=pre, post=post, values=values, reduced=values)
            self._run(after, after_scope, vector_var, in_loop=False)
            assert vector_var is not None
            return lambda: self._outer_loop(loop, vector_var, pre, hoisted, scope.lines, post, outer_block)
        vector_lines: list[str] = []
        block = Block([], [])
        if vector_var is not None:
            vector_scope = BodyScope(
                lines=[], pre=pre, post=[], values={}, reduced=dict(values), block_pre=block.pre, block_post=block.post
            )
            self._run(in_loop, vector_scope, vector_var, in_loop=True, written=written)
            vector_lines = vector_scope.lines
        scalar_scope = BodyScope(lines=[], pre=pre, post=post, values={}, reduced=values)
        self._run(in_loop, scalar_scope, None, in_loop=True, written=written)
        after_scope = BodyScope(lines=post, pre=pre, post=post, values=values, reduced=values)
        self._run(after, after_scope, None, in_loop=False)
        split = self._split_condition()
        scalar_lines = scalar_scope.lines
        if split is not None:
            lines = self._split_reduction_loop(loop, split, pre, vector_var, vector_lines, scalar_lines, post, block)
            return lambda: lines

        def assemble() -> list[str]:
            if vector_var is None:
                loops_body = self._nest(list(zip(self.rs, sizes)), scalar_lines)
            else:
                inner = self._vector_and_tail(vector_var, sizes[-1], vector_lines, scalar_lines, block)
                loops_body = self._nest(list(zip(self.rs[:-1], sizes[:-1])), inner)
            return [f"// reduction loop {loop}", *pre, *loops_body, *post]

        return assemble

    def _outer_loop(
        self,
        loop: int,
        vector_var: sympy.Symbol,
        pre: list[str],
        hoisted: list[str],
        body: list[str],
        post: list[str],
        block: Block,
    ) -> list[str]:
        """A reduction loop vectorized across outputs; tiled (codegen/tiling.py) when ``self.tile > 1``
        and its accumulators allow (else ``self.tile`` drops to 1: the caller loops per vector).
        With ``block`` lines, the last reduction dim runs in blocks of ``REDUCTION_OUTER_BLOCK`` steps.
        ``hoisted``: values invariant in the reduction loop, computed once per vector of outputs before
        it (tiled: into one array entry per vector of the tile, `tiling.tiled_values`)."""
        accumulators = TiledAccumulators.parse([*pre, *block.pre], self.tile) if self.tile > 1 and body else None
        if accumulators is None:
            self.tile = 1
            if not body:
                return [f"// reduction loop {loop}", *pre, *hoisted, *post]
            return [f"// reduction loop {loop}", *pre, *hoisted, *self._outer_nest(body, block), *post]
        values = tiled_values(vector_var, hoisted, self.tile, _INDENT)
        hoisted_lines: list[str] = []
        if values is None:
            body = [*hoisted, *body]  # computed again in every step
        else:
            hoisted_lines, per_vector = values
            if per_vector is not None:
                body = [per_vector.sub(r"\1[kiln_c]", line) for line in body]
        inner = tile_loop(vector_var, "kiln_tile_n", accumulators.per_vector(body), _INDENT)
        finish = tile_loop(vector_var, "kiln_tile_n", accumulators.per_vector(post), _INDENT)
        names = {name for _, name, _ in accumulators.declarations}
        block_names = {line.split()[1] for line in block.pre}
        tiled = TiledAccumulators([d for d in accumulators.declarations if d[1] in names - block_names], self.tile)
        per_block = TiledAccumulators([d for d in accumulators.declarations if d[1] in block_names], self.tile)
        fold = tile_loop(vector_var, "kiln_tile_n", accumulators.per_vector(block.post), _INDENT) if block.post else []
        if self.row_split and all(name in self.state.outer_kinds for _, name, _ in tiled.declarations):
            split = self._row_split_loop(vector_var, inner, tiled, Block(per_block.declare(), fold))
            comment = f"// reduction loop {loop}, {self.tile} vectors of outputs at once, its rows split across threads"
            return [comment, *tiled.declare(), *hoisted_lines, *split, *finish]
        self.row_split = False
        loops_body = self._outer_nest(inner, Block(per_block.declare(), fold))
        comment = f"// reduction loop {loop}, {self.tile} vectors of outputs at once"
        return [comment, *tiled.declare(), *hoisted_lines, *loops_body, *finish]

    def _row_split_loop(
        self, vector_var: sympy.Symbol, inner: list[str], tiled: TiledAccumulators, block: Block
    ) -> list[str]:
        """The rows of a one-tile reduction across outputs, split across threads.

        Split by output vectors, a thread of 16 walks two vectors (128 bytes) of every row, rows 2 KB
        apart: a new page every other row, which the hardware prefetchers do not follow (an RMSNorm
        weight gradient over 8192 x 512 ran at a third of torch.compile's speed on 16 threads). Here each
        thread reduces a contiguous share of the rows, whole rows at a time, into private accumulators
        (the shared ones' names, shadowed); the calling thread then folds the shares in thread order,
        so a result depends on the thread count only, never on timing.
        """
        var, rows = self.rs[0], cpp_index(self.r_sizes[0])
        tile = self.tile
        threads = self._threads()
        parts = threads if not self.plan.parallel else f"({self.plan.parallel}) ? {threads} : 1"
        entry = f"kiln_part * {tile} + kiln_c"
        allocate, keep, combine, free = [], [], [], []
        for kind, name, init in tiled.declarations:
            element = TiledAccumulators.element_type(kind, init)
            allocate.append(f"auto* {name}_parts = new {element}[kiln_parts * {tile}];")
            keep.append(f"{name}_parts[{entry}] = {name}[kiln_c];")
            combine.append(combine_partial(self.state.outer_kinds[name], f"{name}[kiln_c]", f"{name}_parts[{entry}]", True))
            free.append(f"delete[] {name}_parts;")
        begin, end = f"{var.name}_begin", f"{var.name}_end"
        region = [
            "const int kiln_part = omp_get_thread_num(), kiln_team = omp_get_num_threads();",
            "if (kiln_part == 0) kiln_used = kiln_team;",
            f"const int64_t {begin} = {rows} * kiln_part / kiln_team, {end} = {rows} * (kiln_part + 1) / kiln_team;",
            *tiled.declare(),
            *self._range_nest(var, begin, end, inner, block),
            *tile_loop(vector_var, "kiln_tile_n", keep, _INDENT),
        ]
        return [
            f"const int kiln_parts = {parts};",
            "int kiln_used = 1;",
            *allocate,
            "#pragma omp parallel num_threads(kiln_parts)",
            "{",
            *_indent(region),
            "}",
            "for (int kiln_part = 0; kiln_part < kiln_used; ++kiln_part) {",
            *_indent(tile_loop(vector_var, "kiln_tile_n", combine, _INDENT)),
            "}",
            *free,
        ]

    def _split_condition(self) -> str | None:
        """For one big reduction to a scalar: the ``if`` of the thread split ("" always, None never)."""
        if self.xs or not self.rs or self.group.num_loops != 1:
            return None
        if any(n.reduction_type in ("argmax", "argmin") for n in self.group.nodes):
            return None
        return _parallel_condition(_product(self.r_sizes), self.config.parallel_threshold)

    def _split_reduction_loop(
        self,
        loop: int,
        condition: str,
        pre: list[str],
        vector_var: sympy.Symbol | None,
        vector_lines: list[str],
        scalar_lines: list[str],
        post: list[str],
        block: Block,
    ) -> list[str]:
        """A reduction to one value, split across threads: each thread reduces a share of the range
        into private accumulators (``accN_t``), which are then folded into the shared ones."""
        partials = self.state.combinable
        names = "|".join(re.escape(a) for a in sorted(partials, key=len, reverse=True))
        pattern = re.compile(rf"\b({names})\b")

        def private(lines: list[str]) -> list[str]:
            return [pattern.sub(r"\1_t", line) for line in lines] if partials else list(lines)

        sizes = self.r_sizes
        block = Block(private(block.pre), private(block.post))
        if vector_var is not None and len(self.rs) == 1:
            end = f"{vector_var.name}_vec_end"
            vector_loop = self._vector_loop(
                vector_var, end, sizes[0], private(vector_lines), block, pragma=["#pragma omp for nowait"]
            )
            loops = [
                f"const int64_t {end} = ({cpp_index(sizes[0])}) / {VECTOR_LANES} * {VECTOR_LANES};",
                *vector_loop,
                "#pragma omp single nowait",
                self._for(vector_var, end, cpp_index(sizes[0])) + " {",
                *_indent(private(scalar_lines)),
                "}",
            ]
        else:
            if vector_var is None:
                nest = self._nest(list(zip(self.rs, sizes)), private(scalar_lines))
            else:
                inner = self._vector_and_tail(
                    vector_var, sizes[-1], private(vector_lines), private(scalar_lines), block
                )
                nest = self._nest(list(zip(self.rs[:-1], sizes[:-1])), inner)
            loops = ["#pragma omp for nowait", *nest]
        combine = [combine_partial(kind, acc, f"{acc}_t", vector) for acc, (kind, vector) in partials.items()]
        threads = _thread_count()
        pragma = f"#pragma omp parallel num_threads({threads})" + (f" if({condition})" if condition else "")
        return [
            f"// reduction loop {loop}, split across threads",
            *pre,
            pragma,
            "{",
            *_indent(private(pre)),
            *_indent(loops),
            _INDENT + "#pragma omp critical",
            _INDENT + "{",
            *_indent(combine, 2),
            _INDENT + "}",
            "}",
            *post,
        ]

    def _reduction_body(self, vector_var: sympy.Symbol | None, outer: bool) -> list[str]:
        values: dict[str, CppValue] = {}
        self.reuse = self._make_reuse(vector_var, outer)
        arrays_before = set(self.state.row_arrays)
        parts = [
            self._reduction_loop(loop, values, vector_var, outer) for loop in range(self.group.num_loops)
        ]
        declarations = self.reuse.declarations if self.reuse is not None else []
        if not declarations:
            self.scratch_guard = None  # nothing reused: no variant for long symbolic ranges needed
        self.reuse = None
        rows = [line for name, line in self.state.row_arrays.items() if name not in arrays_before]
        return [*declarations, *rows, *(line for part in parts for line in part())]

    def _make_reuse(self, vector_var: sympy.Symbol | None, outer: bool) -> LoopValueReuse | None:
        """Scratch reuse for a vectorized kernel of several reduction loops over a short static range."""
        size = _product(self.r_sizes)
        if outer or vector_var is None or self.group.num_loops < 2:
            return None
        if not size.is_Integer:
            if not self.symbolic_scratch:
                return None
            self.scratch_guard = f"{cpp_index(size)} <= {MAX_SCRATCH_ELEMENTS}"
        elif int(size) > MAX_SCRATCH_ELEMENTS:
            return None
        index: sympy.Expr = sympy.Integer(0)
        stride: sympy.Expr = sympy.Integer(1)
        for var, extent in reversed(list(zip(self.rs, self.r_sizes))):
            index += var * stride
            stride *= extent
        return LoopValueReuse(size=cpp_index(size), index=cpp_index(sympy.expand(index)))

    def _reduction(self) -> list[str]:
        sizes = self.x_sizes
        vector_var = self.plan.vector_var
        if not self.plan.outer:
            body = self._reduction_body(vector_var, outer=False)
            loops = list(zip(self.xs, sizes))
            return self._pragma(len(loops)) + self._nest(loops, body)
        assert vector_var is not None
        self.tile = tile_vectors(sizes[-1]) if self.group.num_loops == 1 else 1
        self.row_split = self._rows_can_split()
        vector_body = self._reduction_body(vector_var, outer=True)
        tile, row_split = self.tile, self.row_split  # 1 / False when the accumulators did not allow it
        self.tile, self.row_split = 1, False
        scalar_body = self._reduction_body(None, outer=False)
        return self._vectorized_loops(sizes, vector_var, vector_body, scalar_body, tile, row_split)

    def _rows_can_split(self) -> bool:
        """Whether a reduction vectorized across outputs may split its rows across threads (see
        `_row_split_loop`): one output dim whose row is one tile, one long static reduction dim, and
        enough work for threads."""
        if self.plan.parallel is None or len(self.xs) != 1 or len(self.rs) != 1 or self.tile <= 1:
            return False
        row, rows = sympy.sympify(self.x_sizes[0]), sympy.sympify(self.r_sizes[0])
        if not (row.is_Integer and rows.is_Integer):
            return False
        return int(row) // VECTOR_LANES == self.tile and int(rows) >= ROW_SPLIT_MIN_ROWS

    # ------------------------------------------------------------------ the function
    def signature(self, name: str) -> str:
        """``extern "C" void name(const float* __restrict__ in_ptr0, ..., const int64_t s0, int threads)``.

        Each pointer is the only way the kernel reaches its memory (the wrapper checks that no two
        arguments share it): inputs are ``const``; outputs, and in/out pointers (an output written
        over an input), are not.
        """
        params: list[str] = []
        for record in self.group.inputs:
            storage = cpp_dtype(record.dtype).storage
            params.append(f"const {storage}* __restrict__ {self.state.pointers[record.name]}")
        for record in self.group.outputs:
            storage = cpp_dtype(record.dtype).storage
            params.append(f"{storage}* __restrict__ {self.state.pointers[record.name]}")
        params += [f"const int64_t {symbol.name}" for symbol in self.group.size_symbols]
        params.append("const int kiln_threads")  # OpenMP threads, passed by CppKernel on every call
        joined = (",\n" + " " * (len(name) + 17)).join(params)
        return f'extern "C" void {name}({joined})'

    def body(self) -> list[str]:
        """The function body's lines."""
        return self._reduction() if self.group.is_reduction else self._pointwise()

    def write(self, body: list[str] | None = None) -> str:
        """The whole function (with ``body``, default :meth:`body`; values it never reads dropped)."""
        body = drop_unused_values(self.body() if body is None else body)
        name = kernel_name(self.group)
        return "\n".join([self.signature(name), "{", *_indent(body), "}", ""])


def _contiguous_in(index: sympy.Expr, var: sympy.Symbol) -> bool:
    return lane_stride(index, var) == 1


def _long_enough(size: sympy.Expr) -> bool:
    return not (size.is_Integer and int(size) < VECTOR_LANES)


def _strided_loads(loads: Sequence[sympy.Expr], var: sympy.Symbol) -> int:
    """How many loads neither move by 1 nor stay put along ``var`` (gathers when vectorized on it)."""
    return sum(1 for index in loads if lane_stride(index, var) not in (0, 1))


def _prefers_outer(group: KernelGroup, space: IterationSpace) -> bool:
    """Whether to vectorize a reduction group across its last pointwise dim (a lane per output).

    Chosen over vectorizing along the last reduction dim when some load is contiguous across
    outputs and either the reduction is shorter than a vector or fewer loads would be gathers
    that way (a column sum: contiguous across columns, strided down the rows; per-row values
    such as a mean are then one broadcast per vector instead of a contiguous load).
    """
    if not (group.is_reduction and space.loop_xs and _long_enough(space.x_sizes[-1])):
        return False
    x_last = space.loop_xs[-1]
    if not any(_contiguous_in(index, x_last) for index in space.loads):
        return False
    if not space.loop_rs or not _long_enough(space.r_sizes[-1]):
        return True
    r_last = space.loop_rs[-1]
    if not any(_contiguous_in(index, r_last) for index in space.loads):
        return True
    return _strided_loads(space.loads, x_last) < _strided_loads(space.loads, r_last)


@dataclass(frozen=True)
class CppKernelSource(KernelSource):
    """One generated C++ kernel: its source, and what calling and describing it needs.

    Attributes:
        vectorized: its loops use SIMD vectors.
        vectorized_across_outputs: the vectors run across outputs (reductions along the outer dim).
        parallel: its outer loop runs on OpenMP threads.
        num_pointers: tensor arguments (inputs, then outputs; an in-place pair counts once).
        num_sizes: int size arguments after them (one per ``group.size_symbols``).
        checks: its runtime checks by site, raised from Python after a failed call.
    """

    vectorized: bool
    vectorized_across_outputs: bool
    parallel: bool
    num_pointers: int
    num_sizes: int
    checks: Mapping[int, RuntimeCheck]


def generate_kernel(group: KernelGroup, config: CppConfig) -> CppKernelSource:
    """C++ source of one kernel for ``group`` (vectorized where its bodies allow).

    Returns:
        A ``CppKernelSource`` whose ``source`` is one ``extern "C"`` function named
        ``cpp_<group.name>``.
    """
    space = plan_space(group, merge=config.merge_dims)
    try:
        outer = _prefers_outer(group, space)
        writer = _KernelWriter(group, config, space, vectorize=True, outer=outer)
        body = writer.body()
        if writer.scratch_guard is not None:
            # Symbolic range: scratch arrays while it is short enough for the stack, else recompute.
            plain = _KernelWriter(group, config, space, vectorize=True, outer=outer, symbolic_scratch=False)
            body = [f"if ({writer.scratch_guard}) {{", *_indent(body), "} else {", *_indent(plain.body()), "}"]
        source = writer.write(body)
    except Unvectorizable:
        writer = _KernelWriter(group, config, space, vectorize=False)
        source = writer.write()
    return CppKernelSource(
        name=kernel_name(group),
        source=source,
        group=group,
        vectorized=writer.plan.vector_var is not None,
        vectorized_across_outputs=writer.plan.outer,
        parallel=writer.plan.parallel is not None,
        num_pointers=len(group.inputs) + len(group.outputs),
        num_sizes=len(group.size_symbols),
        checks={site: check for check, site in writer.state.checks.items()},
    )
