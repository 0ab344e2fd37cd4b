"""The typed configuration of the Triton backend, and the one place that reads the environment."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inductor_ir.options import options_hash, parse_dataclass_options

__all__ = ["WIDE_AUTOTUNE_CONFIGS", "TritonConfig", "default_cache_dir", "interpreter_enabled", "interpreter_ready"]

WIDE_AUTOTUNE_CONFIGS = 16
"""How many launch configurations a kernel may try under ``max_autotune`` (mode="max-autotune")."""


def interpreter_enabled() -> bool:
    """True when `TRITON_INTERPRET=1`: Triton runs kernels in its NumPy interpreter (CPU tensors)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def interpreter_ready() -> bool:
    """Whether triton was imported in interpreter mode (its library functions then run on CPU tensors)."""
    import triton.language as tl

    return type(tl.standard.sum).__name__ == "InterpretedFunction"


def default_cache_dir() -> Path:
    """The cache folder: `KILN_CACHE_DIR` when set, else `$XDG_CACHE_HOME/kiln` (or `~/.cache/kiln`)."""
    explicit = os.environ.get("KILN_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kiln"


def _env_debug_dir() -> Path | None:
    if os.environ.get("KILN_DEBUG", "0") in ("", "0"):
        return None
    return Path(os.environ.get("KILN_DEBUG_DIR", "kiln_debug"))


@dataclass(frozen=True)
class TritonConfig:
    """Settings of `TritonBackend`; every field changes the generated code or how it is launched.

    Attributes:
        cache_dir: where kernel sources and autotuning choices are written (None: `default_cache_dir()`).
        autotune: benchmark a few launch configurations on first call (CUDA only) and keep the fastest.
        max_configs: at most this many configurations are tried per kernel.
        autotune_reps: timed repetitions per configuration.
        fallback_random: random ops call eager's generator (bit-exact with eager) instead of `tl.rand`.
        persistent_reduction_limit: reductions up to this size are done in one block, without a loop.
        max_rblock: the reduction block of looped reductions.
        tile_2d: allow 2-D tiled pointwise kernels when an input is transposed.
        split_reductions: cut long reductions with few outputs into two kernels (more parallelism).
        debug_dir: when set, every kernel's source is also written there (`KILN_DEBUG=1` sets it).
        interpret: run under Triton's interpreter (None: read `TRITON_INTERPRET`).
        compile_workers: processes that compile kernels in the background from when their graph is
            compiled until their first launch (CUDA only; one pool per process, see
            `runtime/compile_pool.py`; 1 or less: each kernel is compiled when first launched).
        runtime_checks: kernels assert that indirect indices (`x[i]`, gather, embedding, scatter, ...)
            lie in range and integer divisors are not zero (`tl.device_assert`, compiled in debug mode);
            under the interpreter a failure raises what eager raises (IndexError, RuntimeError). False:
            no asserts (an invalid index then reads or writes arbitrary memory).
    """

    cache_dir: Path | None = None
    autotune: bool = True
    max_configs: int = 4
    autotune_reps: int = 20
    fallback_random: bool = False
    persistent_reduction_limit: int = 1024
    max_rblock: int = 1024
    tile_2d: bool = True
    split_reductions: bool = True
    debug_dir: Path | None = dataclasses.field(default_factory=_env_debug_dir)
    interpret: bool | None = None
    compile_workers: int = dataclasses.field(default_factory=lambda: min(16, os.cpu_count() or 1))
    runtime_checks: bool = True

    @classmethod
    def parse_options(cls, options: Mapping[str, Any]) -> TritonConfig:
        """A config from a dictionary of its fields and inductor_ir's common backend options.

        ``max_autotune`` tries up to `WIDE_AUTOTUNE_CONFIGS` launch configurations per kernel unless
        ``max_configs`` is given; ``cache_root`` (Kiln's cache folder) is the cache folder unless
        ``cache_dir`` is given. Nothing comes from the environment (no ``KILN_DEBUG`` debug folder:
        ``debug_dir`` only when given). An unknown key raises ``inductor_ir.OptionError`` listing the
        valid ones.
        """
        own = dict(options)
        if own.pop("max_autotune", False) and "max_configs" not in own:
            own["max_configs"] = WIDE_AUTOTUNE_CONFIGS
        root = own.pop("cache_root", None)
        if root is not None and "cache_dir" not in own:
            own["cache_dir"] = root
        return parse_dataclass_options(cls, own, owner="Triton backend ('cuda.*')", base=cls(debug_dir=None))

    def hash(self) -> str:
        """The identity of the code this config generates and how it is tuned: every field but where
        files go and how many compiler processes run."""
        return options_hash(self, exclude=("cache_dir", "debug_dir", "compile_workers"))

    def resolved_cache_dir(self) -> Path:
        """The cache folder this configuration uses."""
        return self.cache_dir if self.cache_dir is not None else default_cache_dir()

    def interpreting(self) -> bool:
        """Whether kernels run under Triton's interpreter."""
        return self.interpret if self.interpret is not None else interpreter_enabled()

    def replace(self, **changes: Any) -> TritonConfig:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)
