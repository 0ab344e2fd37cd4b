"""`compile_graph(gm, example_inputs, *, backends) -> CompiledGraph`: the driver, one named line per pass.

rewrite the graph (a copy) -> lower -> [check] -> schedule -> [check] -> generate -> compile -> load the wrapper.
"""

from __future__ import annotations

import gc
import operator
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sympy
import torch
import torch.utils._pytree as pytree

from inductor_ir.backend import KernelBackend, KernelSource
from inductor_ir.config import InductorIRConfig
from inductor_ir.debug import describe_group, dump_artifacts
from inductor_ir.graph_passes import fold_embedding_gradients_pass, fuse_attention_pass
from inductor_ir.ir.nodes import Buffer, InputBuffer, ReinterpretView
from inductor_ir.ir.program import Program
from inductor_ir.lower import lower
from inductor_ir.scheduler import Schedule, schedule
from inductor_ir.size_guards import SizeChecker, input_size_checker
from inductor_ir.unbacked import UnbackedSymbolError, is_unbacked_float
from inductor_ir.wrapper import load_wrapper

__all__ = [
    "CompileTimings",
    "CompiledGraph",
    "MissingBackendError",
    "collector_paused",
    "compile_graph",
]


@dataclass
class CompileTimings:
    """Seconds spent in each stage of one ``compile_graph`` call."""

    lowering: float = 0.0
    scheduling: float = 0.0
    codegen: float = 0.0
    compile: float = 0.0

    @contextmanager
    def measure(self, stage: str) -> Iterator[None]:
        """Add the time of the ``with`` body to ``stage``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            setattr(self, stage, getattr(self, stage) + time.perf_counter() - start)


@contextmanager
def collector_paused(pause: bool = True) -> Iterator[None]:
    """Disable Python's cyclic garbage collector for the ``with`` body, then restore its state.

    Lowering and tracing allocate millions of short-lived objects; automatic collections over them
    cost a third to half of lowering and scheduling on large graphs. The cycles left behind are
    collected after the body.
    """
    was_enabled = gc.isenabled()
    if pause:
        gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class MissingBackendError(LookupError):
    """A kernel needs a device type for which no backend was given."""


@dataclass
class CompiledGraph:
    """A compiled graph: call it with the flat inputs of ``gm``; it returns outputs like ``gm`` (same structure).

    ``program``, ``schedule``, ``sources`` and ``wrapper`` are kept for inspection;
    ``artifacts()`` gives them all as text and ``dump(folder)`` writes them.
    """

    program: Program
    schedule: Schedule
    sources: list[KernelSource]
    wrapper: str
    timings: CompileTimings
    call: Callable[[list[Any]], Any]
    kernel_names: dict[str, str] = field(default_factory=dict)
    check_inputs: bool = True
    _expected: list[tuple[int, torch.dtype, tuple[int | None, ...]]] | None = field(default=None, repr=False)
    _sizes_checker: tuple[SizeChecker | None] | None = field(default=None, repr=False)
    _static_check: tuple[Callable[[Sequence[Any]], Any], list[torch.dtype], list[torch.Size]] | None = field(
        default=None, repr=False
    )

    def __call__(self, *args: Any) -> Any:
        """Run the wrapper on the flat inputs."""
        if len(args) == 1 and isinstance(args[0], list) and len(self.program.graph_inputs) != 1:
            args = tuple(args[0])
        if self.check_inputs:
            self._check_inputs(args)
        outputs = self.call(list(args))
        if self.program.output_spec is not None:
            return pytree.tree_unflatten(list(outputs), self.program.output_spec)
        return tuple(outputs)

    def _check_inputs(self, args: Sequence[Any]) -> None:
        """Reject inputs the kernels were not compiled for (a wrong count, dtype, rank or static size)."""
        static = self._static_check
        if static is not None and len(args) == len(self.program.graph_inputs):
            # All sizes static: one comparison of lists (a graph may take hundreds of parameters).
            pick, dtypes, shapes = static
            try:
                tensors = pick(args)
                if [t.dtype for t in tensors] == dtypes and [t.shape for t in tensors] == shapes:
                    return
            except AttributeError:
                pass
        expected = self._expected
        if expected is None:
            expected = self._expected = _expected_inputs(self.program)
        if len(args) != len(self.program.graph_inputs):
            raise TypeError(f"this compiled graph takes {len(self.program.graph_inputs)} inputs, got {len(args)}")
        for position, dtype, shape in expected:
            value = args[position]
            if isinstance(value, torch.Tensor) and value.dtype == dtype and len(value.shape) == len(shape):
                if all(n is None or n == m for n, m in zip(shape, value.shape)):
                    continue
            self._input_error(position, value)
        if self._sizes_checker is None:
            self._sizes_checker = (input_size_checker(self.program),)
        checker = self._sizes_checker[0]
        mismatch = checker(args) if checker is not None else None
        if checker is None and mismatch is None and static is None:
            self._static_check = _static_check(expected)
        if mismatch is not None:
            raise ValueError(
                f"inputs do not fit the symbolic sizes this graph was compiled for: {mismatch}; "
                "compile again for these inputs"
            )

    def _input_error(self, position: int, value: Any) -> None:
        item = self.program.graph_inputs[position]
        assert isinstance(item, InputBuffer)
        layout = item.layout
        got = f"{value.dtype} {list(value.shape)}" if isinstance(value, torch.Tensor) else type(value).__name__
        raise ValueError(
            f"input {position} ({item.name}) was compiled as {str(layout.dtype).removeprefix('torch.')} "
            f"{list(layout.size)}, got {got}; compile again for this input (or with dynamic shapes)"
        )

    def output_strides(self) -> list[tuple[int, ...] | None]:
        """Per output, the strides the compiled graph returns it with (None: not a tensor, or
        symbolic strides)."""
        strides: list[tuple[int, ...] | None] = []
        for out in self.program.outputs:
            layout = out.layout if isinstance(out, (Buffer, ReinterpretView)) else None
            static = layout is not None and all(isinstance(s, sympy.Integer) for s in layout.stride)
            strides.append(tuple(int(s) for s in layout.stride) if layout is not None and static else None)
        return strides

    def output_stride_exprs(self) -> list[tuple[sympy.Expr, ...] | None]:
        """Per output, the strides the compiled graph returns it with, as expressions of the graph's
        size symbols (None: not a tensor)."""
        return [
            tuple(sympy.sympify(s) for s in out.layout.stride) if isinstance(out, (Buffer, ReinterpretView)) else None
            for out in self.program.outputs
        ]

    def artifacts(self) -> dict[str, str]:
        """Every stage's text: ``ir.txt``, ``groups.txt``, one file per kernel, ``wrapper.py``."""
        texts = {"ir.txt": str(self.program)}
        texts["groups.txt"] = "\n\n".join(describe_group(g) for g in self.schedule.kernel_groups)
        for source in self.sources:
            texts[f"kernel_{source.name}.txt"] = source.source
        texts["wrapper.py"] = self.wrapper
        return texts

    def dump(self, folder: str | Path) -> list[Path]:
        """Write :meth:`artifacts` into ``folder``."""
        return dump_artifacts(folder, self.artifacts())


