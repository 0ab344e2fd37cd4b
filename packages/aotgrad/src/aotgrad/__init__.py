"""aotgrad: torch-level FX graphs ─► functional ATen forward and backward graphs.

It traces forward and backward together with fake tensors, functionalizes and decomposes them
(see `aotgrad.decompositions`), partitions the joint graph (`partition.min_cut` saves the fewest
bytes), hands each side to a compiler, and wraps the pair in a `torch.autograd.Function`.

Example:
    >>> import functools, aotgrad
    >>> backend = functools.partial(aotgrad.aot_graph, fw_compiler=aotgrad.eager_compiler)
    >>> compiled = backend(torch.fx.symbolic_trace(model), [x])
    >>> compiled(x)[0].sum().backward()
"""

from aotgrad import partition, plans
from aotgrad._version import __version__
from aotgrad.api import AotCallable, AotModule, aot_eager, aot_function, aot_graph, aot_module, eager_compiler
from aotgrad.compile import CompilerFn
from aotgrad.config import AotConfig
from aotgrad.decompositions import default_decompositions
from aotgrad.errors import AotGradError, TracingError, UnsupportedOperatorError
from aotgrad.partition import min_cut, save_all
from aotgrad.report import SavedBytesReport, saved_bytes_report
from aotgrad.runtime.boxed import BoxedCallable, is_boxed, mark_boxed
from aotgrad.tracing import FunctionalGraph, JointGraph

__all__ = [
    "AotCallable",
    "AotConfig",
    "AotGradError",
    "AotModule",
    "BoxedCallable",
    "CompilerFn",
    "FunctionalGraph",
    "JointGraph",
    "SavedBytesReport",
    "TracingError",
    "UnsupportedOperatorError",
    "__version__",
    "aot_eager",
    "aot_function",
    "aot_graph",
    "aot_module",
    "default_decompositions",
    "eager_compiler",
    "is_boxed",
    "mark_boxed",
    "min_cut",
    "partition",
    "plans",
    "save_all",
    "saved_bytes_report",
]
