"""The compile report as one self-contained HTML file: inline CSS and script, nothing fetched.

Layout: a summary (graphs, breaks, recompilations, fallbacks, kernels, seconds per stage), then one
collapsible section per compiled function with its graph breaks (reason, the user's line), its
recompilations (the failing guard), and per graph its frame, guards, seconds per stage, kernels,
cache hits, fallbacks and every stage's code (FX, ATen forward/backward, IR, kernels, wrapper),
highlighted. Opening the page with ``#expand-all`` clicks the first section's summary, then the
"expand all" button (the browser test uses it, as a reader would click).
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from frontend.compile_report.highlight import highlight, language_of
from frontend.compile_report.record import FunctionEntry, GraphEntry, ProcessReport
from frontend.stats import PROCESS_TIMES, STAGES

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em;color:#1d1d1f;background:#fbfbfd}
h1{font-size:1.4em} h2{font-size:1.15em;margin:1.2em 0 .4em}
table{border-collapse:collapse;margin:.4em 0} td,th{border:1px solid #ddd;padding:2px 8px;text-align:left}
th{background:#f0f0f4} td.num{text-align:right;font-variant-numeric:tabular-nums}
details{margin:.3em 0 .3em .8em;border-left:3px solid #d8d8e0;padding-left:.6em}
summary{cursor:pointer;font-weight:600} details.graph>summary{color:#2b4c9b}
pre{background:#f5f5f8;padding:.6em;overflow:auto;font:12px/1.4 ui-monospace,monospace;max-height:40em}
.k{color:#a626a4;font-weight:600}.s{color:#50a14f}.c{color:#8a8f98;font-style:italic}.n{color:#b76b01}.f{color:#4078f2}
.warn{color:#b3261e} .ok{color:#2e7d32} .where{font-family:ui-monospace,monospace;font-size:12px;color:#555}
button{margin-right:.5em}
"""

_SCRIPT = """
(function () {
  var errors = [];
  window.addEventListener('error', function (e) { errors.push(String(e.message)); document.body.dataset.errors = errors.join(' | '); });
  function setAll(open) {
    var all = document.querySelectorAll('details');
    for (var i = 0; i < all.length; i++) { all[i].open = open; }
    document.body.dataset.expanded = open ? String(all.length) : '0';
  }
  document.getElementById('expand').addEventListener('click', function () { setAll(true); });
  document.getElementById('collapse').addEventListener('click', function () { setAll(false); });
  if (location.hash === '#expand-all') {
    // What a reader does: open one section by its summary, then press "expand all".
    var first = document.querySelector('details > summary');
    if (first) { first.click(); document.body.dataset.toggled = String(first.parentElement.open); }
    document.getElementById('expand').click();
  }
  document.body.dataset.ready = 'yes';
})();
"""


def _e(text: object) -> str:
    return html.escape(str(text))


def _code(name: str, text: str) -> str:
    return f"<details><summary>{_e(name)}</summary><pre><code>{highlight(text, language_of(name, text))}</code></pre></details>"


