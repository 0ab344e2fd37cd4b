"""The six distributions install from their own wheels, with no package index, and run.

`test_sibling_pins_match_versions` checks that every dependency of one Kiln distribution on another
is an exact pin (``capture==X.Y.Z``) at that sibling's version, so an unrelated project that
publishes the same name can never satisfy it.

`test_wheels_install_without_an_index` builds the six wheels, installs ``frontend`` into a fresh
virtual environment with ``pip install --no-index --find-links <wheels> frontend`` (as
docs/getting-started.md shows) and runs the getting-started example there, comparing with eager.
torch and the other third-party packages come from this test environment: the fresh environment
sees them through a folder of links that leaves Kiln's own (editable) installs out, so pip has to
resolve every Kiln distribution from the wheels.
"""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Distribution folder -> import name, for every package the repository holds.
FOLDERS = {path.parent.name: path.parent.name.replace("-", "_") for path in sorted(ROOT.glob("packages/*/pyproject.toml"))}
EDITABLE_ENTRY = re.compile(
    r"^(_editable_impl_|__editable__[._])?(" + "|".join(FOLDERS.values()) + r")([-_.].*)?$"
)

EXAMPLE = '''
import sys
from pathlib import Path

import torch

import frontend

assert Path(frontend.__file__).resolve().is_relative_to(Path(sys.prefix).resolve()), frontend.__file__

def foo(x, y):
    a = torch.sin(x)
    b = torch.cos(x)
    return a + b

torch.manual_seed(0)
x, y = torch.randn(10, 10), torch.randn(10, 10)
opt_foo = frontend.compile(foo, options={"fallback_to_eager": False})
torch.testing.assert_close(opt_foo(x, y), foo(x, y))
assert opt_foo.kiln_context.graphs_compiled == 1
print("ok", frontend.__version__)
'''


def _version(folder: str) -> str:
    text = (ROOT / "packages" / folder / "src" / FOLDERS[folder] / "_version.py").read_text()
    match = re.search(r'__version__ = "([^"]+)"', text)
    assert match, f"no __version__ in {folder}'s _version.py"
    return match.group(1)


def test_sibling_pins_match_versions() -> None:
    versions = {folder: _version(folder) for folder in FOLDERS}
    for folder in FOLDERS:
        project = tomllib.loads((ROOT / "packages" / folder / "pyproject.toml").read_text())["project"]
        requirements = list(project.get("dependencies", []))
        for extra in project.get("optional-dependencies", {}).values():
            requirements += extra
        for requirement in requirements:
            name = re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0]
            if name in versions:
                assert requirement == f"{name}=={versions[name]}", (
                    f"{folder} requires {requirement!r}; siblings are pinned exactly: {name}=={versions[name]}"
                )


def _run(*command: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{' '.join(map(str, command))} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _third_party_view(target: Path) -> Path:
    """A folder linking every entry of this environment's site-packages except Kiln's own."""
    target.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        if not EDITABLE_ENTRY.match(entry.name):
            (target / entry.name).symlink_to(entry)
    return target


@pytest.mark.slow
def test_wheels_install_without_an_index(tmp_path: Path) -> None:
    pytest.importorskip("hatchling", reason="building the wheels needs hatchling (nox -s tests installs it)")
    wheels = tmp_path / "wheels"
    _run(
        sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
        "--wheel-dir", wheels, *(ROOT / "packages" / folder for folder in FOLDERS),
    )
    built = sorted(path.name for path in wheels.glob("*.whl"))
    assert [name.split("-")[0] for name in built] == sorted(name for name in FOLDERS.values()), built

    venv = tmp_path / "venv"
    # Without a pip (and setuptools) of its own: pip runs from this environment (``--python``), and
    # the fresh one sees this environment's setuptools, which torch's metadata requires.
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    new_site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    (new_site / "third_party.pth").write_text(f"{_third_party_view(tmp_path / 'third_party')}\n")

    pip = (sys.executable, "-m", "pip", "--python", python)
    _run(*pip, "install", "--quiet", "--no-index", "--find-links", wheels, "frontend", cwd=tmp_path)
    installed = _run(*pip, "list", "--path", new_site, "--format", "freeze")
    for folder in ("capture", "aotgrad", "inductor-ir", "codegen-cpp", "frontend"):
        assert f"{folder.replace('-', '_')}=={_version(folder)}" in installed.replace("-", "_"), installed

    script = tmp_path / "example.py"
    script.write_text(EXAMPLE)
    output = _run(python, script, cwd=tmp_path)
    assert output.strip() == f"ok {_version('frontend')}"
