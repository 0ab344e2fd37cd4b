"""Writing a standalone repro script: the graph as an `nn.Module`, its inputs, and the stage to run.

The script defines ``class Repro(torch.nn.Module)`` whose ``forward`` is the graph's generated
code, ``make_inputs()``, and ``KILN_REPRO`` (which stage failed and how); run as a program it calls
`frontend.repro.run_repro`, and ``python -m frontend.minify script.py`` shrinks it.
"""

from __future__ import annotations

import datetime
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from frontend.repro.inputs import HELPERS, SavedBudget, inputs_source, value_source

_KNOWN_GLOBALS: dict[str, str] = {
    "torch": "import torch",
    "inf": "from math import inf",
    "nan": "from math import nan",
    "NoneType": "NoneType = type(None)",
    "device": "from torch import device",
    "fx_pytree": "import torch.fx._pytree as fx_pytree",
    "pytree": "import torch.utils._pytree as pytree",
    "operator": "import operator",
    "math": "import math",
}


@dataclass(frozen=True)
class ReproSpec:
    """What a repro script reproduces.

    Attributes:
        after: "capture" (the FX graph goes through the whole backend) or "aotgrad" (the ATen
            graph goes through the backend's kernel compiler).
        backend: the backend's registered name ("inductor", ...).
        kind: "crash" (compiling or running raises) or "accuracy" (the result differs from eager).
        options: the `Config` options that shape code generation (fallback_random, ...).
        error: the failure seen, one line, for the script's docstring.
    """

    after: str
    backend: str
    kind: str = "crash"
    options: dict[str, Any] = field(default_factory=dict)
    error: str = ""


def _import_line(name: str, value: Any) -> str:
    """How the script defines one global the graph's code uses."""
    if name in _KNOWN_GLOBALS:
        return _KNOWN_GLOBALS[name]
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if module and qualname and module != "__main__" and "<" not in qualname and "." not in qualname:
        return f"from {module} import {qualname} as {name}"
    if module and qualname and module != "__main__" and "<" not in qualname:
        return f"import {module}\n{name} = {module}.{qualname}"
    return (
        f"def {name}(*args, **kwargs):  # {value!r}: not importable; paste its definition here\n"
        f"    raise NotImplementedError({name!r})"
    )


def _module_source(module: torch.nn.Module) -> str | None:
    """A constructor call for a torch.nn module (``torch.nn.Linear(in_features=4, ...)``), or None."""
    if not type(module).__module__.startswith("torch.nn"):
        return None
    text = f"torch.nn.{module!r}"
    try:
        rebuilt = eval(text, {"torch": torch, "inf": float("inf")})  # our own repr, of torch's class
    except Exception:
        return None
    return text if type(rebuilt) is type(module) else None


def _attribute_lines(gm: torch.fx.GraphModule, budget: SavedBudget) -> list[str]:
    """`__init__` lines rebuilding the submodules and tensors the graph's nodes read."""
    lines: list[str] = []
    for node in gm.graph.nodes:
        if node.op == "call_module":
            module = gm.get_submodule(node.target)
            made = _module_source(module)
            if made is None:
                made = f"_unknown_module({type(module).__qualname__!r})"
            lines.append(f"_put(self, {node.target!r}, {made})")
            for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
                lines.append(f"_put(self, {node.target + '.' + name!r}, {value_source(tensor.data, budget)})")
        elif node.op == "get_attr":
            value = _resolve(gm, str(node.target))
            if isinstance(value, torch.Tensor):
                kind = "parameter" if isinstance(value, torch.nn.Parameter) else "tensor"
                lines.append(f"_put(self, {node.target!r}, {value_source(value.data, budget)}, {kind!r})")
            elif isinstance(value, torch.nn.Module) and _module_source(value) is not None:
                lines.append(f"_put(self, {node.target!r}, {_module_source(value)})")
            else:
                lines.append(f"_put(self, {node.target!r}, _unknown_module({type(value).__qualname__!r}))")
    return lines or ["pass"]


def _resolve(gm: torch.nn.Module, target: str) -> Any:
    value: Any = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value


_PUT = '''
def _put(root, path, value, kind=None):
    """Set `root.<path>` (dotted), creating empty parent modules; tensors become parameters or buffers."""
    *parents, name = path.split(".")
    for parent in parents:
        if not hasattr(root, parent):
            root.add_module(parent, torch.nn.Module())
        root = getattr(root, parent)
    if kind == "parameter" or (isinstance(value, torch.Tensor) and isinstance(getattr(root, name, None), torch.nn.Parameter)):
        value = torch.nn.Parameter(value, requires_grad=value.is_floating_point())
    if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
        if name in root._parameters:
            del root._parameters[name]
        root.register_buffer(name, value)
    else:
        setattr(root, name, value)


def _unknown_module(name):
    raise NotImplementedError(f"rebuild the module {name} here: it is not a torch.nn module")
'''


def render_script(gm: torch.fx.GraphModule, inputs: list[Any], spec: ReproSpec, saved_bytes: int) -> str:
    """The text of a runnable repro script for `gm` called with `inputs`."""
    budget = SavedBudget(saved_bytes)
    code = gm.graph.python_code(root_module="self")
    imports = sorted({_import_line(name, value) for name, value in code.globals.items()})
    forward = textwrap.indent(code.src.strip("\n"), "    ")
    attributes = textwrap.indent("\n".join(_attribute_lines(gm, budget)), "        ")
    make_inputs = textwrap.indent(inputs_source(inputs, budget), "    ")
    ops = sum(1 for node in gm.graph.nodes if node.op in ("call_function", "call_method", "call_module"))
    stamp = datetime.datetime.now().isoformat(timespec="seconds")
    seen = spec.error.replace("\\", "/").replace('"""', "'''")  # it goes into the docstring
    what = "compiling or running this graph fails" if spec.kind == "crash" else "this graph's compiled result differs from eager"
    return f'''"""Kiln repro ({stamp}): {what}.

Graph after {spec.after}, backend {spec.backend!r}, {ops} ops.
{("Seen: " + seen) if seen else ""}

Run it:     python {{this file}}            (reproduces the failure, or says it did not)
Shrink it:  python -m frontend.minify {{this file}}
"""

import base64
import io

{chr(10).join(imports)}
{HELPERS}
{_PUT}

class Repro(torch.nn.Module):
    def __init__(self):
        super().__init__()
{attributes}

{forward}


def make_inputs():
{make_inputs}


KILN_REPRO = {{
    "after": {spec.after!r},
    "backend": {spec.backend!r},
    "kind": {spec.kind!r},
    "options": {spec.options!r},
}}

if __name__ == "__main__":
    from frontend.repro import run_repro

    run_repro(Repro(), make_inputs(), **KILN_REPRO)
'''


def write_script(folder: Path, stem: str, text: str) -> Path:
    """Write `text` as a new ``<stem>_<n>.py`` in `folder`; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(10_000):
        path = folder / f"{stem}_{number}.py"
        try:
            with path.open("x") as file:
                file.write(text)
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"too many repro scripts named {stem}_N.py in {folder}")
