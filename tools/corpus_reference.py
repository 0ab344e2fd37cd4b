"""Writes TorchDynamo's graph counts for every capture-corpus program: the reference capture is measured against.

Runs each program of packages/capture/tests/corpus under `torch._dynamo.explain` (allowed here: this is a
tool, and Dynamo is the reference, never part of a package) and writes
packages/capture/tests/corpus/reference.json:

    {"torch": "2.13.0", "python": "3.11", "programs": {
        "<feature>.<name>": {"graph_count": 1, "graph_break_count": 0, "op_count": 5, "break_reasons": []},
        ...}}

`op_count` is the number of call nodes over all of Dynamo's graphs. A program that Dynamo itself cannot run
is recorded with "error" and is left out of the comparison. Each program is also run eagerly twice to check
that it is deterministic (exit status 1 names those that are not). Run it after adding or changing programs:

    python3 tools/corpus_reference.py            # every program
    python3 tools/corpus_reference.py closures.  # only programs whose name starts with a prefix, merged in
"""

from __future__ import annotations

import importlib.util
import json
import platform
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
import torch._dynamo
import torch.utils._pytree as pytree

ROOT = Path(__file__).resolve().parent.parent
CORPUS_DIR = ROOT / "packages" / "capture" / "tests" / "corpus"
REFERENCE_PATH = CORPUS_DIR / "reference.json"
INPUT_SEED = 0
BUILD_SEED = 1
MAX_REASON_CHARS = 160


def load_corpus() -> ModuleType:
    """Import the corpus package from its folder (the tests folder is not on sys.path)."""
    name = "kiln_capture_corpus"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, CORPUS_DIR / "__init__.py", submodule_search_locations=[str(CORPUS_DIR)]
    )
    assert spec is not None and spec.loader is not None
    corpus = importlib.util.module_from_spec(spec)
    sys.modules[name] = corpus
    spec.loader.exec_module(corpus)
    return corpus


def _op_count(graphs: list[torch.fx.GraphModule]) -> int:
    """Call nodes over all graphs, less Dynamo's ndarray/tensor conversions (capture's graphs have none)."""
    return sum(1 for gm in graphs for node in gm.graph.nodes if node.op.startswith("call") and
               not _numpy_conversion(node))


def _numpy_conversion(node: torch.fx.Node) -> bool:
    """Dynamo's node for `Tensor.numpy()` (`t.view_as(t)`) or for `torch.from_numpy`/`as_tensor` of an ndarray
    it traced (the argument is one of its NumPy nodes)."""
    if node.op == "call_method" and node.target == "view_as" and len(node.args) == 2 and node.args[0] is node.args[1]:
        return True
    if node.op == "call_function" and node.target in (torch.as_tensor, torch.from_numpy) and node.args and \
            isinstance(node.args[0], torch.fx.Node):
        return _numpy_node(node.args[0])
    return False


def _numpy_node(node: torch.fx.Node) -> bool:
    target = str(node.target)
    return target.startswith("<Wrapped") or "numpy_attr_wrapper" in target or (
        node.op == "call_method" and node.target == "view_as" and len(node.args) == 2 and node.args[0] is node.args[1])


def is_deterministic(program: Any) -> bool:
    """Two eager runs on fresh builds and fresh inputs of the same seed agree (the eager comparison needs it)."""
    results = []
    for _ in range(2):
        torch.manual_seed(INPUT_SEED)
        inputs = program.make_inputs()
        torch.manual_seed(BUILD_SEED)
        results.append((program.build()(*inputs), inputs))
    first, second = (
        [leaf for leaf in pytree.tree_leaves(r) if isinstance(leaf, torch.Tensor)] for r in results
    )
    try:
        torch.testing.assert_close(first, second, equal_nan=True)
    except AssertionError:
        return False
    return True


def reference_for(program: Any) -> dict[str, Any]:
    """TorchDynamo's graph count, break count, op count and break reasons for one corpus program."""
    torch._dynamo.reset()
    torch.manual_seed(INPUT_SEED)
    inputs = program.make_inputs()
    torch.manual_seed(BUILD_SEED)
    target = program.build()
    try:
        result = torch._dynamo.explain(target)(*inputs)
    except Exception as error:  # Dynamo's own failure: recorded, excluded from the comparison
        return {"error": f"{type(error).__name__}: {error}"[:MAX_REASON_CHARS]}
    reasons = [str(reason.reason).splitlines()[0][:MAX_REASON_CHARS] for reason in result.break_reasons]
    return {
        "graph_count": result.graph_count,
        # explain reports -1 breaks when it compiled nothing (the frame ran in eager); stored as 0.
        "graph_break_count": max(result.graph_break_count, 0),
        "op_count": _op_count(result.graphs),
        "break_reasons": reasons,
    }


def main(argv: list[str]) -> int:
    """Regenerate reference.json for every program, or merge in the programs matching argv's prefixes."""
    warnings.filterwarnings("ignore")
    corpus = load_corpus()
    prefixes = argv[1:]
    previous: dict[str, Any] = {}
    if prefixes and REFERENCE_PATH.exists():
        previous = json.loads(REFERENCE_PATH.read_text())["programs"]
    programs = dict(previous)
    nondeterministic = []
    for name, program in sorted(corpus.PROGRAMS.items()):
        if prefixes and not name.startswith(tuple(prefixes)):
            continue
        if not is_deterministic(program):
            nondeterministic.append(name)
        programs[name] = reference_for(program)
        entry = programs[name]
        print(
            f"{name:60s} {entry.get('graph_count', '-')!s:>3} graphs {entry.get('graph_break_count', '-')!s:>3} breaks"
            f"{'  ERROR ' + entry['error'] if 'error' in entry else ''}"
        )
    programs = {name: programs[name] for name in sorted(programs) if name in corpus.PROGRAMS}
    document = {
        "torch": torch.__version__.split("+")[0],
        "python": ".".join(platform.python_version_tuple()[:2]),
        "programs": programs,
    }
    REFERENCE_PATH.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n")
    errors = sum(1 for entry in programs.values() if "error" in entry)
    print(f"wrote {REFERENCE_PATH.relative_to(ROOT)}: {len(programs)} programs, {errors} Dynamo errors")
    if nondeterministic:
        print(f"NOT DETERMINISTIC in eager (fix these programs): {nondeterministic}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
