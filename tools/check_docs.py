"""Checks that every relative Markdown link in README.md, docs/ and the packages' READMEs resolves."""

from __future__ import annotations

import re
import sys
from pathlib import Path

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def broken_links(root: Path) -> list[str]:
    """`file: target` for each relative link whose target does not exist."""
    documents = [root / "README.md", *root.glob("docs/*.md"), *root.glob("packages/*/README.md")]
    problems = []
    for document in documents:
        for target in LINK.findall(document.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (document.parent / target).exists():
                problems.append(f"{document.relative_to(root)}: broken link to {target}")
    return problems


def main() -> int:
    problems = broken_links(Path(__file__).resolve().parent.parent)
    print("\n".join(problems) or "docs: all links resolve")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
