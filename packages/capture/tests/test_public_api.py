"""Pins the public symbols of `capture`: a change here is an API change."""

import capture


def test_version_is_single_sourced() -> None:
    from capture._version import __version__

    assert capture.__version__ == __version__


def test_all_names_exist() -> None:
    for name in capture.__all__:
        assert hasattr(capture, name), name


PUBLIC_NAMES = {
    "BackendCompilerError", "BreakReason", "CaptureConfig", "CaptureError", "CaptureHooks", "CapturedFunction",
    "CompilerFn", "ExplainOutput", "ExportResult", "GraphBreakError", "GraphBroken", "GraphCompiled", "Guard",
    "InternalCaptureError", "OptimizedModule", "RecompileLimitWarning", "RecompileStormWarning", "Recompiled",
    "UserLocation",
    "__version__", "allow_in_graph", "config", "disable", "disallow_in_graph", "explain", "export",
    "graph_break", "mark_dynamic", "mark_static", "optimize", "reset", "run",
}


def test_public_names_are_pinned() -> None:
    assert set(capture.__all__) == PUBLIC_NAMES


def test_config_is_a_typed_dataclass_with_patch() -> None:
    assert capture.config.cache_size_limit == 8
    with capture.config.patch(cache_size_limit=3):
        assert capture.config.cache_size_limit == 3
    assert capture.config.cache_size_limit == 8


def test_explain_takes_the_arguments_in_either_call_form() -> None:
    """``explain(fn, *args)`` (the seeds') and ``explain(fn)(*args)`` (current torch's) agree."""
    import torch

    def two_graphs(x: torch.Tensor) -> torch.Tensor:
        y = x.sin()
        print("a graph break")
        return y.cos()

    x = torch.randn(3)
    direct, curried = capture.explain(two_graphs, x), capture.explain(two_graphs)(x)
    assert (direct.graph_count, direct.graph_break_count) == (curried.graph_count, curried.graph_break_count) == (2, 1)
    torch.testing.assert_close(curried.result, two_graphs(x))
