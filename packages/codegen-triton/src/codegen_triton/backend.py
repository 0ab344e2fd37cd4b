"""`TritonBackend`: inductor_ir's `KernelBackend` for CUDA devices, generating and launching Triton kernels."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sympy

from codegen_triton.codegen.analysis import choose_plan, contiguous_dim_last
from codegen_triton.codegen.split import plan_split
from codegen_triton.codegen.template import GeneratedKernel, write_kernel
from codegen_triton.config import TritonConfig, interpreter_ready
from codegen_triton.runtime.compile_pool import CompilePool, PrecompileJob, shared_compile_pool
from codegen_triton.runtime.launcher import KernelSpec, TritonLauncher
from inductor_ir.backend import RANDOM_OPS, KernelGroup, KernelSource

__all__ = ["RandomFallbackRequired", "TritonBackend", "TritonKernelCall", "TritonKernelSource"]

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class TritonKernelSource(KernelSource):
    """One generated Triton kernel: its module source, and the generator's plan of how to launch it.

    Attributes:
        generated: the kernel as `write_kernel` made it (kind, argument names, numels, the
            split-reduction and persistent variants, its runtime checks).
    """

    generated: GeneratedKernel


class RandomFallbackRequired(NotImplementedError):
    """`fallback_random` is on but a kernel would draw random numbers in Triton (not bit-exact with eager)."""


class TritonBackend:
    """Generates one Triton kernel per fused group and compiles them for launch.

    Args:
        device_type: the device type it serves: "cuda" normally. `TritonBackend(device_type="cpu")` is
            a test-only switch: it runs every kernel in Triton's interpreter on CPU tensors, so machines
            without a GPU exercise the whole backend.
        config: a `TritonConfig` (default: `TritonConfig()`).

    Example:
        >>> import inductor_ir
        >>> compiled = inductor_ir.compile_graph(gm, inputs, backends={"cuda": TritonBackend()})  # doctest: +SKIP
    """

    @classmethod
    def parse_options(cls, options: Mapping[str, Any]) -> TritonConfig:
        """The `TritonConfig` of ``options`` (its fields and inductor_ir's common backend options; see
        `TritonConfig.parse_options`); build the backend with ``TritonBackend(config=...)``."""
        return TritonConfig.parse_options(options)

    def hash(self) -> str:
        """This backend's identity for cache keys: its class, device type and the config fields that
        change its kernels."""
        return f"codegen_triton.TritonBackend:{self.device_type}:{self.config.hash()}"

    def __init__(self, device_type: str = "cuda", config: TritonConfig | None = None) -> None:
        """See the class docstring."""
        self.device_type = device_type
        self.config = config if config is not None else TritonConfig()
        if device_type == "cpu":
            if self.config.interpret is False:
                raise ValueError(
                    "TritonBackend(device_type='cpu') only runs kernels in Triton's interpreter (a test-only "
                    "switch); drop interpret=False, or use codegen_cpp.CppBackend for CPU kernels"
                )
            self.config = self.config.replace(interpret=True)
            if not interpreter_ready():
                raise RuntimeError(
                    "TritonBackend(device_type='cpu') runs kernels in Triton's interpreter, which needs "
                    "TRITON_INTERPRET=1 in the environment before triton is first imported (triton's own "
                    "library functions are decorated at import); run e.g. `TRITON_INTERPRET=1 pytest ...`"
                )
        # Kernels already compiled by this backend, by `_dedupe_key`: identical kernels (the same
        # layer repeated, forward and backward) share one compiled kernel and its tuning.
        self._calls: dict[tuple[object, ...], TritonKernelCall] = {}
        self.compile_pool: CompilePool | None = None
        self._pool_checked = False

    @property
    def eager_ops(self) -> frozenset[Any]:
        """ATen ops that inductor_ir runs as ATen calls for this backend instead of lowering them.

        Under `fallback_random`: every random op, so random numbers come from torch's generator in
        eager's order and match eager bit for bit (as `CppBackend` does).
        """
        return RANDOM_OPS if self.config.fallback_random else frozenset()

    def can_fuse_vertical(self, producer: KernelGroup, consumer: KernelGroup) -> bool:
        """Every fusion the IR allows is fine for Triton."""
        return True

    def can_fuse_horizontal(self, first: KernelGroup, second: KernelGroup) -> bool:
        """Every fusion the IR allows is fine for Triton."""
        return True

    def _generate(self, group: KernelGroup, *, force_int64: bool = False) -> GeneratedKernel:
        group = contiguous_dim_last(group)
        plan = choose_plan(
            group,
            persistent_limit=self.config.persistent_reduction_limit,
            tile_2d=self.config.tile_2d,
            force_int64=force_int64,
        )
        if self.config.split_reductions:
            plan = plan_split(group, plan)
        return write_kernel(
            group,
            plan,
            interpret=self.config.interpreting(),
            dynamic_persistent_limit=self.config.persistent_reduction_limit,
            runtime_checks=self.config.runtime_checks,
        )

    def generate(self, group: KernelGroup) -> TritonKernelSource:
        """The Triton source of one kernel computing `group` (written to the debug folder if set)."""
        try:
            kernel = self._generate(group)
        except Exception as error:
            origins = sorted({origin for node in group.nodes for origin in node.origins})
            error.add_note(
                f"while generating the Triton kernel for group {group.name} (from {', '.join(origins) or 'unknown ops'}, "
                f"pointwise size {group.pointwise_size}, reduction size {group.reduction_size})"
            )
            raise
        if kernel.uses_random and self.config.fallback_random:
            raise RandomFallbackRequired(
                f"kernel {kernel.name} draws random numbers in Triton (Philox keyed by the graph's seed, counter = "
                "element index), which cannot match eager PyTorch bit for bit; with fallback_random=True the "
                "random ops must run eagerly: lower them as fallback kernels in inductor_ir, or set "
                "fallback_random=False to accept random numbers that match eager in distribution only"
            )
        if self.config.debug_dir is not None:
            path = self.config.debug_dir / "kernels" / f"{kernel.name}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(kernel.source)
        return TritonKernelSource(kernel.name, kernel.source, group, kernel)

    def compile(self, sources: Sequence[KernelSource]) -> Sequence[Callable[..., None]]:
        """Callables running each kernel as `(*input_tensors, *output_tensors, *size_ints)`.

        Kernels that differ only in their names share one callable. On CUDA, every launch configuration
        the kernels will try is handed to the process's compile pool, which compiles them in worker
        processes while the caller goes on (see `runtime/compile_pool.py`); a first launch waits for
        its own variants only.
        """
        self._ensure_pool()
        calls: list[TritonKernelCall] = []
        fresh: list[TritonKernelCall] = []
        for source in sources:
            key = _dedupe_key(source)
            call = self._calls.get(key)
            if call is None:
                call = self._calls[key] = TritonKernelCall(self, source)
                fresh.append(call)
            calls.append(call)
        if self.compile_pool is not None:
            self.compile_pool.submit([job for call in fresh for job in call.precompile_jobs()])
        return calls

    def _ensure_pool(self) -> None:
        """Find the process's compile pool on the first compile (CUDA with workers only)."""
        if self._pool_checked:
            return
        self._pool_checked = True
        if self.config.interpreting() or self.config.compile_workers < 2:
            return
        try:
            from triton.runtime.driver import driver

            target = driver.active.get_current_target()
        except Exception:  # no GPU driver: kernels compile at launch (and report the real problem)
            return
        self.compile_pool = shared_compile_pool(self.config.compile_workers, target)