def _static_check(
    expected: list[tuple[int, torch.dtype, tuple[int | None, ...]]],
) -> tuple[Callable[[Sequence[Any]], Any], list[torch.dtype], list[torch.Size]] | None:
    """What ``_check_inputs`` compares when every tensor input has static sizes (None otherwise)."""
    if not expected or any(n is None for _, _, shape in expected for n in shape):
        return None
    positions = [position for position, _, _ in expected]
    getter = operator.itemgetter(*positions)
    pick = getter if len(positions) > 1 else (lambda args: (getter(args),))
    shapes = [torch.Size([int(n or 0) for n in shape]) for _, _, shape in expected]
    return pick, [dtype for _, dtype, _ in expected], shapes


def _expected_inputs(program: Program) -> list[tuple[int, torch.dtype, tuple[int | None, ...]]]:
    """(position, dtype, static sizes with None for symbolic) of each tensor input."""
    out = []
    for position, item in enumerate(program.graph_inputs):
        if isinstance(item, InputBuffer):
            shape = tuple(int(n) if n.is_Integer else None for n in item.layout.size)
            out.append((position, item.layout.dtype, shape))
    return out


def compile_graph(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    *,
    backends: Mapping[str, KernelBackend],
    config: InductorIRConfig | None = None,
    free_layout_outputs: int = 0,
) -> CompiledGraph:
    """Compile an ATen FX graph with the given kernel backends.

    The passes, in order (each takes values and returns new ones; ``gm`` is never changed):
    ``fuse_attention_pass`` and ``fold_embedding_gradients_pass`` (graph rewrites), :func:`lower`,
    :func:`schedule`, :func:`generate`, :func:`compile_kernels` and ``load_wrapper``. With
    ``config.check_ir``, ``Program.check()`` runs after lowering and ``Schedule.check()`` after
    scheduling.

    Args:
        gm: an ATen-level graph (``aotgrad`` or ``make_fx`` output).
        example_inputs: one value per placeholder.
        backends: device type (``"cpu"``, ``"cuda"``) -> :class:`KernelBackend`.
        config: options; see :class:`InductorIRConfig` (default: ``InductorIRConfig.defaults()``).
        free_layout_outputs: how many of the last outputs may come back in layouts of the compiled
            graph's choosing (a training forward's saved values; see :func:`lower`); the compiled
            graph's ``output_strides()`` says which.

    Returns:
        A :class:`CompiledGraph` callable with the same flat inputs as ``gm``.
    """
    config = config or InductorIRConfig.defaults()
    timings = CompileTimings()
    # The collector stays on while backends compile: a backend may fork worker processes there.
    with collector_paused(config.pause_gc):
        with timings.measure("lowering"):
            graph = fuse_attention_pass(gm)  # hand-written softmax(q @ k.T) @ v -> one fused call (a copy)
            graph = fold_embedding_gradients_pass(graph)  # a tied embedding's gradient -> index_put into the other's
            program = lower(graph, example_inputs, layout_optimization=config.layout_optimization,
                            eager_ops=eager_ops(backends), strict_lowering=config.strict_lowering,
                            free_layout_outputs=free_layout_outputs)  # fmt: skip
        if config.check_ir:
            program.check()
        with timings.measure("scheduling"):
            sched = schedule(program, backends, fuse=config.fuse)  # fusion, order, memory plan
        if config.check_ir:
            sched.check()
        reject_float_size_arguments(sched)
        with timings.measure("codegen"):
            sources = generate(sched, backends)  # one kernel source per group, by its device's backend
    with timings.measure("compile"):
        kernels = compile_kernels(sources, backends)  # each backend compiles its sources in one batch
        names = {source.group.name: source.name for source in sources}
        call, wrapper = load_wrapper(sched, kernels, names)  # the Python module calling them in order
    compiled = CompiledGraph(sched.program, sched, sources, wrapper, timings, call, names, config.check_inputs)
    if config.debug_dir:
        compiled.dump(config.debug_dir)
    return compiled


