"""Define-by-run loop-level IR with SymPy shapes: lowerings, scheduling and fusion, memory planning, wrapper code.

Pipeline: the graph rewrites :func:`fuse_attention_pass` and :func:`fold_embedding_gradients_pass`,
:func:`lower` (ATen FX graph -> :class:`Program`), :func:`schedule` (fusion, order, memory plan),
:func:`wrapper_source`, all composed by :func:`compile_graph`. Code generators implement
:class:`KernelBackend` (see docs/kernel-backend.md) and reach the current op handler through
:data:`ops`.
"""

from inductor_ir._version import __version__
from inductor_ir.backend import (
    COMMON_BACKEND_OPTIONS,
    BufferRecord,
    ConfigurableKernelBackend,
    InPlaceBuffer,
    KernelBackend,
    KernelGroup,
    KernelNode,
    KernelSource,
    NodeBody,
)
from inductor_ir.compile import (
    CompiledGraph,
    CompileTimings,
    MissingBackendError,
    collector_paused,
    compile_graph,
)
from inductor_ir.config import InductorIRConfig
from inductor_ir.debug import describe_group
from inductor_ir.decompositions import decompositions
from inductor_ir.graph_passes import fold_embedding_gradients_pass, fuse_attention_pass
from inductor_ir.interpreter import TorchOpsHandler, eval_index, interpret
from inductor_ir.ir import (
    Buffer,
    ComputedBuffer,
    DivisionCheck,
    ExternKernel,
    FallbackKernel,
    IndexCheck,
    IndexView,
    InputBuffer,
    IRNode,
    Layout,
    MemoryDep,
    MultiOutput,
    Pointwise,
    Program,
    Reduction,
    ReinterpretView,
    TracingHandler,
    failed_check,
)
from inductor_ir.lower import lower
from inductor_ir.lowering import LOWERINGS, LoweringContext, NotLowerable, lowering
from inductor_ir.ops_handler import (
    OP_NAMES,
    REDUCTION_TYPES,
    OpsHandler,
    UnknownOpError,
    current_ops_handler,
    ops,
    set_ops_handler,
    verify_ops_handler,
)
from inductor_ir.options import OptionError, options_hash, parse_dataclass_options
from inductor_ir.saved import (
    KernelArtifact,
    LoadedGraph,
    NotSaveable,
    ReloadableKernelBackend,
    SavedGraph,
    load_saved_graph,
    save_compiled_graph,
)
from inductor_ir.scheduler import ExternStep, KernelStep, Schedule, schedule
from inductor_ir.symbolic import FloorDiv, ModularIndexing, simplify_index, sympify_int
from inductor_ir.wrapper import wrapper_source

__all__ = [
    "COMMON_BACKEND_OPTIONS",
    "LOWERINGS",
    "OP_NAMES",
    "REDUCTION_TYPES",
    "Buffer",
    "BufferRecord",
    "CompileTimings",
    "CompiledGraph",
    "ComputedBuffer",
    "ConfigurableKernelBackend",
    "DivisionCheck",
    "ExternKernel",
    "ExternStep",
    "FallbackKernel",
    "FloorDiv",
    "IRNode",
    "InPlaceBuffer",
    "IndexCheck",
    "IndexView",
    "InductorIRConfig",
    "InputBuffer",
    "KernelArtifact",
    "KernelBackend",
    "KernelGroup",
    "KernelNode",
    "KernelSource",
    "KernelStep",
    "Layout",
    "LoadedGraph",
    "LoweringContext",
    "MemoryDep",
    "MissingBackendError",
    "ModularIndexing",
    "MultiOutput",
    "NodeBody",
    "NotLowerable",
    "NotSaveable",
    "OpsHandler",
    "OptionError",
    "Pointwise",
    "Program",
    "Reduction",
    "ReinterpretView",
    "ReloadableKernelBackend",
    "SavedGraph",
    "Schedule",
    "TorchOpsHandler",
    "TracingHandler",
    "UnknownOpError",
    "__version__",
    "collector_paused",
    "compile_graph",
    "current_ops_handler",
    "decompositions",
    "describe_group",
    "eval_index",
    "failed_check",
    "fold_embedding_gradients_pass",
    "fuse_attention_pass",
    "interpret",
    "load_saved_graph",
    "lower",
    "lowering",
    "ops",
    "options_hash",
    "parse_dataclass_options",
    "save_compiled_graph",
    "schedule",
    "set_ops_handler",
    "simplify_index",
    "sympify_int",
    "verify_ops_handler",
    "wrapper_source",
]
