"""The architecture check passes on the repository and fails on planted violations."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load_checker():
    spec = importlib.util.spec_from_file_location("check_architecture", ROOT / "tools" / "check_architecture.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def checker():
    return _load_checker()


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """A copy of the packages' metadata and sources, to plant violations in."""
    for pyproject in (ROOT / "packages").glob("*/pyproject.toml"):
        folder = pyproject.parent
        target = tmp_path / "packages" / folder.name
        shutil.copytree(folder / "src", target / "src")
        shutil.copy(pyproject, target / "pyproject.toml")
    return tmp_path


def test_repository_passes(checker) -> None:
    problems = checker.check_repository(ROOT)
    assert problems == [], "\n".join(map(str, problems))


@pytest.mark.parametrize(
    "source",
    [
        "import torch._dynamo\n",
        "from torch._inductor import config\n",
        "from torch._functorch.aot_autograd import aot_function\n",
        "from torch._functorch import partitioners\n",
        "import torch\nf = torch.compile(lambda x: x)\n",
        "import torch\nep = torch.export.export\n",
    ],
)
def test_planted_torch_compiler_use_fails(checker, repo_copy: Path, source: str) -> None:
    planted = repo_copy / "packages" / "aotgrad" / "src" / "aotgrad" / "planted.py"
    planted.write_text("x = 1\n" + source)
    problems = checker.check_repository(repo_copy)
    assert problems, source
    assert all(p.path == planted for p in problems)
    assert any(p.line >= 2 and "compiler is ours" in p.message for p in problems)


def test_planted_layering_violation_fails(checker, repo_copy: Path) -> None:
    planted = repo_copy / "packages" / "capture" / "src" / "capture" / "planted.py"
    planted.write_text("import inductor_ir\n")
    (problem,) = checker.check_repository(repo_copy)
    assert problem.path == planted and problem.line == 1
    assert "may not import `inductor_ir`" in problem.message


def test_codegen_may_not_import_capture(checker, repo_copy: Path) -> None:
    planted = repo_copy / "packages" / "codegen-cpp" / "src" / "codegen_cpp" / "planted.py"
    planted.write_text("from capture import optimize\n")
    (problem,) = checker.check_repository(repo_copy)
    assert "may not import `capture`" in problem.message


def test_undeclared_sibling_fails(checker, repo_copy: Path) -> None:
    pyproject = repo_copy / "packages" / "codegen-cpp" / "pyproject.toml"
    pyproject.write_text(re.sub(r'"inductor-ir[^"]*",', "", pyproject.read_text()))
    planted = repo_copy / "packages" / "codegen-cpp" / "src" / "codegen_cpp" / "planted.py"
    planted.write_text("import inductor_ir\n")
    problems = [p for p in checker.check_repository(repo_copy) if p.path == planted]
    assert len(problems) == 1 and "does not declare it" in problems[0].message


def test_planted_801_line_module_fails(checker, repo_copy: Path) -> None:
    planted = repo_copy / "packages" / "frontend" / "src" / "frontend" / "planted.py"
    planted.write_text("x = 1\n" * 801)
    (problem,) = checker.check_repository(repo_copy)
    assert problem.path == planted and "801 lines" in problem.message


def test_800_line_module_passes(checker, repo_copy: Path) -> None:
    planted = repo_copy / "packages" / "frontend" / "src" / "frontend" / "planted.py"
    planted.write_text("x = 1\n" * 800)
    assert checker.check_repository(repo_copy) == []


def test_planted_import_cycle_fails(checker, repo_copy: Path) -> None:
    folder = repo_copy / "packages" / "aotgrad" / "src" / "aotgrad"
    (folder / "planted_a.py").write_text("from aotgrad import planted_b\n")
    (folder / "planted_b.py").write_text("x = 1\nfrom aotgrad.planted_a import *\n")
    (problem,) = checker.check_repository(repo_copy)
    assert problem.path == folder / "planted_a.py" and problem.line == 1
    assert "import cycle: aotgrad.planted_a -> aotgrad.planted_b -> aotgrad.planted_a" in problem.message


def test_type_checking_and_function_level_imports_make_no_cycle(checker, repo_copy: Path) -> None:
    folder = repo_copy / "packages" / "aotgrad" / "src" / "aotgrad"
    (folder / "planted_a.py").write_text("from aotgrad import planted_b\n")
    (folder / "planted_b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from aotgrad import planted_a\n"
        "def f():\n    from aotgrad import planted_a\n"
    )
    assert checker.check_repository(repo_copy) == []



def test_function_level_import_of_own_module_fails_where_enforced(checker, repo_copy: Path, monkeypatch) -> None:
    monkeypatch.setattr(checker, "NO_FUNCTION_LEVEL_IMPORTS", frozenset({"aotgrad"}))
    planted = repo_copy / "packages" / "aotgrad" / "src" / "aotgrad" / "planted.py"
    planted.write_text("import numpy\n\n\ndef f():\n    import torch\n    from aotgrad import errors\n")
    (problem,) = checker.check_repository(repo_copy)
    assert problem.path == planted and problem.line == 6
    assert "imports `aotgrad.errors` inside a function" in problem.message
