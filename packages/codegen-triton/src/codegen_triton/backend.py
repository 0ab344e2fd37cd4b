"""`TritonBackend`: inductor_ir's `KernelBackend` for CUDA devices, generating and launching Triton kernels."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sympy

from codegen_triton.codegen.analysis import choose_plan, contiguous_dim_last
from codegen_triton.codegen.split import plan_split
from codegen_triton.codegen.template import GeneratedKernel, write_kernel
from codegen_triton.config import TritonConfig, interpreter_ready
from codegen_triton.runtime.cache import source_hash
from codegen_triton.runtime.compile_pool import CompilePool, PrecompileJob, shared_compile_pool
from codegen_triton.runtime.launcher import KernelSpec, TritonLauncher
from codegen_triton.saved import (
    KernelSignature,
    SavedKernel,
    SavedTritonKernels,
    TunedLaunch,
    may_overflow_int32,
)
from inductor_ir import KernelArtifact
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

    Compiled graphs can be saved and loaded again (`inductor_ir.ReloadableKernelBackend`: see
    `export_kernels` and `load_kernels`).

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
            group = source.group
            generated = source.generated if isinstance(source, TritonKernelSource) else self._generate(group)
            key = _call_key(source.source, KernelSignature.of(group), generated)
            call = self._calls.get(key)
            if call is None:
                int64 = functools.partial(self._generate, group, force_int64=True)
                call = self._calls[key] = TritonKernelCall(self, KernelSignature.of(group), generated, int64=int64)
                fresh.append(call)
            calls.append(call)
        self._precompile(fresh)
        return calls

    def export_kernels(self, sources: Sequence[KernelSource]) -> KernelArtifact:
        """A record of the kernels of ``sources`` (compiled by this backend before): a `SavedTritonKernels`.

        Per kernel: its signature, its generated module (with its split and persistent variants), its
        int64-indexing variant when it may need one (generated now: a loaded kernel has no group to
        generate it from), and the launch configurations autotuning chose for it so far. Loading
        compiles the modules again; Triton's own compile cache makes that cheap for a source it has
        compiled before.

        Raises:
            LookupError: a kernel that this backend did not compile in this process.
        """
        kernels = []
        for source in sources:
            signature = KernelSignature.of(source.group)
            generated = source.generated if isinstance(source, TritonKernelSource) else self._generate(source.group)
            call = self._calls.get(_call_key(source.source, signature, generated))
            if call is None:
                raise LookupError(f"kernel {source.name} was not compiled by this backend in this process")
            int64 = self._generate(source.group, force_int64=True) if may_overflow_int32(signature, generated) else None
            kernels.append(SavedKernel(signature, generated, int64, call.tuning()))
        payload = SavedTritonKernels(self.device_type, self.config.interpreting(), tuple(kernels))
        return KernelArtifact(self.device_type, tuple(s.name for s in sources), payload)

    def load_kernels(self, artifact: KernelArtifact) -> Sequence[Callable[..., None]]:
        """The kernels of ``artifact`` (from `export_kernels`), one per name, called like `compile`'s.

        Nothing is generated: each kernel's module is compiled again (by Triton's compile cache when
        it has seen the source), and autotuning starts from the saved winners on a GPU of the same name
        (else from the tuning records in the cache folder, else by timing candidates).

        Raises:
            TypeError: the payload is not a Triton kernel record (another backend's artifact).
            ValueError: it was saved for another device type, or for (or not for) Triton's interpreter.
        """
        saved = artifact.payload
        if not isinstance(saved, SavedTritonKernels):
            raise TypeError(
                f"not a Triton kernel record: {type(saved).__name__} (an artifact of another kernel backend "
                f"for {artifact.device_type!r}?)"
            )
        if artifact.device_type != self.device_type or saved.device_type != self.device_type:
            raise ValueError(
                f"these Triton kernels were saved for {saved.device_type!r} devices; this backend runs "
                f"{self.device_type!r} kernels: load them with TritonBackend(device_type={saved.device_type!r})"
            )
        if saved.interpret != self.config.interpreting():
            where = "for" if saved.interpret else "not for"
            raise ValueError(f"these Triton kernels were written {where} Triton's interpreter, unlike this backend's")
        if len(saved.kernels) != len(artifact.names):
            raise ValueError(f"the record holds {len(saved.kernels)} kernels for {len(artifact.names)} names")
        self._ensure_pool()
        calls: list[TritonKernelCall] = []
        fresh: list[TritonKernelCall] = []
        for kernel in saved.kernels:
            if kernel.int64 is None and may_overflow_int32(kernel.signature, kernel.generated):
                raise ValueError(f"the saved kernel {kernel.generated.name} lacks its int64-indexing variant")
            key = _call_key(kernel.generated.source, kernel.signature, kernel.generated)
            call = self._calls.get(key)
            if call is None:
                int64 = _ready(kernel.int64) if kernel.int64 is not None else None
                call = TritonKernelCall(self, kernel.signature, kernel.generated, int64=int64, tuning=kernel.tuning)
                self._calls[key] = call
                fresh.append(call)
            calls.append(call)
        self._precompile(fresh)
        return calls

    def _precompile(self, calls: Sequence[TritonKernelCall]) -> None:
        """Hand the launch variants of newly made calls to the compile pool (CUDA with workers only)."""
        if self.compile_pool is not None:
            self.compile_pool.submit([job for call in calls for job in call.precompile_jobs()])

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


def _dedupe_key(source: TritonKernelSource) -> tuple[object, ...]:
    """What makes two generated kernels interchangeable (see `_call_key`)."""
    return _call_key(source.source, KernelSignature.of(source.group), source.generated)


def _call_key(source: str, signature: KernelSignature, generated: GeneratedKernel) -> tuple[object, ...]:
    """What makes two kernels interchangeable: the source up to the group's name, argument dtypes,
    which outputs are written in place over an input (one argument for both), and the numels the
    launch computes from the size ints. Two kernels of one source text take their numels as
    arguments when sizes are symbolic: the text is the same for a `(3, s0)` and a `(1, s0)` copy,
    and the second, launched with the first's numel (3 * s0), wrote past its buffer."""
    dtypes = tuple(str(d) for d in (*signature.input_dtypes, *signature.output_dtypes))
    template = source.replace(signature.name, "@")
    positional = {symbol: sympy.Symbol(f"_size{k}") for k, symbol in enumerate(signature.size_symbols)}
    numels = tuple((name, str(sympy.sympify(value).xreplace(positional))) for name, value in sorted(generated.numels.items()))
    return (template, dtypes, signature.in_place, signature.device, len(signature.size_symbols), numels)


def _ready(kernel: GeneratedKernel) -> Callable[[], GeneratedKernel]:
    """A maker of a kernel generated before."""
    return lambda: kernel


class TritonKernelCall:
    """One compiled kernel, called by the wrapper with `(*inputs, *outputs, *size_ints)`.

    It evaluates the numels from the size ints, and launches. If a tensor turns out to have more than
    2**31 - 1 elements while the kernel indexes in int32 (symbolic sizes), it switches to its int64 variant.
    """

    def __init__(
        self,
        backend: TritonBackend,
        signature: KernelSignature,
        generated: GeneratedKernel,
        *,
        int64: Callable[[], GeneratedKernel] | None = None,
        tuning: Sequence[TunedLaunch] = (),
    ) -> None:
        """Args: backend: the backend (config, compile pool); signature: how the wrapper calls it;
        generated: the kernel; int64: makes its int64-indexing variant (None: it is never switched to);
        tuning: launch configurations autotuned before (a saved kernel's)."""
        self.backend = backend
        self.signature = signature
        self._int64 = int64
        self._tuning = tuple(tuning)
        self._launchers: list[TritonLauncher] = []
        # Static sizes were checked when generating; symbolic ones are checked on each new size.
        self._may_overflow_int32 = int64 is not None and may_overflow_int32(signature, generated)
        self._use(generated)
        self._numel_cache: dict[tuple[Any, ...], tuple[int, ...]] = {}
        self._buffer_count = signature.buffer_count
        device = signature.device
        self._cuda_index = int(device.split(":")[1]) if device.startswith("cuda:") else None
        # After the first call of a kernel with static sizes on a one-GPU machine: everything a launch
        # needs, so that each later call is one alignment check and one call of Triton's launcher.
        self._direct: tuple[Any, ...] | None = None
        self._direct_checked = False
        # Split reductions: the workspaces of their partial results, per device, kept between calls
        # (each call's first kernel overwrites them before its second reads them, on one stream).
        self._workspaces: dict[Any, list[Any]] = {}

    def _use(self, generated: GeneratedKernel) -> None:
        """Launch `generated` (and its split-reduction and persistent variants) from now on."""
        self.generated = generated
        self.launcher = self._launcher(generated)
        self.finisher = self._launcher(generated.finish) if generated.finish is not None else None
        variant = generated.persistent
        self.persistent = self._launcher(variant) if variant is not None else None
        self._rnumel_position = list(generated.numels).index("rnumel") if "rnumel" in generated.numels else -1

    def _launcher(self, generated: GeneratedKernel) -> TritonLauncher:
        config = self.backend.config
        digest = source_hash(generated.source)
        mine = (generated.name, digest)
        tuned = {(t.device, t.bucket): t.config for t in self._tuning if (t.function, t.source) == mine}
        spec = KernelSpec(
            generated.name,
            generated.source,
            generated.kind,
            generated.arg_names,
            (),
            _max_rblock(config.max_rblock, generated.split_chunk),
            generated.split,
            generated.hint,
            tuple(generated.checks.items()),
        )
        launcher = TritonLauncher(
            spec,
            config.resolved_cache_dir(),
            autotune=config.autotune,
            max_configs=config.max_configs,
            reps=config.autotune_reps,
            interpret=config.interpreting(),
            compile_pool=self.backend.compile_pool,
            tuned=tuned,
        )
        self._launchers.append(launcher)
        return launcher

    def tuning(self) -> tuple[TunedLaunch, ...]:
        """The launch configurations autotuned for this kernel's functions so far (and those it was given)."""
        records = {(t.function, t.source, t.device, t.bucket): t for t in self._tuning}
        for launcher in self._launchers:
            spec = launcher.spec
            digest = source_hash(spec.source)
            for (device, bucket), config in launcher.tuned.items():
                records[(spec.name, digest, device, bucket)] = TunedLaunch(spec.name, digest, device, bucket, config)
        return tuple(records.values())

    def precompile_jobs(self) -> list[PrecompileJob]:
        """The variants its first launch will compile (static sizes only: symbolic ones are unknown yet)."""
        if self.signature.size_symbols:
            return []
        dtypes = [*self.signature.input_dtypes, *self.signature.output_dtypes]
        numels = self._numels(())
        if self.finisher is None:
            return self.launcher.precompile_jobs([*dtypes, *numels])
        spaces = list(self.generated.workspaces)
        jobs = self.launcher.precompile_jobs([*dtypes, *spaces, *numels])
        return jobs + self.finisher.precompile_jobs([*spaces, *dtypes, numels[0], self.generated.split])

    def _numels(self, sizes: tuple[int, ...]) -> tuple[int, ...]:
        bindings = dict(zip(self.signature.size_symbols, sizes))
        return tuple(int(sympy.sympify(v).subs(bindings)) for v in self.generated.numels.values())

    def __call__(self, *args: Any) -> None:
        """Launch on `(*input_tensors, *output_tensors, *size_ints)`."""
        direct = self._direct
        if direct is not None:
            launch, grid_x, grid_y, grid_z, get_stream, device, function, middle, aligned, tail, finish, current = direct
            # Only while the kernel's GPU is current (else the checked path makes it current first) and
            # with the arguments aligned as the kernel was compiled for (a loop: no generator per launch).
            if current() == device:
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

        if self._cuda_index is None or self.signature.size_symbols:
            return None
        if self.persistent is not None:
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
            fast.middle, aligned, (*numels, *fast.blocks), finish, _current_cuda_device(),
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
                assert self._int64 is not None
                self._use(self._int64())
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
        if self.signature.size_symbols:
            size = numels[0] * generated.split
            device = next(a.device for a in args[:count] if isinstance(a, torch.Tensor))
            spaces = [torch.empty(size, dtype=dtype, device=device) for dtype in generated.workspaces]
        else:
            spaces = self._split_workspaces(args, numels)
        sizes = args[count:]
        self.launcher.run(*args[:count], *spaces, *sizes, *numels)
        self.finisher.run(*spaces, *args[:count], *sizes, numels[0], generated.split)


def _current_cuda_device() -> Callable[[], int]:
    """The cheapest reader of the current CUDA device's index (checked before each direct launch: a
    kernel loaded for one GPU is launched only while that GPU is current)."""
    import torch

    reader = getattr(torch._C, "_cuda_getDevice", None)
    return reader if callable(reader) else torch.cuda.current_device


def _max_rblock(configured: int, split_chunk: int) -> int:
    """The largest RBLOCK to try: the configured one, and for a split reduction the largest power of
    two dividing its chunk (a block never straddles two chunks, which would count rows twice)."""
    return min(configured, split_chunk & -split_chunk) if split_chunk else configured
