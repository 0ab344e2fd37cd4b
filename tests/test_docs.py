"""Every ```python block in docs/*.md runs, and prints what the doc shows after it.

The blocks of one page run in order in one namespace, as a reader pasting them one after another
would (a later block may use names an earlier one defined). Two HTML comments, invisible in the
rendered page, steer the test; each goes on the line just before a fence:

* ``<!-- docs-test: skip (reason) -->`` before a ```python block: not run (it needs a GPU, or is a
  fragment that names things the page does not define). Keep these few.
* ``<!-- docs-test: output -->`` before a plain ``` block right after a ```python block: that block
  is the exact output the python block prints (``...`` alone on a line stands for any number of
  lines, inside a line for any text).
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

import frontend

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<info>[^`]*)$")
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<what>skip|output)\b(?P<why>.*?)-->\s*$")


@dataclass
class Block:
    """One fenced block: its language, first line number, text and the marker before it."""

    info: str
    line: int
    text: str
    marker: str = ""
    reason: str = ""


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of `page`, dedented by their fence's indentation."""
    lines = page.read_text().splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, info = opening["indent"], opening["info"].strip()
        body: list[str] = []
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            body.append(lines[end][len(indent):] if lines[end].startswith(indent) else lines[end].lstrip())
            end += 1
        previous = lines[index - 1] if index else ""
        marker = MARKER.match(previous)
        found.append(Block(info, index + 1, "\n".join(body) + "\n", marker["what"] if marker else "",
                           marker["why"].strip(" ()") if marker else ""))
        index = end + 1
    return found


def _line_pattern(line: str) -> str:
    if line.strip() == "...":
        return ".*"  # any number of lines
    return ".*?".join(re.escape(part) for part in line.rstrip().split("..."))  # any text within the line


def _matches(expected: str, actual: str) -> bool:
    pattern = "\n".join(_line_pattern(line) for line in expected.splitlines())
    actual = "\n".join(line.rstrip() for line in actual.rstrip("\n").splitlines())
    return re.fullmatch(pattern, actual, flags=re.DOTALL) is not None


PAGES = [page for page in DOCS if any(block.info == "python" for block in blocks(page))]


def test_markers_are_used_sparingly() -> None:
    every = [block for page in DOCS for block in blocks(page) if block.info == "python"]
    skipped = [block for block in every if block.marker == "skip"]
    assert all(block.reason for block in skipped), "every skipped block says why"
    assert len(skipped) * 3 <= len(every), f"{len(skipped)} of {len(every)} python blocks are skipped"


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_python_blocks_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # A cache folder of its own, as on a new machine: graphs cached by other tests would make the
    # pages' outputs (kernel counts, the report's code sections) depend on test order.
    monkeypatch.setattr(frontend.config, "cache_dir", tmp_path / "kiln_cache")
    frontend.reset()
    torch.manual_seed(0)
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    page_blocks = blocks(page)
    for position, block in enumerate(page_blocks):
        if block.info != "python" or block.marker == "skip":
            continue
        printed = io.StringIO()
        where = f"{page.relative_to(ROOT)}:{block.line}"
        source = tmp_path / f"{page.stem}_line{block.line}.py"  # a real file: tracebacks show its lines
        source.write_text(block.text)
        with contextlib.redirect_stdout(printed):
            try:
                exec(compile(block.text, str(source), "exec"), namespace)
            except Exception as error:
                raise AssertionError(f"the block at {where} raised {type(error).__name__}: {error}") from error
        following = page_blocks[position + 1] if position + 1 < len(page_blocks) else None
        if following is not None and following.marker == "output":
            assert _matches(following.text, printed.getvalue()), (
                f"the block at {where} printed:\n{printed.getvalue()}\nthe doc shows (line {following.line}):\n"
                f"{following.text}"
            )
