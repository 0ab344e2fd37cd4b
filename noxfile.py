"""Kiln's one noxfile: every session for every package lives here.

Sessions:
  tests              one venv, all six packages installed editable, pytest over every package (CPU;
                     Triton kernels run under TRITON_INTERPRET=1)
  tests-<package>    the same, for one package's tests
  tests-py312        capture's tests (and corpus) under Python 3.12 (installs torch's large build; not in CI);
  tests-py313        the same under Python 3.13. With pyenv, make the interpreter visible first:
                     `PYENV_VERSION=3.11.7:3.13.0 nox -s tests-py313`
  lint               ruff and the architecture check (tools/check_architecture.py)
  typecheck          mypy, one run per package
  build              wheels of all six distributions into dist/
  demo               the main job: compiles real models and prints what it did and how fast
  bench              eager vs torch.compile vs Kiln, side by side (tools/bench/)
  fuzz               the differential fuzzer (tools/fuzz/): random programs, eager vs Kiln
  zoo                80+ real architectures through capture, next to TorchDynamo (tools/zoo/)
  opinfo             strict OpInfo sweep through frontend.compile (tools/opinfo_strict.py): every op, eager vs Kiln
  docs               checks that docs/ links resolve
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

ROOT = Path(__file__).parent
# Distribution folder -> import name, in dependency order (siblings first).
PACKAGES: dict[str, str] = {
    "capture": "capture",
    "aotgrad": "aotgrad",
    "inductor-ir": "inductor_ir",
    "codegen-cpp": "codegen_cpp",
    "codegen-triton": "codegen_triton",
    "frontend": "frontend",
}
# torch is installed on its own first: a pinned version resolves to a local CPU wheel where one
# exists, instead of the registry's multi-GB CUDA build. KILN_TORCH overrides the requirement.
TORCH_REQUIREMENT = os.environ.get("KILN_TORCH", "torch==2.13.0")
TRITON_REQUIREMENT = os.environ.get("KILN_TRITON", "triton==3.6.0")
TEST_REQUIREMENTS = ["pytest>=8", "pytest-xdist>=3", "hatchling>=1.18", "numpy", "scipy", "transformers>=4.40", "expecttest", "matplotlib"]

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True


def _install_kiln(session: nox.Session, *extra: str) -> None:
    """Install torch, triton and all six packages editable into the session's venv."""
    session.install(TORCH_REQUIREMENT, TRITON_REQUIREMENT)
    editable: list[str] = []
    for folder in PACKAGES:
        editable += ["-e", str(ROOT / "packages" / folder)]
    session.install(*editable, *extra)


def _pytest(session: nox.Session, paths: list[str]) -> None:
    env = {"TRITON_INTERPRET": "1", "PYTHONHASHSEED": "0"}
    args = session.posargs or ["-n", "2", "--dist", "loadfile"]
    session.run("pytest", *paths, *args, env=env)


@nox.session
def tests(session: nox.Session) -> None:
    """Every package's tests and the repository's own, in one venv (CPU)."""
    _install_kiln(session, *TEST_REQUIREMENTS)
    _pytest(session, [f"packages/{folder}/tests" for folder in PACKAGES] + ["tests"])


def _package_tests(folder: str) -> None:
    @nox.session(name=f"tests-{folder}")
    def package_tests(session: nox.Session) -> None:
        _install_kiln(session, *TEST_REQUIREMENTS)
        _pytest(session, [f"packages/{folder}/tests"])

    package_tests.__doc__ = f"The tests of the `{folder}` package alone."


for _folder in PACKAGES:
    _package_tests(_folder)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the whole tree, then the architecture check."""
    session.install("ruff>=0.5")
    session.run("ruff", "check", ".")
    session.run("python", "tools/check_architecture.py")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy, once per package, against its own sources."""
    _install_kiln(session, "mypy>=1.10")
    for folder, name in PACKAGES.items():
        session.run("mypy", "-p", name, env={"MYPYPATH": str(ROOT / "packages" / folder / "src")})


@nox.session
def build(session: nox.Session) -> None:
    """Wheels and sdists of all six distributions into dist/."""
    session.install("build>=1.0", "hatchling>=1.18")
    for folder in PACKAGES:
        session.run("python", "-m", "build", "--outdir", str(ROOT / "dist"), str(ROOT / "packages" / folder))


@nox.session
def demo(session: nox.Session) -> None:
    """The main job: compile real models on the CPU (and a GPU when present) and report."""
    _install_kiln(session, "transformers>=4.40", "numpy")
    session.run("python", "tools/demo.py", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """eager vs torch.compile vs Kiln, side by side; pass --quick for the short subset."""
    _install_kiln(session, "transformers>=4.40", "numpy", "matplotlib")
    session.run("python", "-m", "tools.bench", *session.posargs)


def _versioned_capture_tests(version: str) -> None:
    """capture's tests under another Python than the default session's, as `tests-py3NN`."""
    name = f"tests-py{version.replace('.', '')}"

    @nox.session(name=name, python=version, default=False)
    def versioned_tests(session: nox.Session) -> None:
        session.install(os.environ.get(f"KILN_TORCH_PY{version.replace('.', '')}", "torch"))
        session.install("-e", str(ROOT / "packages" / "capture"), "pytest>=8", "pytest-xdist>=3", "numpy", "scipy",
                        "expecttest", "transformers>=4.40")
        _pytest(session, ["packages/capture/tests"])

    versioned_tests.__doc__ = f"capture's tests and corpus under Python {version} (the registry's large torch build; not in CI)."


for _version in ("3.12", "3.13"):
    _versioned_capture_tests(_version)


@nox.session
def fuzz(session: nox.Session) -> None:
    """Differential fuzzing, e.g. `nox -s fuzz -- --programs 2000 --seed 7 --targets cpp,triton`."""
    _install_kiln(session, "numpy")
    args = session.posargs or ["--programs", "500", "--seed", "0"]
    session.run("python", "-m", "tools.fuzz", *args, env={"TRITON_INTERPRET": "1", "PYTHONHASHSEED": "0"})


@nox.session
def zoo(session: nox.Session) -> None:
    """Real architectures through capture next to TorchDynamo (tools/zoo/), e.g. `nox -s zoo -- --slice`."""
    _install_kiln(session, "transformers>=5", "numpy")
    session.run("python", "-m", "tools.zoo", *session.posargs, env={"PYTHONHASHSEED": "0"})


@nox.session
def opinfo(session: nox.Session) -> None:
    """Every OpInfo op compiled strictly (no eager fallback, no graph break) and compared with eager,
    e.g. `nox -s opinfo -- --jobs 4 --json opinfo.json` (a CI-sized slice runs in tests/)."""
    _install_kiln(session, "numpy", "expecttest")
    args = session.posargs or ["--jobs", str(os.cpu_count() or 1)]
    session.run("python", "tools/opinfo_strict.py", *args, env={"TRITON_INTERPRET": "1", "PYTHONHASHSEED": "0"})


@nox.session
def docs(session: nox.Session) -> None:
    """Checks that every relative link in docs/ and the READMEs points at a file that exists."""
    session.run("python", "tools/check_docs.py", external=True)