def _dedupe_key(source: KernelSource) -> tuple[object, ...]:
    """What makes two kernels interchangeable: the source up to the group's name, argument dtypes, and
    which outputs are written in place over an input (one argument for both)."""
    group = source.group
    dtypes = tuple(str(r.dtype) for r in (*group.inputs, *group.outputs))
    over = {b.output for b in group.in_place}
    in_place = tuple(k for k, r in enumerate(group.outputs) if r.name in over)
    return (source.source.replace(group.name, "@"), dtypes, in_place, group.device, len(group.size_symbols))


class TritonKernelCall:
    """One compiled kernel, called by the wrapper with `(*inputs, *outputs, *size_ints)`.

    It evaluates the numels from the size ints, and launches. If a tensor turns out to have more than
    2**31 - 1 elements while the kernel indexes in int32 (symbolic sizes), an int64 variant is generated.
    """

    def __init__(self, backend: TritonBackend, source: KernelSource) -> None:
        """Args: backend: the generating backend (config, regeneration); source: from `generate`."""
        self.backend = backend
        self.group = source.group
        self.generated = source.generated if isinstance(source, TritonKernelSource) else backend._generate(source.group)
        generated = self.generated
        # Static sizes were checked when generating; symbolic ones are checked on each new size.
        self._may_overflow_int32 = (
            bool(source.group.size_symbols) and ".to(tl.int64) * XBLOCK" not in generated.source
        )
        self.launcher = self._launcher(generated)
        self.finisher = self._launcher(generated.finish) if generated.finish is not None else None
        variant = generated.persistent
        self.persistent = self._launcher(variant) if variant is not None else None
        self._rnumel_position = list(generated.numels).index("rnumel") if "rnumel" in generated.numels else -1
        self._numel_cache: dict[tuple[Any, ...], tuple[int, ...]] = {}
        self._buffer_count = len(self.group.inputs) + len(self.group.outputs)
        device = self.group.device
        self._cuda_index = int(device.split(":")[1]) if device.startswith("cuda:") else None
        # After the first call of a kernel with static sizes on a one-GPU machine: everything a launch
        # needs, so that each later call is one alignment check and one call of Triton's launcher.
        self._direct: tuple[Any, ...] | None = None
        self._direct_checked = False
        # Split reductions: the workspaces of their partial results, per device, kept between calls
        # (each call's first kernel overwrites them before its second reads them, on one stream).
        self._workspaces: dict[Any, list[Any]] = {}

    def _launcher(self, generated: GeneratedKernel) -> TritonLauncher:
        config = self.backend.config
        spec = KernelSpec(
            generated.name,
            generated.source,
            generated.kind,
            generated.arg_names,
            (),
            config.max_rblock,
            generated.split,
            generated.hint,
            tuple(generated.checks.items()),
        )
        return TritonLauncher(
            spec,
            config.resolved_cache_dir(),
            autotune=config.autotune,
            max_configs=config.max_configs,
            reps=config.autotune_reps,
            interpret=config.interpreting(),
            compile_pool=self.backend.compile_pool,
        )

    def precompile_jobs(self) -> list[PrecompileJob]:
        """The variants its first launch will compile (static sizes only: symbolic ones are unknown yet)."""
        if self.group.size_symbols:
            return []
        dtypes = [r.dtype for r in (*self.group.inputs, *self.group.outputs)]
        numels = self._numels(())
        if self.finisher is None:
            return self.launcher.precompile_jobs([*dtypes, *numels])
        spaces = list(self.generated.workspaces)
        jobs = self.launcher.precompile_jobs([*dtypes, *spaces, *numels])
        return jobs + self.finisher.precompile_jobs([*spaces, *dtypes, numels[0], self.generated.split])

    def _numels(self, sizes: tuple[int, ...]) -> tuple[int, ...]:
        bindings = dict(zip(self.group.size_symbols, sizes))
        return tuple(int(sympy.sympify(v).subs(bindings)) for v in self.generated.numels.values())

    def __call__(self, *args: Any) -> None:
        """Launch on `(*input_tensors, *output_tensors, *size_ints)`."""
        direct = self._direct
        if direct is not None:
            launch, grid_x, grid_y, grid_z, get_stream, device, function, middle, aligned, tail, finish = direct
            for position in aligned:
                if args[position].data_ptr() & 15:
                    break
            else:
                if finish is None:
                    launch(grid_x, grid_y, grid_z, get_stream(device), function, *middle, *args, *tail)
                    return
                # A split reduction: partial results into the workspaces, then the finishing kernel.
                stream = get_stream(device)
                spaces, launch2, grid2, function2, middle2, tail2 = finish
                launch(grid_x, grid_y, grid_z, stream, function, *middle, *args, *spaces, *tail)
                launch2(grid2[0], grid2[1], grid2[2], stream, function2, *middle2, *spaces, *args, *tail2)
                return
        self._call(args)
        if not self._direct_checked:
            self._direct_checked = True
            self._direct = self._direct_launch(args)

    def _direct_launch(self, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """The `_direct` record, when this kernel can be launched that way."""
        import torch

        if self._cuda_index is None or self.group.size_symbols:
            return None
        if self.persistent is not None or torch.cuda.device_count() != 1:
            return None
        numels = self._numel_cache.get(())
        if numels is None:
            return None
        count = self._buffer_count
        if self.finisher is None:
            prepared = self.launcher.prepared_for((*args, *numels))
            spaces: tuple[Any, ...] = ()
        else:
            spaces = tuple(self._split_workspaces(args, numels))
            prepared = self.launcher.prepared_for((*args[:count], *spaces, *numels))
        if prepared is None or prepared.fast is None or prepared.grid[0] == 0:
            return None
        fast = prepared.fast
        grid = prepared.grid
        finish = None
        # Alignment is checked on the wrapper's arguments only (workspaces are fresh allocations).
        aligned = tuple(p for p in fast.aligned if p < count)
        if self.finisher is not None:
            tail2 = (numels[0], self.generated.split)
            second = self.finisher.prepared_for((*spaces, *args[:count], *tail2))
            if second is None or second.fast is None or second.grid[0] == 0:
                return None
            fast2 = second.fast
            if any(p >= len(spaces) and p - len(spaces) not in fast.aligned for p in fast2.aligned):
                return None  # the two kernels assume different alignments of one argument
            finish = (spaces, fast2.call, second.grid, fast2.function, fast2.middle, (*tail2, *fast2.blocks))
        return (
            fast.call, grid[0], grid[1], grid[2], fast.get_stream, prepared.device, fast.function,
            fast.middle, aligned, (*numels, *fast.blocks), finish,
        )

    def _split_workspaces(self, args: tuple[Any, ...], numels: tuple[int, ...]) -> list[Any]:
        """The workspaces of a split reduction on the device of `args` (made on first use)."""
        import torch

        count = self._buffer_count
        device = next(a.device for a in args[:count] if isinstance(a, torch.Tensor))
        spaces = self._workspaces.get(device)
        if spaces is None:
            size = numels[0] * self.generated.split
            spaces = [torch.empty(size, dtype=dtype, device=device) for dtype in self.generated.workspaces]
            self._workspaces[device] = spaces
        return spaces

    def _call(self, args: tuple[Any, ...]) -> None:
        count = self._buffer_count
        sizes = args[count:]
        numels = self._numel_cache.get(sizes)  # type: ignore[arg-type]
        if numels is None:
            numels = self._numels(tuple(int(s) for s in sizes))
            self._numel_cache[sizes] = numels  # type: ignore[index]
            if self._may_overflow_int32 and any(t.numel() > _INT32_MAX for t in args[:count]):
                self.generated = self.backend._generate(self.group, force_int64=True)
                self.launcher = self._launcher(self.generated)
                finish, variant = self.generated.finish, self.generated.persistent
                self.finisher = self._launcher(finish) if finish is not None else None
                self.persistent = self._launcher(variant) if variant is not None else None
                self._may_overflow_int32 = False
        if self._cuda_index is not None:
            import torch

            if torch.cuda.current_device() != self._cuda_index:
                # Triton launches on the current device: make it the buffers' device.
                with torch.cuda.device(self._cuda_index):
                    self._launch(args, numels)
                return
        self._launch(args, numels)

    def _launch(self, args: tuple[Any, ...], numels: tuple[int, ...]) -> None:
        if self.finisher is not None:
            self._run_split(args, numels)
            return
        if self.persistent is not None and numels[self._rnumel_position] <= self.generated.persistent_limit:
            # A symbolic reduction that is short at this call: one block holds it, no loop.
            self.persistent.run(*args, *numels)
            return
        self.launcher.run(*args, *numels)

    def _run_split(self, args: tuple[Any, ...], numels: tuple[int, ...]) -> None:
        """Both kernels of a split reduction, with workspaces for the partial results."""
        import torch

        generated = self.generated
        assert generated.finish is not None and self.finisher is not None
        count = self._buffer_count
        if self.group.size_symbols:
            size = numels[0] * generated.split
            device = next(a.device for a in args[:count] if isinstance(a, torch.Tensor))
            spaces = [torch.empty(size, dtype=dtype, device=device) for dtype in generated.workspaces]
        else:
            spaces = self._split_workspaces(args, numels)
        sizes = args[count:]
        self.launcher.run(*args[:count], *spaces, *sizes, *numels)
        self.finisher.run(*spaces, *args[:count], *sizes, numels[0], generated.split)
