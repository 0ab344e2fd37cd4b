"""A compiled kernel ready to launch: grid from the runtime sizes, a chosen launch configuration."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from codegen_triton.codegen.checks import CheckSite
from codegen_triton.runtime.autotune import (
    LaunchConfig,
    TuningCache,
    benchmark_configs,
    candidate_configs,
    next_power_of_2,
)
from codegen_triton.runtime.binaries import BinaryIndex, kernel_parameters
from codegen_triton.runtime.checks import check_failure, interpreter_asserts
from codegen_triton.runtime.compile_pool import CompilePool, PrecompileJob
from codegen_triton.runtime.fast_launch import (
    COMPILE_OPTIONS,
    FastKernel,
    Variant,
    compile_variant,
    make_variant,
)
from codegen_triton.runtime.loader import interpreter_env, load_kernel_module

__all__ = ["KernelSpec", "TritonLauncher"]

# Grid dimensions y and z are limited to 65535 programs on CUDA.
_MAX_GRID_Y = 65535


@dataclass(frozen=True)
class KernelSpec:
    """What the runtime must know about a generated kernel.

    Attributes:
        name: the `@triton.jit` function's name in `source`.
        source: the whole kernel module's text.
        kind: "pointwise", "tiled", "persistent" or "looped".
        arg_names: the kernel's runtime arguments, in order (pointers, size symbols, numels, seed).
        mutated_args: indices of pointer arguments the kernel both reads and writes (cloned when tuning).
        max_rblock: the largest RBLOCK tried for looped reductions.
        grid_y: when > 0, the grid's second dimension (the chunks of a split reduction).
        hint: a reduction's memory walk ("inner", "outer" or ""), which narrows the configurations tried.
        checks: the kernel's runtime checks by site (`codegen/checks.py`): its asserts are compiled in
            (debug mode) and a failure under the interpreter raises what eager raises.
    """

    name: str
    source: str
    kind: str
    arg_names: tuple[str, ...]
    mutated_args: tuple[int, ...] = ()
    max_rblock: int = 1024
    grid_y: int = 0
    hint: str = ""
    checks: tuple[tuple[int, CheckSite], ...] = ()


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass
class _Prepared:
    """What launching at one set of numels needs: the grid, the configuration and the direct kernel."""

    grid: tuple[int, int, int]
    config: LaunchConfig
    options: dict[str, int]
    fast: FastKernel | None
    device: int


class TritonLauncher:
    """Loads a generated kernel and launches it: `launcher.run(*args)` with the spec's arguments.

    On the first call for a size bucket (sizes rounded up to powers of two) the launch configuration is
    chosen: on CUDA, with autotuning on, by timing a few candidates (the winner is cached on disk, keyed by
    kernel source, device name and size bucket); otherwise the heuristic first candidate.

    Attributes:
        tuned: the autotuned winners by (device name, size bucket): those given to the constructor
            (a saved kernel's), then each one chosen on CUDA (from the disk cache or by timing).
    """

    def __init__(
        self,
        spec: KernelSpec,
        cache_dir: Path,
        *,
        autotune: bool = True,
        max_configs: int = 4,
        reps: int = 20,
        interpret: bool = False,
        compile_pool: CompilePool | None = None,
        tuned: Mapping[tuple[str, tuple[int, int, int]], LaunchConfig] | None = None,
    ) -> None:
        """Args: spec: the kernel; cache_dir: Kiln's cache root; autotune, max_configs, reps: tuning knobs;
        interpret: load the kernel for Triton's interpreter; compile_pool: where `precompile_jobs` were
        submitted (a launch waits for its variant's job there instead of compiling it again); tuned:
        winners chosen before (by device name and size bucket), used instead of tuning again."""
        self.spec = spec
        self.cache_dir = cache_dir
        self.autotune = autotune
        self.max_configs = max_configs
        self.reps = reps
        self.interpret = interpret
        self.compile_pool = compile_pool
        # The module is executed (and `@triton.jit` reads its source back) only when something needs the
        # function itself: a variant loaded from the binary index never does.
        self.parameters = kernel_parameters(spec.source, spec.name)
        self._chosen: dict[tuple[int, ...], LaunchConfig] = {}
        self.tuned: dict[tuple[str, tuple[int, int, int]], LaunchConfig] = dict(tuned or {})
        self._positions = {name: i for i, name in enumerate(spec.arg_names)}
        self._numel_positions = tuple(self._positions.get(n, -1) for n in ("xnumel", "rnumel", "ynumel"))
        self._numels = _numels_reader(self._numel_positions)
        self._prepared: dict[tuple[int, ...], _Prepared] = {}
        # Direct launches (see fast_launch.py) on CUDA; Triton's own path under the interpreter, or
        # for a variant the direct path cannot compile.
        self._direct = not interpret
        self._compiled: dict[Variant, FastKernel | None] = {}
        self._target: Any = None
        # Kernels with asserts compile in debug mode, without Triton's int32 overflow asserts; on a GPU
        # every kernel keeps float32 subnormals in libdevice's functions, as eager's CUDA kernels do.
        self._debug_options: dict[str, bool] = {"debug": True, "sanitize_overflow": False} if spec.checks else {}
        if not interpret:
            self._debug_options.update(COMPILE_OPTIONS)

    @functools.cached_property
    def module(self) -> ModuleType:
        """The kernel's module, executed on first use."""
        return load_kernel_module(self.spec.source, self.spec.name, self.cache_dir, interpret=self.interpret)

    @property
    def fn(self) -> Any:
        """The `@triton.jit` function."""
        return getattr(self.module, self.spec.name)

    def block_values(self, config: LaunchConfig) -> tuple[int, ...]:
        """The config's block sizes in the order of the kernel's constexpr parameters."""
        return tuple(config.blocks[name] for name in self.parameters[len(self.spec.arg_names) :])

    def precompile_jobs(self, example_args: Sequence[Any]) -> list[PrecompileJob]:
        """The variants a call with these arguments (dtypes stand for aligned tensors) will compile."""
        if not self._direct:
            return []
        key = self._numels(example_args)
        configs = self.configs_for(*key)
        if not self.autotune:
            configs = configs[:1]
        elif len(configs) > 1:
            winner = self._known_winner(key)
            if winner is not None:  # tuned before (a saved graph, the cache folder): only it runs
                configs = [winner]
        jobs = []
        for config in configs:
            variant = make_variant(example_args, self.block_values(config), config.num_warps, config.num_stages)
            if variant is not None and not self._compiled_before(variant):
                jobs.append(self._job(variant))
        return jobs

    def _binaries(self) -> BinaryIndex | None:
        """The index of this kernel's compiled variants on the current kind of GPU (None without one)."""
        try:
            import torch

            device_name = _device_name(torch.cuda.current_device())
        except Exception:
            return None
        return BinaryIndex(self.cache_dir, self.spec.source, self.spec.name, device_name)

    def _compiled_before(self, variant: Variant) -> bool:
        """Whether a launch compiled this variant before (a warm start): Triton's disk cache then holds
        it and the launch loads it in a few milliseconds, faster than a round trip through a worker."""
        binaries = self._binaries()
        return binaries is not None and binaries.contains(variant)

    def _known_winner(self, numels: tuple[int, ...]) -> LaunchConfig | None:
        """The configuration tuning chose before for these sizes on this GPU, if any (as `_choose` finds it)."""
        try:
            import torch

            device_name = _device_name(torch.cuda.current_device())
        except Exception:
            return None
        bucket = tuple(next_power_of_2(n) for n in numels)
        chosen = self.tuned.get((device_name, bucket))  # type: ignore[arg-type]
        if chosen is None:
            chosen = TuningCache(self.cache_dir).get(self.spec.source, device_name, ",".join(map(str, bucket)))
        return chosen

    def _job(self, variant: Variant) -> PrecompileJob:
        return PrecompileJob(str(self.module.__file__), self.module.__name__, self.spec.name, variant)

    def _fast_kernel(self, args: Sequence[Any], config: LaunchConfig) -> FastKernel | None:
        """The directly launchable kernel for these arguments and configuration (compiled once).

        None under the interpreter, for arguments the direct path does not handle, or when compiling or
        loading this variant failed: Triton's own path then runs it (and reports any real problem).
        """
        if not self._direct:
            return None
        variant = make_variant(args, self.block_values(config), config.num_warps, config.num_stages)
        if variant is None:
            return None
        if variant not in self._compiled:
            binaries = self._binaries()
            fast = self._load_binary(binaries, variant) if binaries is not None else None
            if fast is None:
                fast = self._compile(variant)
                if fast is not None and binaries is not None:
                    binaries.record(variant, fast.compiled)
            self._compiled[variant] = fast
        return self._compiled[variant]

    def _load_binary(self, binaries: BinaryIndex, variant: Variant) -> FastKernel | None:
        """The variant compiled by an earlier launch, loaded from the binary index (None if it is not there)."""
        compiled = binaries.load(variant, self.parameters)
        if compiled is None:
            return None
        try:
            return FastKernel(compiled, variant)
        except Exception:
            return None  # a binary that does not load here is compiled again

    def _compile(self, variant: Variant) -> FastKernel | None:
        """The variant compiled by Triton (or found in its disk cache by Triton's own key)."""
        if self.compile_pool is not None and not self.compile_pool.claim(job := self._job(variant)):
            self.compile_pool.wait(job)
        try:
            if self._target is None:
                from triton.runtime.driver import driver

                self._target = driver.active.get_current_target()
            return FastKernel(compile_variant(self.fn, variant, self._target), variant)
        except Exception:
            return None

    def configs_for(self, xnumel: int, rnumel: int, ynumel: int) -> list[LaunchConfig]:
        """The candidate configurations of this kernel at these sizes."""
        return candidate_configs(
            self.spec.kind,
            xnumel,
            rnumel,
            ynumel,
            max_rblock=self.spec.max_rblock,
            limit=self.max_configs,
            hint=self.spec.hint,
        )

    def grid(self, config: LaunchConfig, xnumel: int, ynumel: int) -> tuple[int, ...]:
        """The launch grid: programs along x (and y for tiled kernels)."""
        x_programs = _cdiv(xnumel, config.blocks["XBLOCK"])
        if self.spec.kind == "tiled":
            y_programs = _cdiv(ynumel, config.blocks["YBLOCK"])
            if y_programs > _MAX_GRID_Y:
                raise RuntimeError(f"{self.spec.name}: grid y dimension {y_programs} exceeds {_MAX_GRID_Y}")
            return (x_programs, y_programs)
        # No programs where there is no output element (an empty tensor): the launch is skipped.
        if self.spec.grid_y:
            return (x_programs, self.spec.grid_y)
        return (x_programs,)

    def _launch(self, args: Sequence[Any], config: LaunchConfig, xnumel: int, ynumel: int) -> None:
        grid = self.grid(config, xnumel, ynumel)
        if grid[0] == 0:
            return
        fast = self._fast_kernel(args, config)
        if fast is not None:
            import torch

            fast.launch((*grid, 1, 1)[:3], torch.cuda.current_device(), args)  # type: ignore[arg-type]
            return
        if self.interpret:
            self._interpret(grid, args, config.blocks)
            return
        self.fn[grid](
            *args, **config.blocks, num_warps=config.num_warps, num_stages=config.num_stages, **self._debug_options
        )

    def _interpret(self, grid: tuple[int, ...], args: Sequence[Any], blocks: dict[str, int]) -> None:
        """Run under Triton's interpreter; a failed runtime check raises what eager raises."""
        with interpreter_env(True), interpreter_asserts(bool(self.spec.checks)):
            try:
                self.fn[grid](*args, **blocks)
            except Exception as error:
                failure = check_failure(error, dict(self.spec.checks), self.spec.name) if self.spec.checks else None
                if failure is None:
                    raise
                raise failure from None

    def _choose(self, args: Sequence[Any], xnumel: int, rnumel: int, ynumel: int) -> LaunchConfig:
        bucket = (next_power_of_2(xnumel), next_power_of_2(rnumel), next_power_of_2(ynumel))
        chosen = self._chosen.get(bucket)
        if chosen is not None:
            return chosen
        configs = self.configs_for(xnumel, rnumel, ynumel)
        device = _device_of(args)
        if not self.autotune or len(configs) == 1 or device is None:
            chosen = configs[0]
        else:
            device_name = _device_name(device)
            chosen = self.tuned.get((device_name, bucket))
            if chosen is None:
                cache = TuningCache(self.cache_dir)
                key = ",".join(map(str, bucket))
                chosen = cache.get(self.spec.source, device_name, key)
                if chosen is None:
                    bench_args = _clone_aliased(args, self.spec.mutated_args)
                    chosen, _ = benchmark_configs(
                        configs, lambda c: self._launch(bench_args, c, xnumel, ynumel), reps=self.reps
                    )
                    cache.put(self.spec.source, device_name, key, chosen)
                self.tuned[(device_name, bucket)] = chosen
        self._chosen[bucket] = chosen
        return chosen

    def _prepare(self, args: Sequence[Any], key: tuple[int, ...]) -> _Prepared:
        xnumel, rnumel, ynumel = key
        config = self._choose(args, xnumel, rnumel, ynumel)
        options = {**config.blocks, "num_warps": config.num_warps, "num_stages": config.num_stages, **self._debug_options}
        grid = (*self.grid(config, xnumel, ynumel), 1, 1)[:3]
        fast = None
        device = -1
        if self._direct and grid[0] > 0:
            import torch

            device = torch.cuda.current_device()
            fast = self._fast_kernel(args, config)
        prepared = _Prepared(grid, config, options, fast, device)  # type: ignore[arg-type]
        self._prepared[key] = prepared
        return prepared

    def prepared_for(self, args: Sequence[Any]) -> _Prepared | None:
        """How calls with these arguments are launched, once one was (None before)."""
        return self._prepared.get(self._numels(args))

    def run(self, *args: Any) -> None:
        """Launch the kernel on `args` (in `spec.arg_names` order)."""
        key = self._numels(args)
        prepared = self._prepared.get(key)
        if prepared is None:
            prepared = self._prepare(args, key)
        grid = prepared.grid
        if grid[0] == 0:
            return
        fast = prepared.fast
        if fast is not None:
            for position in fast.aligned:
                if args[position].data_ptr() & 15:
                    break
            else:
                fast.call(
                    grid[0], grid[1], grid[2], fast.get_stream(prepared.device), fast.function, *fast.middle,
                    *args, *fast.blocks,
                )
                return
        if self.interpret:
            self._interpret(grid, args, prepared.config.blocks)
            return
        self.fn.run(*args, grid=grid, warmup=False, **prepared.options)

    __call__ = run


def _numels_reader(positions: tuple[int, ...]) -> Callable[[Sequence[Any]], tuple[int, ...]]:
    """``args -> (xnumel, rnumel, ynumel)`` read from these argument positions (1 where a kernel has none):
    one generated expression, run on every launch."""
    parts = ", ".join(f"int(args[{p}])" if p >= 0 else "1" for p in positions)
    reader: Callable[[Sequence[Any]], tuple[int, ...]] = eval(f"lambda args: ({parts},)")  # positions are ints
    return reader


def _device_of(args: Sequence[Any]) -> Any | None:
    """The CUDA device of the first CUDA tensor argument (None on CPU: no tuning there)."""
    import torch

    for arg in args:
        if isinstance(arg, torch.Tensor) and arg.is_cuda:
            return arg.device
    return None


def _device_name(device: Any) -> str:
    import torch

    return str(torch.cuda.get_device_name(device))


def _clone_aliased(args: Sequence[Any], mutated: Sequence[int]) -> list[Any]:
    """Arguments for benchmarking: every tensor is cloned, so running the kernel many times cannot
    change the real results. (Cloning only declared or storage-sharing arguments was not enough: a
    kernel reused in place through one pointer, such as BatchNorm's running-stat update, both reads
    and writes a single argument, and was applied once per benchmark repetition.) `mutated` is kept
    for callers that declare mutations; every tensor is cloned whatever it says."""
    import torch

    del mutated
    return [arg.clone() if isinstance(arg, torch.Tensor) else arg for arg in args]
