"""``options=`` reaches every stage's typed options: capture, aotgrad, inductor_ir and the kernel backend.

Each stage's own options are namespaced (``"capture.cache_size_limit"``, ``"aotgrad.fallback_to_eager"``,
``"inductor_ir.fuse"``, ``"cpu.vectorize"``); each is checked by its stage when `frontend.compile` is
called, and an unknown one raises listing the valid ones.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import aotgrad
import codegen_cpp
import frontend
import inductor_ir
from frontend._env import read_environment
from frontend.backends import inductor as inductor_backend
from frontend.config import Config
from frontend.graph_cache.key import key_components

pytestmark = pytest.mark.usefixtures("fresh_cache")


def _sin_cos(x: torch.Tensor) -> torch.Tensor:
    return torch.cos(torch.sin(x) * 2)


def test_capture_option_reaches_capture() -> None:
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    limited = frontend.compile(double, backend="eager", dynamic=False, options={"capture.cache_size_limit": 1})
    assert limited.kiln_context.config.capture_config().cache_size_limit == 1
    with pytest.warns(UserWarning, match="cache_size_limit=1"):
        for n in (3, 5, 7):  # a new size each call: only the first is compiled, the rest run eagerly
            x = torch.randn(n)
            torch.testing.assert_close(limited(x), x * 2)
    assert limited.kiln_context.graphs_compiled == 1

    def triple(x: torch.Tensor) -> torch.Tensor:
        return x * 3

    default = frontend.compile(triple, backend="eager", dynamic=False)
    for n in (3, 5, 7):
        default(torch.randn(n))
    assert default.kiln_context.graphs_compiled == 3


def _record_configs(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[Any]:
    """The `config=` of every call of ``module.name`` from now on (the call itself goes through)."""
    seen: list[Any] = []
    real = getattr(module, name)

    def recording(*args: Any, config: Any, **kwargs: Any) -> Any:
        seen.append(config)
        return real(*args, config=config, **kwargs)

    monkeypatch.setattr(module, name, recording)
    return seen


def test_aotgrad_option_reaches_aotgrad(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _record_configs(monkeypatch, aotgrad, "aot_graph")
    x = torch.randn(6)
    compiled = frontend.compile(_sin_cos, backend="aot_eager", options={"aotgrad.fallback_to_eager": False})
    torch.testing.assert_close(compiled(x), _sin_cos(x))
    assert seen == [aotgrad.AotConfig(fallback_to_eager=False)]
    assert compiled.kiln_context.config.fallback_to_eager is True  # the frontend's own stays as it was
    # Without an aotgrad option, aotgrad's follows the frontend's fallback_to_eager.
    frontend.compile(_sin_cos, backend="aot_eager", options={"fallback_to_eager": False})(x)
    assert seen[-1] == aotgrad.AotConfig(fallback_to_eager=False)


def _two_outputs(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.sin(x), torch.cos(x) * 2


def test_inductor_ir_option_reaches_compile_graph() -> None:
    x = torch.randn(64)
    fused = frontend.compile(_two_outputs, options={"graph_cache": False})
    torch.testing.assert_close(fused(x), _two_outputs(x))
    unfused = frontend.compile(_two_outputs, options={"graph_cache": False, "inductor_ir.fuse": False})
    torch.testing.assert_close(unfused(x), _two_outputs(x))
    assert unfused.kiln_context.config.inductor_config().fuse is False
    assert len(fused.kiln_context.kernels) == 1  # both outputs from one kernel
    assert len(unfused.kiln_context.kernels) == 2  # one kernel per computed buffer


def test_check_ir_and_strict_lowering_options_reach_inductor_ir(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _record_configs(monkeypatch, inductor_ir, "compile_graph")
    options = {"graph_cache": False, "inductor_ir.check_ir": True, "inductor_ir.strict_lowering": True}
    compiled = frontend.compile(_two_outputs, options=options)
    x = torch.randn(64)
    torch.testing.assert_close(compiled(x), _two_outputs(x))
    assert seen and all(config.check_ir and config.strict_lowering for config in seen)
    with pytest.raises(frontend.InvalidOptionError, match=r"valid options are: .*check_ir, strict_lowering"):
        frontend.compile(_two_outputs, options={"inductor_ir.check_irs": True})

def test_kernel_backend_option_reaches_the_cpp_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Any] = []
    real = inductor_backend.load_kernel_backend

    def recording(device_type: str, config: Config) -> Any:
        built.append(real(device_type, config))
        return built[-1]

    monkeypatch.setattr(inductor_backend, "load_kernel_backend", recording)
    options = {"graph_cache": False, "cpu.vectorize": False, "fallback_random": True}
    compiled = frontend.compile(_sin_cos, options=options)
    x = torch.randn(64)
    torch.testing.assert_close(compiled(x), _sin_cos(x))
    (backend,) = built
    assert isinstance(backend, codegen_cpp.CppBackend)
    assert backend.config.vectorize is False  # the "cpu.*" option
    assert backend.config.fallback_random is True  # a frontend option every kernel backend parses
    assert backend.config.cache_dir == compiled.kiln_context.config.cache_dir / "cpp"


@pytest.mark.parametrize(
    ("key", "listed"),
    [
        ("capture.cache_limit", "cache_size_limit"),
        ("aotgrad.fallback", "fallback_to_eager"),
        ("inductor_ir.fusion", "layout_optimization"),
        ("cpu.vectorise", "vectorize"),
        ("cuda.configs", "max_configs"),
        ("autotune", "'inductor_ir.<name>'"),
    ],
)
def test_unknown_option_anywhere_lists_the_valid_ones(key: str, listed: str) -> None:
    with pytest.raises(frontend.InvalidOptionError, match=f"valid options are: .*{listed}"):
        frontend.compile(_sin_cos, options={key: True})


def test_wrong_type_for_a_stage_option_says_what_was_expected() -> None:
    with pytest.raises(frontend.InvalidOptionError, match="'fuse' expects bool"):
        frontend.compile(_sin_cos, options={"inductor_ir.fuse": "no"})
    with pytest.raises(frontend.InvalidOptionError, match="'cache_size_limit' expects int"):
        frontend.compile(_sin_cos, options={"capture.cache_size_limit": "8"})


def test_patch_takes_stage_options_and_restores_them() -> None:
    before = dict(frontend.config.stage_options)
    with frontend.config.patch(**{"inductor_ir.layout_optimization": False}):
        assert frontend.config.inductor_config().layout_optimization is False
        assert frontend.config.snapshot().inductor_config().layout_optimization is False
    assert frontend.config.stage_options == before
    assert frontend.config.inductor_config().layout_optimization is True


def test_graph_cache_key_covers_every_stage_and_the_backend() -> None:
    gm = torch.fx.symbolic_trace(_sin_cos)
    inputs = [torch.randn(4)]
    base = Config()
    cpp = codegen_cpp.CppBackend(codegen_cpp.CppBackend.parse_options(base.kernel_backend_options("cpu")))

    def options_part(config: Config, backend: Any = cpp) -> Any:
        return key_components(gm, inputs, config, {"cpu": backend}, "cpu")["options"]

    default = options_part(base)
    assert default["stages"]["inductor_ir"] == base.inductor_config().hash()
    for key, value in [("capture.capture_scalar_outputs", False), ("aotgrad.fallback_to_eager", False),
                       ("inductor_ir.fuse", False)]:
        changed = options_part(base.with_options({key: value}))
        assert changed["stages"] != default["stages"], key
    other = codegen_cpp.CppBackend(codegen_cpp.CppBackend.parse_options({"vectorize": False}))
    assert options_part(base, other)["backends"] != default["backends"]
    assert default["backends"]["cpu"] == cpp.hash()


def test_capture_environment_is_read_by_the_frontend() -> None:
    env = read_environment({"KILN_CAPTURE_SCALAR_OUTPUTS": "0", "KILN_CAPTURE_VERBOSE": "1"})
    assert env.capture == {"verbose": True, "capture_scalar_outputs": False, "capture_dynamic_output_shape_ops": True}


def test_kernel_backends_are_read_once_until_the_import_paths_change(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from frontend import stage_options

    reads: list[str] = []
    real_entry_points = stage_options.entry_points

    def counted(group: str) -> Any:
        reads.append(group)
        return real_entry_points(group=group)

    monkeypatch.setattr(stage_options, "entry_points", counted)
    monkeypatch.setattr(stage_options, "_ENTRIES_READ", None)
    monkeypatch.setattr(stage_options, "_FACTORIES", {})
    first = stage_options.kernel_backend_entries()
    factory = stage_options.load_kernel_backend_factory("cpu")
    for _ in range(3):  # one graph each: nothing is read or loaded again
        assert stage_options.load_kernel_backend_factory("cpu") is factory
    assert factory is codegen_cpp.CppBackend and "cpu" in first
    assert reads == [stage_options.KERNEL_BACKENDS_GROUP]

    stage_options.kernel_backend_entries().clear()  # callers get a copy
    assert stage_options.kernel_backend_entries() == first and len(reads) == 1

    monkeypatch.syspath_prepend(str(tmp_path))  # a new import path may hold new distributions
    assert stage_options.load_kernel_backend_factory("cpu") is factory
    assert len(reads) == 2
    (tmp_path / "installed.dist-info").mkdir()  # installing into a folder changes its modification time
    stage_options.kernel_backend_entries()
    assert len(reads) == 3
