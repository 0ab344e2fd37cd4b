"""Kiln's architecture check: the rules of the house that a machine can verify.

It fails (exit 1, one line per problem naming file and line) when a package's source

* imports or calls torch's own compiler (`torch._dynamo`, `torch._inductor`,
  `torch._functorch.aot_autograd`, `torch._functorch.partitioners`, `torch.compile`, `torch.export`);
* imports a sibling package that the layering forbids (capture, aotgrad and inductor_ir never import
  each other; codegen_* import only inductor_ir; frontend may import all);
* imports a sibling it does not declare as a dependency in its pyproject.toml;
* has a module longer than 800 lines;
* has an import cycle among its own modules (module-level imports count; imports under
  `if TYPE_CHECKING:` and inside functions do not);
* imports one of its own modules inside a function, in a package listed in
  `NO_FUNCTION_LEVEL_IMPORTS` (a function-level import hides a cycle; only optional third-party
  dependencies are imported there).

Run it as `python tools/check_architecture.py [REPO_ROOT]`; `nox -s lint` and a test run it too.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterator, Sequence
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
# Packages whose modules import their own modules at module level only.
NO_FUNCTION_LEVEL_IMPORTS: frozenset[str] = frozenset({"capture"})


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


@dataclass(frozen=True)
class OwnImport:
    """An import of one of the package's own modules: where it is and whether it runs at import time."""

    path: Path
    line: int
    importer: str
    imported: str
    in_function: bool


def _module_names(package: Package) -> dict[str, Path]:
    """Dotted module name -> file, for every module of `package` (a package is its `__init__.py`)."""
    src = package.folder / "src"
    names = {}
    for path in sorted((src / package.import_name).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_statements(body: Sequence[ast.AST], in_function: bool = False) -> Iterator[tuple[ast.stmt, bool]]:
    """Every import statement under `body`, and whether it sits inside a function; those under
    `if TYPE_CHECKING:` are left out (they never run)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, in_function
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _import_statements(node.body, True)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _import_statements(node.orelse, in_function)
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                children = getattr(node, field, None)
                if isinstance(children, list):
                    yield from _import_statements(children, in_function)


def _imported_own_modules(node: ast.stmt, importer: str, is_package: bool, modules: dict[str, Path]) -> list[str]:
    """The package's own modules an import statement loads: `from a.b import c` loads `a.b.c` when that
    is a module, else `a.b` (parent packages' `__init__` are not counted)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in modules]
    assert isinstance(node, ast.ImportFrom)
    base = node.module or ""
    if node.level:
        parts = importer.split(".") if is_package else importer.split(".")[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
    found = []
    for alias in node.names:
        if f"{base}.{alias.name}" in modules:
            found.append(f"{base}.{alias.name}")
        elif base in modules:
            found.append(base)
    return list(dict.fromkeys(found))


def own_imports(package: Package) -> list[OwnImport]:
    """Every import of a module of `package` by a module of `package`."""
    modules = _module_names(package)
    found = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node, in_function in _import_statements(tree.body):
            for imported in _imported_own_modules(node, name, path.name == "__init__.py", modules):
                if imported != name:
                    found.append(OwnImport(path, node.lineno, name, imported, in_function))
    return found


def import_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a list of modules, the first repeated at the end) per strongly connected component."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's algorithm; import graphs are shallow enough to recurse
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(edges.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return [_cycle_within(set(component), edges) for component in components]


def _cycle_within(component: set[str], edges: dict[str, set[str]]) -> list[str]:
    """A shortest cycle through the first module of `component`, by breadth-first search."""
    start = min(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for target in sorted(edges.get(module, set()) & component):
                if target == start:
                    path = [module]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if target not in came_from:
                    came_from[target] = module
                    following.append(target)
        frontier = following
    return [start, start]


def check_imports(package: Package) -> list[Problem]:
    """Import cycles inside `package`, and its function-level imports of its own modules."""
    imports = own_imports(package)
    edges: dict[str, set[str]] = {}
    first_line: dict[tuple[str, str], OwnImport] = {}
    problems = []
    for item in imports:
        if item.in_function:
            if package.import_name in NO_FUNCTION_LEVEL_IMPORTS:
                problems.append(Problem(item.path, item.line, f"imports `{item.imported}` inside a function; "
                                        "import it at module level (break a cycle by layering, a protocol or a registry)"))
            continue
        edges.setdefault(item.importer, set()).add(item.imported)
        first_line.setdefault((item.importer, item.imported), item)
    for cycle in import_cycles(edges):
        where = first_line[(cycle[0], cycle[1])]
        problems.append(Problem(where.path, where.line, "import cycle: " + " -> ".join(cycle)))
    return problems


def check_repository(root: Path) -> list[Problem]:
    """Every problem in every package under `root/packages`."""
    problems = []
    for package in discover_packages(root):
        for path in sorted((package.folder / "src").rglob("*.py")):
            problems += check_module(path, package)
        problems += check_imports(package)
    return problems


def function_level_import_counts(root: Path) -> dict[str, int]:
    """How many function-level imports of its own modules each package has (reported, not failed, where
    `NO_FUNCTION_LEVEL_IMPORTS` does not list the package)."""
    return {package.import_name: sum(item.in_function for item in own_imports(package))
            for package in discover_packages(root)}


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    problems = check_repository(root)
    for problem in problems:
        print(problem)
    for name, count in function_level_import_counts(root).items():
        if count and name not in NO_FUNCTION_LEVEL_IMPORTS:
            print(f"note: {name} imports its own modules inside functions {count} time(s)")
    if problems:
        print(f"architecture check: {len(problems)} problem(s)")
        return 1
    print("architecture check: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
