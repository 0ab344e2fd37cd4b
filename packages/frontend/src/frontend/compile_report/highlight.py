"""Syntax highlighting for the report's code listings: Python (FX, ATen, wrappers, Triton) and C++.

One regular expression finds comments, strings, numbers and words; keywords and a few well-known
names get a CSS class, everything is HTML-escaped. No external library: the report is one file.
"""

from __future__ import annotations

import html
import re

PYTHON_KEYWORDS = frozenset(
    "and as assert async await break class continue def del elif else except False finally for from global "
    "if import in is lambda None nonlocal not or pass raise return True try while with yield".split()
)
CPP_KEYWORDS = frozenset(
    "auto bool break case char const constexpr continue default do double else extern float for if inline "
    "int int64_t int32_t long namespace nullptr return signed sizeof static struct template typename "
    "uint8_t unsigned using void while #include #pragma".split()
)

_PYTHON = re.compile(
    r"(?P<comment>#[^\n]*)"
    r"|(?P<string>'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\"|'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\")"
    r"|(?P<number>\b\d+(?:\.\d*)?(?:e[+-]?\d+)?\b)"
    r"|(?P<word>[A-Za-z_][A-Za-z_0-9]*)"
)
_CPP = re.compile(
    r"(?P<comment>//[^\n]*|/\*[\s\S]*?\*/)"
    r"|(?P<string>\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*')"
    r"|(?P<number>\b\d+(?:\.\d*)?(?:[eE][+-]?\d+)?[fFlLuU]*\b)"
    r"|(?P<word>#?[A-Za-z_][A-Za-z_0-9]*)"
)


def language_of(name: str, text: str) -> str:
    """"cpp" or "python" for an artifact named `name` (kernels are C++ when they look like it)."""
    if name.endswith((".cpp", ".cc", ".h")):
        return "cpp"
    if name.endswith(".py"):
        return "python"
    head = text[:2000]
    return "cpp" if ("#include" in head or 'extern "C"' in head or "#pragma" in head) else "python"


def highlight(text: str, language: str) -> str:
    """`text` as HTML with ``<span class="k|s|c|n|f">`` around keywords, strings, comments, numbers, ops."""
    pattern, keywords = (_CPP, CPP_KEYWORDS) if language == "cpp" else (_PYTHON, PYTHON_KEYWORDS)
    out: list[str] = []
    position = 0
    for match in pattern.finditer(text):
        out.append(html.escape(text[position : match.start()]))
        token = html.escape(match.group())
        kind = match.lastgroup
        if kind == "comment":
            out.append(f'<span class="c">{token}</span>')
        elif kind == "string":
            out.append(f'<span class="s">{token}</span>')
        elif kind == "number":
            out.append(f'<span class="n">{token}</span>')
        elif match.group() in keywords:
            out.append(f'<span class="k">{token}</span>')
        elif match.group() in ("aten", "torch", "ops", "tl", "triton"):
            out.append(f'<span class="f">{token}</span>')
        else:
            out.append(token)
        position = match.end()
    out.append(html.escape(text[position:]))
    return "".join(out)
