"""Kiln: a just-in-time compiler for PyTorch programs. `frontend.compile(model)` and the end-user API.

Example::

    import frontend
    compiled = frontend.compile(model)                 # inductor: fused C++ / Triton kernels
    compiled = frontend.compile(model, backend="eager")  # triage: capture only
    print(frontend.explain(fn, x, y))                  # graphs and graph breaks
    print(frontend.compile_times())
    frontend.report("compile.html")                    # one HTML file of everything compiled
"""

from frontend._version import __version__
from frontend.api import MODES, OptimizedModule, compile, optimize
from frontend.backends import ENTRY_POINT_GROUP, CompilerFn, list_backends, register_backend
from frontend.capture_api import (
    allow_in_graph,
    disable,
    disallow_in_graph,
    explain,
    export,
    graph_break,
    mark_dynamic,
    mark_static,
    reset,
    run,
)
from frontend.capture_events import CaptureEvent
from frontend.compile_report import report
from frontend.config import Config, config
from frontend.context import CompileContext
from frontend.errors import (
    BackendCompileError,
    CudaGraphOutputOverwrittenError,
    InvalidOptionError,
    KilnError,
    UnknownBackendError,
)
from frontend.graph_cache import InvalidCacheBundleError, load_cache_artifacts, save_cache_artifacts
from frontend.profiler import CompileProfiler
from frontend.stats import compile_times

__all__ = [
    "ENTRY_POINT_GROUP",
    "MODES",
    "BackendCompileError",
    "CaptureEvent",
    "CompileContext",
    "CompileProfiler",
    "CompilerFn",
    "Config",
    "CudaGraphOutputOverwrittenError",
    "InvalidCacheBundleError",
    "InvalidOptionError",
    "KilnError",
    "OptimizedModule",
    "UnknownBackendError",
    "__version__",
    "allow_in_graph",
    "compile",
    "compile_times",
    "config",
    "disable",
    "disallow_in_graph",
    "explain",
    "export",
    "graph_break",
    "list_backends",
    "load_cache_artifacts",
    "mark_dynamic",
    "mark_static",
    "optimize",
    "register_backend",
    "report",
    "reset",
    "run",
    "save_cache_artifacts",
]