def eager_ops(backends: Mapping[str, KernelBackend]) -> frozenset[Any]:
    """The ATen ops some backend wants run by ATen (e.g. random ops under ``fallback_random``): not lowered."""
    return frozenset().union(*(getattr(b, "eager_ops", ()) for b in backends.values()))


def reject_float_size_arguments(sched: Schedule) -> None:
    """Raise ``UnbackedSymbolError`` if a kernel would take a float of ``Tensor.item()`` as a size:
    kernels take sizes as ints, so it would be truncated (lowering runs such ops in ATen)."""
    for group in sched.kernel_groups:
        floats = [str(s) for s in group.size_symbols if is_unbacked_float(s)]
        if floats:
            raise UnbackedSymbolError(f"kernel {group.name} would read the float(s) {', '.join(floats)} of "
                                      "Tensor.item() as ints")


def generate(sched: Schedule, backends: Mapping[str, KernelBackend]) -> list[KernelSource]:
    """Each kernel group's source, from the backend of its device type, in schedule order.

    Raises:
        MissingBackendError: a group runs on a device type no backend handles.
    """
    sources: list[KernelSource] = []
    for group in sched.kernel_groups:
        backend = backends.get(group.device_type)
        if backend is None:
            raise MissingBackendError(
                f"kernel {group.name} runs on {group.device!r} but no backend handles {group.device_type!r}; "
                f"pass backends={{{group.device_type!r}: ...}} to compile_graph (given: {sorted(backends)})"
            )
        sources.append(backend.generate(group))
    return sources


def compile_kernels(sources: Sequence[KernelSource], backends: Mapping[str, KernelBackend]) -> dict[str, Callable[..., None]]:
    """Kernel name -> callable: each device type's sources compiled by its backend in one batch.

    Raises:
        ValueError: two kernels have the same name.
    """
    by_device: dict[str, list[KernelSource]] = {}
    for source in sources:
        by_device.setdefault(source.group.device_type, []).append(source)
    kernels: dict[str, Callable[..., None]] = {}
    for device_type, batch in by_device.items():
        for source, fn in zip(batch, backends[device_type].compile(batch)):
            if source.name in kernels:
                raise ValueError(f"two kernels are both named {source.name!r}; kernel names must be unique")
            kernels[source.name] = fn
    return kernels
