"""Kiln's architecture check: the rules of the house that a machine can verify.

It fails (exit 1, one line per problem naming file and line) when a package's source

* imports or calls torch's own compiler (`torch._dynamo`, `torch._inductor`,
  `torch._functorch.aot_autograd`, `torch._functorch.partitioners`, `torch.compile`, `torch.export`);
* imports a sibling package that the layering forbids (capture, aotgrad and inductor_ir never import
  each other; codegen_* import only inductor_ir; frontend may import all);
* imports a sibling it does not declare as a dependency in its pyproject.toml;
* has a module longer than 800 lines.

Run it as `python tools/check_architecture.py [REPO_ROOT]`; `nox -s lint` and a test run it too.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MAX_MODULE_LINES = 800
FORBIDDEN_MODULES = (
    "torch._dynamo",
    "torch._inductor",
    "torch._functorch.aot_autograd",
    "torch._functorch.partitioners",
    "torch.export",
)
FORBIDDEN_ATTRIBUTES = ("torch.compile", "torch.export", "torch._dynamo", "torch._inductor")
# import name -> the siblings it may import at all (declaring them is checked separately).
ALLOWED_SIBLINGS: dict[str, frozenset[str]] = {
    "capture": frozenset(),
    "aotgrad": frozenset(),
    "inductor_ir": frozenset(),
    "codegen_cpp": frozenset({"inductor_ir"}),
    "codegen_triton": frozenset({"inductor_ir"}),
    "frontend": frozenset({"capture", "aotgrad", "inductor_ir", "codegen_cpp", "codegen_triton"}),
}


@dataclass(frozen=True)
class Problem:
    """One broken rule, at a place in a file."""

    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass(frozen=True)
class Package:
    """A distribution under packages/: its folder, import name and declared sibling dependencies."""

    folder: Path
    import_name: str
    declared: frozenset[str]


def _dist_to_import(dist: str) -> str:
    return dist.replace("-", "_")


def discover_packages(root: Path) -> list[Package]:
    """Every distribution under `root/packages`, read from its pyproject.toml."""
    packages = []
    for pyproject in sorted((root / "packages").glob("*/pyproject.toml")):
        meta = tomllib.loads(pyproject.read_text())["project"]
        requirements = list(meta.get("dependencies", []))
        for extra in meta.get("optional-dependencies", {}).values():
            requirements += extra
        names = {re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].strip() for req in requirements}
        declared = frozenset(_dist_to_import(n) for n in names) & set(ALLOWED_SIBLINGS)
        packages.append(Package(pyproject.parent, _dist_to_import(meta["name"]), declared))
    return packages


def _imported_modules(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _is_within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def check_module(path: Path, package: Package) -> list[Problem]:
    """The problems of one source file of `package`."""
    text = path.read_text()
    problems = []
    line_count = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if line_count > MAX_MODULE_LINES:
        problems.append(
            Problem(path, line_count, f"module has {line_count} lines (> {MAX_MODULE_LINES}); split it by concern")
        )
    tree = ast.parse(text, filename=str(path))
    for line, module in _imported_modules(tree):
        for forbidden in FORBIDDEN_MODULES:
            if _is_within(module, forbidden):
                problems.append(Problem(path, line, f"imports torch's compiler `{module}`; the compiler is ours"))
        top = module.split(".")[0]
        if top in ALLOWED_SIBLINGS and top != package.import_name:
            if top not in ALLOWED_SIBLINGS[package.import_name]:
                problems.append(
                    Problem(path, line, f"`{package.import_name}` may not import `{top}` (layering, docs/architecture.md)")
                )
            elif top not in package.declared:
                problems.append(
                    Problem(path, line, f"imports `{top}` but {package.folder.name}/pyproject.toml does not declare it")
                )
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            if dotted and any(_is_within(dotted, f) for f in FORBIDDEN_ATTRIBUTES):
                problems.append(Problem(path, node.lineno, f"uses torch's compiler `{dotted}`; the compiler is ours"))
    return list(dict.fromkeys(problems))  # one report per place and rule


def check_repository(root: Path) -> list[Problem]:
    """Every problem in every package under `root/packages`."""
    problems = []
    for package in discover_packages(root):
        for path in sorted((package.folder / "src").rglob("*.py")):
            problems += check_module(path, package)
    return problems


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    problems = check_repository(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"architecture check: {len(problems)} problem(s)")
        return 1
    print("architecture check: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