def _table(header: Iterable[str], rows: Iterable[Iterable[object]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f'<td class="num">{v:.4f}</td>' if isinstance(v, float) else f"<td>{_e(v)}</td>" for v in row) + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


_FILE_ORDER = ("fx_graph.py", "aten_forward.py", "aten_backward.py")


def _ordered_files(files: dict[str, str]) -> list[str]:
    """Stage order: FX graph, ATen graphs, then forward/ and backward/ (IR, groups, kernels, wrapper)."""
    def key(name: str) -> tuple[int, str]:
        if name in _FILE_ORDER:
            return _FILE_ORDER.index(name), name
        rank = {"ir.txt": 0, "groups.txt": 1, "wrapper.py": 3}.get(name.rsplit("/", 1)[-1], 2)
        side = 10 if name.startswith("forward/") else 20
        return side + rank, name

    return sorted((name for name in files if name not in ("timings.json", "guards.txt")), key=key)


def _graph(graph: GraphEntry) -> str:
    parts = [f"<p>backend <b>{_e(graph.backend)}</b>, {graph.ops} ops"]
    if graph.frame:
        parts.append(f' · frame <span class="where">{_e(graph.frame)}</span>')
    parts.append(f" · {len(graph.kernels)} kernel(s)")
    if graph.libraries:
        parts.append(f" · {graph.cache_hits} of {graph.libraries} compiled libraries from the cache")
    for stage, (hits, misses) in graph.graph_cache.items():
        parts.append(f" · graph cache ({_e(stage)}): {hits} hit(s), {misses} miss(es)")
    parts.append("</p>")
    if graph.error:
        parts.append(f'<p class="warn">the backend raised: {_e(graph.error)}</p>')
    for message in graph.fallbacks:
        parts.append(f'<p class="warn">fallback: {_e(message)}</p>')
    if graph.seconds:
        parts.append(_table(("stage", "seconds"), ((s, graph.seconds[s]) for s in _stage_order(graph.seconds))))
    guards = "\n".join(graph.guards) or "(none)"
    parts.append(f"<details><summary>guards ({len(graph.guards)})</summary><pre>{_e(guards)}</pre></details>")
    if graph.kernels:
        rows = ((name, device, ops) for name, device, ops in graph.kernels)
        parts.append(f"<details><summary>kernels ({len(graph.kernels)})</summary>{_table(('kernel', 'device', 'fused ATen ops'), rows)}</details>")
    for name in _ordered_files(graph.files):
        parts.append(_code(name, graph.files[name]))
    title = f"graph {graph.number}: {len(graph.kernels)} kernel(s), {sum(graph.seconds.values()):.3f} s"
    if graph.fallbacks or graph.error:
        title += " · runs eagerly in part" if graph.fallbacks else " · failed"
    return f'<details class="graph"><summary>{_e(title)}</summary>{"".join(parts)}</details>'


def _stage_order(seconds: dict[str, float]) -> list[str]:
    return [s for s in STAGES if s in seconds] + sorted(set(seconds) - set(STAGES))


def _function(function: FunctionEntry) -> str:
    parts: list[str] = []
    if function.breaks:
        items = "".join(
            f'<li>{_e(b.message)}<br><span class="where">{_e(b.location or "(location unknown)")}</span></li>'
            for b in function.breaks
        )
        parts.append(f"<details class=\"breaks\"><summary>graph breaks ({len(function.breaks)})</summary><ol>{items}</ol></details>")
    if function.recompiles:
        items = "".join(
            f'<li>{_e(r.message)}<br><span class="where">{_e(r.location)}</span></li>' for r in function.recompiles
        )
        parts.append(f"<details class=\"recompiles\"><summary>recompilations ({len(function.recompiles)})</summary><ol>{items}</ol></details>")
    for message in function.messages:
        parts.append(f'<p class="warn">{_e(message)}</p>')
    parts += [_graph(graph) for graph in function.graphs]
    title = (
        f"{function.label}: {len(function.graphs)} graph(s), {len(function.breaks)} graph break(s), "
        f"{len(function.recompiles)} recompilation(s)"
    )
    return f'<details class="function"><summary>{_e(title)}</summary>{"".join(parts)}</details>'


def render(report: ProcessReport) -> str:
    """The whole report as HTML text."""
    functions = list(report.functions.values())
    graphs = [g for f in functions for g in f.graphs]
    totals = [
        ("compiled functions", len(functions)),
        ("graphs", len(graphs)),
        ("graph breaks", sum(len(f.breaks) for f in functions)),
        ("recompilations", sum(len(f.recompiles) for f in functions)),
        ("kernels", sum(len(g.kernels) for g in graphs)),
        ("compiled libraries (from cache)", f"{sum(g.libraries for g in graphs)} ({sum(g.cache_hits for g in graphs)})"),
        ("fallbacks to eager", sum(len(g.fallbacks) for g in graphs)),
    ]
    stages = PROCESS_TIMES.as_dict()
    body = [
        f"<h1>{_e(report.title())}</h1>",
        '<p><button id="expand">expand all</button><button id="collapse">collapse all</button></p>',
        "<h2>Summary</h2>",
        _table(("what", "count"), totals),
        "<h2>Seconds per stage (whole process)</h2>",
        _table(("stage", "seconds"), [(name, seconds) for name, seconds in stages.items() if seconds or name in STAGES]),
        "<h2>Compiled functions</h2>",
        "".join(_function(f) for f in functions) or "<p>nothing was compiled</p>",
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(report.title())}</title><style>{_CSS}</style></head>"
        f"<body>{''.join(body)}<script>{_SCRIPT}</script></body></html>\n"
    )
