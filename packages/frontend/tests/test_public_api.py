"""Pins the public symbols of `frontend`: a change here is an API change."""

import inspect

import frontend

PUBLIC = {
    "ENTRY_POINT_GROUP",
    "MODES",
    "BackendCompileError",
    "CaptureEvent",
    "CompileContext",
    "CompileProfiler",
    "CompilerFn",
    "Config",
    "CudaGraphOutputOverwrittenError",
    "InvalidOptionError",
    "KilnError",
    "OptimizedModule",
    "UnknownBackendError",
    "__version__",
    "allow_in_graph",
    "compile",
    "compile_times",
    "load_cache_artifacts",
    "save_cache_artifacts",
    "InvalidCacheBundleError",
    "config",
    "disable",
    "disallow_in_graph",
    "explain",
    "export",
    "graph_break",
    "list_backends",
    "mark_dynamic",
    "mark_static",
    "optimize",
    "register_backend",
    "report",
    "reset",
    "run",
}


def test_version_is_single_sourced() -> None:
    from frontend._version import __version__

    assert frontend.__version__ == __version__


def test_all_names_exist() -> None:
    for name in frontend.__all__:
        assert hasattr(frontend, name), name


def test_public_names_are_pinned() -> None:
    assert set(frontend.__all__) == PUBLIC


def test_compile_signature_is_torch_shaped() -> None:
    parameters = inspect.signature(frontend.compile).parameters
    assert list(parameters) == ["model", "backend", "mode", "fullgraph", "dynamic", "options", "disable"]
    assert parameters["backend"].default == "inductor"
    assert parameters["fullgraph"].default is False
    optimize = inspect.signature(frontend.optimize).parameters
    assert list(optimize)[:2] == ["backend", "nopython"]


def test_every_public_callable_is_documented() -> None:
    for name in frontend.__all__:
        value = getattr(frontend, name)
        if callable(value) and not isinstance(value, type(frontend.CompilerFn)):
            assert (value.__doc__ or "").strip(), name
