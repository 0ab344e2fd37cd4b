"""The harness's typed configuration: what to run (devices, models, tasks, compilers) and how to measure."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

TASKS: tuple[str, ...] = ("inference", "training")
TASK_ALIASES: dict[str, str] = {"infer": "inference", "eval": "inference", "train": "training"}
# "separate": a process per model and compiler; "same": one process per model runs every compiler in turn.
PROCESS_MODES: tuple[str, ...] = ("separate", "same")
# The same-process order: eager, torch.compile, Kiln (a notebook's order), or Kiln first, eager last.
ORDERS: tuple[str, ...] = ("eager-first", "kiln-first")
_ORDER_RANKS: dict[str, dict[str, int]] = {
    "eager-first": {"eager": 0, "torch": 1, "kiln": 2},
    "kiln-first": {"kiln": 0, "torch": 1, "eager": 2},
}


@dataclass(frozen=True)
class CompilerSpec:
    """One way of running a model: eager, torch.compile or Kiln, with a compile mode.

    `label` names the column in tables and plots; `kind` picks the adapter in the worker;
    `mode` is passed on as the compiler's `mode=` argument (None: its default).
    """

    label: str
    kind: str
    mode: str | None = None
    gpu_only: bool = False


COMPILERS: dict[str, CompilerSpec] = {
    spec.label: spec
    for spec in (
        CompilerSpec("torch.compile", "torch"),
        CompilerSpec("torch.compile-ro", "torch", "reduce-overhead", gpu_only=True),
        CompilerSpec("kiln", "kiln"),
        CompilerSpec("kiln-ro", "kiln", "reduce-overhead", gpu_only=True),
    )
}
EAGER = CompilerSpec("eager", "eager")


@dataclass(frozen=True)
class MeasureConfig:
    """How one side (eager or compiled) of a model is timed.

    The worker runs `warmup_calls` untimed calls, then `rounds` rounds that alternate a block of
    eager calls with a block of compiled calls (so slow drifts of a shared machine hit both sides),
    each block sized to take about `min_time_s / rounds`. Every call is timed on its own and the
    median over all of them is reported; at least `min_reps` and at most `max_reps` calls per side.
    """

    warmup_calls: int = 10
    rounds: int = 10
    min_time_s: float = 2.0
    min_reps: int = 20
    max_reps: int = 2000
    memory_calls: int = 3

    @staticmethod
    def quick() -> MeasureConfig:
        """Shorter measurement for `--quick`: still warm, still a median of at least 10 calls."""
        return MeasureConfig(warmup_calls=3, rounds=5, min_time_s=0.3, min_reps=10, max_reps=500, memory_calls=2)


@dataclass(frozen=True)
class BenchConfig:
    """One harness run: the selection (device, models, tasks, compilers) and the measurement settings."""

    device: str = "cpu"
    models: tuple[str, ...] = ()
    tasks: tuple[str, ...] = TASKS
    compilers: tuple[CompilerSpec, ...] = ()
    quick: bool = False
    warm: bool = True
    threads: int = 2
    timeout_s: float = 1200.0
    output_dir: Path = Path("bench_results")
    measure: MeasureConfig = field(default_factory=MeasureConfig)
    seed: int = 0
    process_mode: str = "separate"
    order: str = "eager-first"
    # A CPU sweep in the same-process mode: each model's one worker runs every compiler at each of these
    # thread counts in turn (`tools.bench.same_process`); empty: `threads` only.
    sweep_threads: tuple[int, ...] = ()

    def replace(self, **changes: object) -> BenchConfig:
        """A copy with `changes` applied."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def parse_tasks(text: str) -> tuple[str, ...]:
    """`"inference,train"` -> `("inference", "training")`; raises ValueError naming the bad entry."""
    tasks = []
    for raw in _split(text):
        name = TASK_ALIASES.get(raw, raw)
        if name not in TASKS:
            raise ValueError(f"unknown mode {raw!r}: choose from {', '.join(TASKS)} (or infer, train)")
        tasks.append(name)
    return tuple(dict.fromkeys(tasks))


def parse_compilers(text: str, device: str) -> tuple[CompilerSpec, ...]:
    """Compiler labels (`"torch.compile,kiln"`, or `"all"`) -> specs usable on `device`.

    Eager is measured beside every compiler anyway; naming `eager` adds an eager-against-eager row,
    a calibration whose speedup should be 1.00x.

    Reduce-overhead variants are CUDA-graph modes: on a CPU run they are dropped from `"all"` and
    rejected when named explicitly.
    """
    names = list(COMPILERS) if text == "all" else _split(text)
    specs = []
    for name in names:
        if name == "eager":
            specs.append(EAGER)  # eager against itself: shows the harness's own noise
            continue
        if name not in COMPILERS:
            raise ValueError(f"unknown compiler {name!r}: choose from eager, {', '.join(COMPILERS)}")
        spec = COMPILERS[name]
        if spec.gpu_only and device != "cuda":
            if text == "all":
                continue
            raise ValueError(f"compiler {name!r} uses CUDA graphs: it needs --device cuda")
        specs.append(spec)
    return tuple(dict.fromkeys(specs))


def compiler_order(compilers: tuple[CompilerSpec, ...], order: str) -> tuple[CompilerSpec, ...]:
    """`compilers` in the order a same-process worker runs them.

    "eager-first": the eager calibration, then torch.compile's modes, then Kiln's; "kiln-first": Kiln's,
    then torch.compile's, then eager. Within a kind the given order stays.

    >>> [spec.label for spec in compiler_order((COMPILERS["kiln"], COMPILERS["torch.compile"]), "eager-first")]
    ['torch.compile', 'kiln']
    """
    if order not in _ORDER_RANKS:
        raise ValueError(f"unknown order {order!r}: choose from {', '.join(ORDERS)}")
    ranks = _ORDER_RANKS[order]
    return tuple(sorted(compilers, key=lambda spec: ranks.get(spec.kind, len(ranks))))


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]
