"""The one place the frontend calls aotgrad: joint forward/backward tracing with bound compilers."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

import aotgrad
from aotgrad.compile import EAGER_RUN
from frontend.context import CompileContext

GraphCompiler = aotgrad.CompilerFn
"""aotgrad's forward/backward compiler shape."""


def aot_config(context: CompileContext) -> aotgrad.AotConfig:
    """aotgrad's options for this compilation (`Config.aot_config`): its own "run this graph eagerly"
    follows the frontend's `fallback_to_eager`, then the ``"aotgrad.*"`` options."""
    return context.config.aot_config()


def aot_compile(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    context: CompileContext,
    *,
    fw_compiler: GraphCompiler,
    bw_compiler: GraphCompiler | None = None,
    decompositions: Any = None,
) -> Callable[..., Any]:
    """Trace `gm` into functional ATen forward (and backward) graphs and compile them (aotgrad).

    Time spent here is charged to the "aotgrad" stage, minus the nested compilers' own stages.
    With ``fallback_to_eager=False`` a graph aotgrad cannot trace raises instead of running eagerly.
    """
    if context.repro is not None:  # repro scripts and accuracy checks of the ATen graphs
        fw_compiler = _noted(fw_compiler, context, gm)
        bw_compiler = _noted(bw_compiler or fw_compiler, context, gm)
    kwargs: dict[str, Any] = {
        "fw_compiler": fw_compiler,
        "bw_compiler": bw_compiler or fw_compiler,
        "config": aot_config(context),
    }
    if decompositions is not None:
        kwargs["decompositions"] = decompositions
    with context.stage("aotgrad"), _eager_runs_reported(context):
        return aotgrad.aot_graph(gm, list(example_inputs), **kwargs)


class _EagerRunsAsFallbacks(logging.Filter):
    """Turns aotgrad's "running this graph eagerly" warnings into the frontend's fallback events
    (shown on ``kiln.fallbacks``, kept in the compile report), instead of a bare ``aotgrad`` log line:
    a graph aotgrad runs eagerly whatever `fallback_to_eager` says (an in-place write only eager
    defines) must be as visible as any other fallback."""

    def __init__(self, context: CompileContext) -> None:
        super().__init__()
        self._context = context

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, EAGER_RUN, False):
            return True
        message = record.getMessage().removeprefix("aotgrad: ")
        self._context.events.emit("fallbacks", f"{self._context.label}: {message}")
        return False


@contextlib.contextmanager
def _eager_runs_reported(context: CompileContext) -> Iterator[None]:
    logger = logging.getLogger("aotgrad")
    forward = _EagerRunsAsFallbacks(context)
    logger.addFilter(forward)
    try:
        yield
    finally:
        logger.removeFilter(forward)


def _noted(compiler: GraphCompiler, context: CompileContext, parent: torch.fx.GraphModule) -> GraphCompiler:
    """`compiler`, telling the repro recorder about each ATen graph it compiles (and a failure)."""
    repro = context.repro
    assert repro is not None

    def compile_noted(aten_gm: torch.fx.GraphModule, inputs: list[Any]) -> Callable[..., Any]:
        repro.note_aten(aten_gm, inputs, parent)
        try:
            compiled = compiler(aten_gm, inputs)
        except Exception as error:
            repro.write_failure(aten_gm, error)
            raise
        return repro.checked(aten_gm, compiled)

    return compile_noted
