"""Pins the public symbols of `inductor_ir`: a change here is an API change."""

import types

import inductor_ir

PUBLIC = {
    "Buffer", "BufferRecord", "CompileTimings", "CompiledGraph", "ComputedBuffer", "DivisionCheck", "ExternKernel", "ExternStep",
    "FallbackKernel", "FloorDiv", "IRNode", "InPlaceBuffer", "IndexCheck", "IndexView", "InductorIRConfig", "InputBuffer", "KernelBackend",
    "KernelGroup", "KernelNode", "KernelSource", "KernelStep", "LOWERINGS", "Layout", "LoweringContext",
    "MemoryDep", "MissingBackendError", "ModularIndexing", "MultiOutput", "NodeBody", "NotLowerable",
    "OP_NAMES", "OpsHandler", "Pointwise", "Program", "REDUCTION_TYPES", "Reduction", "ReinterpretView",
    "Schedule", "TorchOpsHandler", "TracingHandler", "UnknownOpError", "__version__", "collector_paused", "compile_graph",
    "current_ops_handler", "decompositions", "describe_group", "eval_index", "failed_check", "interpret", "lower", "lowering",
    "fold_embedding_gradients_pass", "fuse_attention_pass",
    "KernelArtifact", "LoadedGraph", "NotSaveable", "ReloadableKernelBackend", "SavedGraph", "load_saved_graph",
    "save_compiled_graph",
    "COMMON_BACKEND_OPTIONS", "ConfigurableKernelBackend", "OptionError", "options_hash", "parse_dataclass_options",
    "ops", "schedule", "set_ops_handler", "simplify_index", "sympify_int", "verify_ops_handler", "wrapper_source",
}  # fmt: skip


def test_version_is_single_sourced() -> None:
    from inductor_ir._version import __version__

    assert inductor_ir.__version__ == __version__


def test_all_names_exist() -> None:
    for name in inductor_ir.__all__:
        assert hasattr(inductor_ir, name), name


def test_public_names_are_pinned() -> None:
    assert set(inductor_ir.__all__) == PUBLIC


def test_public_callables_are_documented() -> None:
    for name in inductor_ir.__all__:
        value = getattr(inductor_ir, name)
        if isinstance(value, (type, types.FunctionType)):
            assert (value.__doc__ or "").strip(), name


def test_kernel_backend_protocol_is_runtime_checkable() -> None:
    class Minimal:
        device_type = "cpu"

        def can_fuse_vertical(self, producer, consumer):  # type: ignore[no-untyped-def]
            return True

        def can_fuse_horizontal(self, first, second):  # type: ignore[no-untyped-def]
            return True

        def generate(self, group):  # type: ignore[no-untyped-def]
            raise NotImplementedError

        def compile(self, sources):  # type: ignore[no-untyped-def]
            return []

    assert isinstance(Minimal(), inductor_ir.KernelBackend)


FROZEN_OPS = {
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and", "bitwise_not",
    "bitwise_or", "bitwise_xor", "ceil", "constant", "cos", "cosh", "eq", "erf", "erfc", "exp", "exp2", "expm1",
    "floor", "floordiv", "fmod", "ge", "gt", "index_expr", "indirect_indexing", "isinf", "isnan", "le",
    "left_shift", "lgamma", "load", "log", "log10", "log1p", "log2", "logical_and", "logical_not", "logical_or",
    "logical_xor", "lt", "masked", "maximum", "minimum", "mul", "ne", "neg", "pow", "rand", "randn",
    "reciprocal", "reduction", "relu", "remainder", "right_shift", "round", "rsqrt", "sigmoid", "sign", "signbit",
    "sin", "sinh", "sqrt", "store", "store_reduction", "sub", "tan", "tanh", "to_dtype", "truediv", "trunc",
    "truncdiv", "where",
}  # fmt: skip


def test_ops_vocabulary_is_frozen() -> None:
    """Code generators implement exactly these ops: changing the set is a breaking change for them."""
    assert set(inductor_ir.OP_NAMES) == FROZEN_OPS
    assert inductor_ir.REDUCTION_TYPES == {
        "sum", "prod", "max", "min", "argmax", "argmin", "any", "welford_reduce", "welford_combine"
    }  # fmt: skip
