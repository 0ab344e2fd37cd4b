"""inductor_ir's own lowering tests, run through the Triton backend in the interpreter.

inductor_ir's lowering tests call `check_interpret(fn, make_inputs)`, which compares its reference
interpreter with eager. Here every `test_*` function of its `test_lowering_*.py` modules is collected
again with `check_interpret` replaced by a version that compiles the graph with
`inductor_ir.compile_graph(..., backends={"cpu": TritonBackend(device_type="cpu")})` and compares the
Triton kernels' results with eager on fresh inputs. The same tests run again, marked `gpu`, with the
inputs moved to CUDA and real kernels.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
import torch.utils._pytree as pytree
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend

_IR_TESTS = Path(__file__).resolve().parents[2] / "inductor-ir" / "tests"


def _lowering_modules() -> list[ModuleType]:
    if not _IR_TESTS.is_dir():
        return []
    if str(_IR_TESTS) not in sys.path:
        sys.path.insert(0, str(_IR_TESTS))
    return [importlib.import_module(path.stem) for path in sorted(_IR_TESTS.glob("test_lowering_*.py"))]


def _gpu_copy(test: Callable[..., Any]) -> Callable[..., Any]:
    """The same test function (same parameters) with the `gpu` mark added."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> Any:
        return test(*args, **kwargs)

    run.pytestmark = [*getattr(test, "pytestmark", []), pytest.mark.gpu]  # type: ignore[attr-defined]
    return run


_MODULES = _lowering_modules()
for _module in _MODULES:
    for _name, _value in vars(_module).items():
        if _name.startswith("test_") and callable(_value):
            _suffix = _module.__name__.removeprefix("test_")
            globals()[f"{_name}__{_suffix}"] = _value
            if not getattr(_value, "cpu_only", False):  # a CPU-only lowering choice has no GPU copy
                globals()[f"{_name}__{_suffix}__gpu"] = _gpu_copy(_value)


def _check_with_triton(
    backend: TritonBackend,
    device: str,
    fn: Callable[..., Any],
    make_inputs: Callable[[], Sequence[Any]],
    *,
    allow_fallback: bool = False,
    **options: Any,  # options check_interpret may grow; fallbacks are checked by inductor_ir's own run
) -> inductor_ir.Program:
    from inductor_ir_testing import assert_close

    def inputs() -> list[Any]:
        return [t.to(device) if isinstance(t, torch.Tensor) else t for t in make_inputs()]

    with torch.device(device):  # factory calls inside `fn` (arange, zeros, ...) land on `device` too
        example = inputs()
        gm = make_fx(fn)(*example)
        compiled = inductor_ir.compile_graph(gm, example, backends={device: backend})
        fresh = inputs()
        assert_close(pytree.tree_leaves(compiled(*fresh)), pytree.tree_leaves(fn(*fresh)))
    return compiled.program


@pytest.fixture(autouse=True)
def _through_triton(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if request.node.get_closest_marker("gpu") is not None:
        gpu: TritonBackend = request.getfixturevalue("gpu_backend")
        check = functools.partial(
            _check_with_triton, TritonBackend(config=gpu.config.replace(autotune=False)), "cuda"
        )
    else:
        check = functools.partial(_check_with_triton, request.getfixturevalue("cpu_backend"), "cpu")
    for module in _MODULES:
        if hasattr(module, "check_interpret"):
            monkeypatch.setattr(module, "check_interpret", check)
    yield


def test_lowering_modules_were_found() -> None:
    assert _MODULES, f"no inductor_ir lowering tests under {_IR_TESTS}"
