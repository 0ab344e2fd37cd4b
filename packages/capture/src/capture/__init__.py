"""Bytecode capture of PyTorch programs into FX graphs, with guards, graph breaks and resume functions.

Quick start::

    import capture

    def my_backend(gm, example_inputs):
        gm.graph.print_tabular()
        return gm.forward

    @capture.optimize(my_backend)
    def f(a, b):
        x = a / (torch.abs(a) + 1)
        if b.sum() < 0:      # a graph break: the branch runs in Python
            b = b * -1
        return x * b
"""

from capture._version import __version__
from capture.api import (
    allow_in_graph,
    disable,
    disallow_in_graph,
    graph_break,
    mark_dynamic,
    mark_static,
    optimize,
    reset,
    run,
)
from capture.cache import CompilerFn
from capture.config import CaptureConfig, config
from capture.context import CapturedFunction, OptimizedModule
from capture.errors import (
    BackendCompilerError,
    BreakReason,
    CaptureError,
    GraphBreakError,
    InternalCaptureError,
    RecompileLimitWarning,
    RecompileStormWarning,
    UserLocation,
)
from capture.events import CaptureHooks, GraphBroken, GraphCompiled, Recompiled
from capture.explain import ExplainOutput, ExportResult, explain, export
from capture.guards import Guard

__all__ = [
    "BackendCompilerError",
    "BreakReason",
    "CaptureConfig",
    "CaptureError",
    "CaptureHooks",
    "CapturedFunction",
    "CompilerFn",
    "ExplainOutput",
    "ExportResult",
    "GraphBreakError",
    "GraphBroken",
    "GraphCompiled",
    "Guard",
    "InternalCaptureError",
    "OptimizedModule",
    "RecompileLimitWarning",
    "RecompileStormWarning",
    "Recompiled",
    "UserLocation",
    "__version__",
    "allow_in_graph",
    "config",
    "disable",
    "disallow_in_graph",
    "explain",
    "export",
    "graph_break",
    "mark_dynamic",
    "mark_static",
    "optimize",
    "reset",
    "run",
]
