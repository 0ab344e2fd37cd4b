"""The progress line of long compiles: shown on a terminal after the delay, erased when done, else silent."""

from __future__ import annotations

import io
import time

import pytest
import torch

import frontend
from frontend._env import read_environment
from frontend.context import CompileContext
from frontend.progress import CompileProgress


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_line_appears_after_the_delay_and_is_erased() -> None:
    stream = Terminal()
    progress = CompileProgress("model", stream, delay=0.05, interval=0.02)
    progress.start_graph(2, 7)
    progress.enter("aotgrad")
    progress.enter("lowering")
    time.sleep(0.3)
    progress.leave()
    progress.leave()
    progress.finish_graph()
    text = stream.getvalue()
    assert "[kiln] compiling model: graph 2 of 7 so far in this process · lowering · " in text
    assert text.endswith("\r\x1b[K")  # erased when the graph is done
    shown = len(text)
    time.sleep(0.1)
    assert len(stream.getvalue()) == shown  # the redrawing thread stopped


def test_quick_graphs_show_nothing() -> None:
    stream = Terminal()
    progress = CompileProgress("model", stream, delay=5.0)
    progress.start_graph(1, 1)
    progress.finish_graph()
    assert stream.getvalue() == ""


def test_off_when_not_a_terminal_or_disabled() -> None:
    assert CompileProgress.for_stream("m", io.StringIO(), enabled=True) is None
    assert CompileProgress.for_stream("m", Terminal(), enabled=False) is None
    assert CompileProgress.for_stream("m", Terminal(), enabled=True) is not None
    assert read_environment({"KILN_PROGRESS": "0"}).progress is False
    assert read_environment({}).progress is True


def test_compile_reports_each_stage_to_the_line(monkeypatch: pytest.MonkeyPatch, fresh_cache: None) -> None:
    seen: list[str] = []
    original = CompileProgress.enter

    def enter(self: CompileProgress, stage: str) -> None:
        seen.append(stage)
        original(self, stage)

    monkeypatch.setattr(CompileProgress, "enter", enter)
    monkeypatch.setattr("sys.stderr", Terminal())
    compiled = frontend.compile(lambda x: torch.sin(x) * 2, options={"graph_cache": False})
    context: CompileContext = compiled.kiln_context
    assert context.progress is not None
    compiled(torch.randn(6))
    assert {"aotgrad", "lowering"} <= set(seen)
    assert context.progress._thread is None  # finished with the graph
