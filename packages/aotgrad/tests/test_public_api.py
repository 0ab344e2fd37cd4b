"""Pins the public symbols of `aotgrad`: a change here is an API change."""

import aotgrad

PUBLIC = {
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
}


def test_version_is_single_sourced() -> None:
    from aotgrad._version import __version__

    assert aotgrad.__version__ == __version__


def test_all_names_exist() -> None:
    for name in aotgrad.__all__:
        assert hasattr(aotgrad, name), name


def test_public_names_are_pinned() -> None:
    assert set(aotgrad.__all__) == PUBLIC


def test_partition_module_api() -> None:
    assert set(aotgrad.partition.__all__) == {"is_recomputable", "min_cut", "min_cut_saved_values", "save_all"}
