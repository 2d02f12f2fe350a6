"""The README stays short and navigable, and no link in it or in docs/ points nowhere.

Checked: the README is at most 500 lines; its Contents links every `##` heading; every
relative link in README.md and docs/*.md names an existing file and, with `#anchor`, a
heading of that file (GitHub's anchor rules: lower case, punctuation dropped, spaces to
hyphens, `-1`, `-2` for repeats). Links inside code blocks and code spans are not links.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)


def _prose(text: str) -> str:
    """The text without fenced code blocks and code spans."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def _headings(text: str, level: str | None = None) -> list[tuple[str, str]]:
    """(hashes, title) of every Markdown heading outside code blocks."""
    found = re.findall(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", FENCE.sub("", text), re.M)
    return [(h, t) for h, t in found if level is None or h == level]


def _slug(title: str) -> str:
    title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)  # a link in a heading: its text
    title = title.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", title).replace(" ", "-")


def _anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for _, title in _headings(text):
        slug = _slug(title)
        count = seen.get(slug, 0)
        anchors.add(slug if count == 0 else f"{slug}-{count}")
        seen[slug] = count + 1
    return anchors


def test_readme_is_at_most_500_lines() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= 500, f"README.md has {lines} lines; move reference material into docs/"


def test_readme_contents_lists_every_section() -> None:
    text = README.read_text(encoding="utf-8")
    sections = [title for _, title in _headings(text, "##") if title != "Contents"]
    contents = text.split("## Contents", 1)[1].split("\n## ", 1)[0]
    linked = set(re.findall(r"\]\(#([^)]+)\)", contents))
    missing = [title for title in sections if _slug(title) not in linked]
    assert not missing, f"README Contents misses: {missing}"
    stale = linked - _anchors(text)
    assert not stale, f"README Contents links to no heading: {sorted(stale)}"


def test_the_quick_start_is_in_the_first_60_lines() -> None:
    head = "\n".join(README.read_text(encoding="utf-8").splitlines()[:60])
    for needed in ('make run TASK="', "make test", "## Quick start", "artifactflow serve"):
        assert needed in head, needed


def test_the_peers_table_has_one_place_to_be_written() -> None:
    """`benchmarks/peers.py --write-readme` replaces what lies between these markers."""
    text = README.read_text(encoding="utf-8")
    assert text.count("<!-- peers:begin -->") == 1 and text.count("<!-- peers:end -->") == 1
    assert text.index("<!-- peers:begin -->") < text.index("<!-- peers:end -->")


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: p.name)
def test_relative_links_point_at_files_and_headings(page: Path) -> None:
    broken = []
    for target in LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: …
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file.relative_to(ROOT)}")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file.read_text(encoding="utf-8")):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)
