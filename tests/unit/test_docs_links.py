"""Every relative link in README.md and docs/*.md points at a file (and heading) that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)|^\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
_CODE_SPAN = re.compile(r"`[^`\n]*`")


def _prose(text: str) -> str:
    """The text outside fenced code blocks and inline code, where links are links."""
    kept, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            kept.append(_CODE_SPAN.sub("", line))
    return "\n".join(kept)


def anchors(text: str) -> set[str]:
    """GitHub's anchors for the headings of a page: lower case, punctuation dropped, spaces as dashes."""
    found = set()
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def links(page: Path) -> list[str]:
    return [a or b for a, b in _LINK.findall(_prose(page.read_text(encoding="utf-8")))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text(encoding="utf-8")):
            broken.append(f"{target} (no heading with that anchor in {file.name})")
    assert not broken, f"broken links in {page.relative_to(ROOT)}: {broken}"


def test_anchors_follow_githubs_rules() -> None:
    text = "# Design notes\n## The router core: a pipeline of stages\n```\n# not a heading\n```\n## `kind: flowise`"
    assert anchors(text) == {"design-notes", "the-router-core-a-pipeline-of-stages", "kind-flowise"}


def test_finds_inline_and_reference_links_but_not_code(tmp_path: Path) -> None:
    page = tmp_path / "sample.md"
    page.write_text("See [a](a.md#x) and `[b](b.md)`.\n```\n[c](c.md)\n```\n[d]: d.md\n", encoding="utf-8")
    assert links(page) == ["a.md#x", "d.md"]
