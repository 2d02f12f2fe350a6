"""Replacing one quoted passage: exactly when it is there once, approximately when it is not.

The rule, as `update_artifact` states it to the model:
- the passage occurs exactly once: it is replaced;
- it occurs several times: refused, with the line numbers, so the next attempt adds context;
- it does not occur: the most similar stretch (`find_closest`) is replaced if its similarity
  is at least `FUZZY_THRESHOLD` and no other stretch comes within `AMBIGUITY_MARGIN` of it
  while also passing the threshold; otherwise refused, showing the closest text so the next
  attempt can quote it exactly.
Passages shorter than `MIN_FUZZY_CHARS` (ignoring surrounding whitespace) are never matched
approximately: a near miss of 'zq' says nothing about where it belongs.

Pure functions on strings; the service applies the result under its optimistic lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .errors import EditMatchError, InvalidArtifactError
from .fuzzy import find_closest
from .render import fenced

FUZZY_THRESHOLD = 0.85
"""Minimum similarity (0..1) for an approximate replacement of the quoted passage."""

AMBIGUITY_MARGIN = 0.05
"""Two near matches whose similarities differ by less than this are ambiguous."""

MIN_FUZZY_CHARS = 4
"""A passage shorter than this (ignoring surrounding whitespace) is only matched exactly."""

SNIPPET_CHARS = 1_500
"""The closest text shown in a refusal is cut to this many characters (middle elided)."""


@dataclass(frozen=True)
class Replacement:
    """The outcome of `replace_once`: the new content and where the change landed."""

    content: str
    match: Literal["exact", "fuzzy"]
    line: int  # 1-based line of the replaced text's start in the old content
    replaced: str  # the old text that was replaced
    similarity: float  # 1.0 for an exact match


def replace_once(
    content: str, old: str, new: str, *, artifact_id: str, version: int
) -> Replacement:
    """Replace the one place `old` stands for in `content` with `new`.

    `artifact_id` and `version` only name the artifact in error messages. Raises
    `InvalidArtifactError` for an empty or no-op edit and `EditMatchError` when `old` matches
    no place or several places.
    """
    if old == "":
        raise InvalidArtifactError(
            "old_str must not be empty: quote the text to replace (to add text, quote the "
            "neighbouring text and repeat it in new_str together with the addition)"
        )
    if old == new:
        raise InvalidArtifactError("old_str and new_str are identical: nothing would change")
    where = f"artifact '{artifact_id}' (v{version}"
    count = content.count(old)
    if count == 1:
        start = content.index(old)
        return Replacement(
            content=content[:start] + new + content[start + len(old) :],
            match="exact",
            line=_line_of(content, start),
            replaced=old,
            similarity=1.0,
        )
    if count > 1:
        raise _occurs_often(content, old, count, where, artifact_id)
    if len(old.strip()) < MIN_FUZZY_CHARS:
        raise EditMatchError(
            f"old_str {old!r} was not found in {where}). Copy the exact text to replace from "
            "read_artifact, with some surrounding context.",
            artifact_id=artifact_id,
        )
    matches = find_closest(content, old)
    if not matches:
        raise EditMatchError(
            f"old_str was not found in {where}), and nothing similar to it is there (the "
            "artifact is empty). Use rewrite_artifact to give it content.",
            artifact_id=artifact_id,
        )
    best = matches[0]
    if best.similarity < FUZZY_THRESHOLD:
        closest = snippet(best.text)
        raise EditMatchError(
            f"old_str was not found in {where}). The closest text, at line {best.line} "
            f"(similarity {best.similarity:.2f}, below the {FUZZY_THRESHOLD:.2f} needed for an "
            f"approximate match), is:\n{fenced(closest)}Copy the exact text to replace from "
            "the artifact (read_artifact shows it) and retry.",
            artifact_id=artifact_id,
            match="none",
            closest=closest,
            similarity=round(best.similarity, 3),
            line=best.line,
        )
    rivals = [
        m
        for m in matches[1:]
        if m.similarity >= FUZZY_THRESHOLD and m.similarity > best.similarity - AMBIGUITY_MARGIN
    ]
    if rivals:
        places = ", ".join(
            f"line {m.line} (similarity {m.similarity:.2f})" for m in [best, *rivals]
        )
        raise EditMatchError(
            f"old_str was not found exactly in {where}), and it nearly matches "
            f"{1 + len(rivals)} places: {places}. Copy the exact text to replace from "
            "read_artifact and include more surrounding context so it is unique.",
            artifact_id=artifact_id,
            match="ambiguous",
        )
    return Replacement(
        content=content[: best.start] + new + content[best.end :],
        match="fuzzy",
        line=best.line,
        replaced=best.text,
        similarity=best.similarity,
    )


def _occurs_often(
    content: str, old: str, count: int, where: str, artifact_id: str
) -> EditMatchError:
    lines: list[int] = []
    pos = content.find(old)
    while pos != -1 and len(lines) < 10:
        lines.append(_line_of(content, pos))
        pos = content.find(old, pos + len(old))
    shown = ", ".join(str(n) for n in lines) + (", …" if count > len(lines) else "")
    return EditMatchError(
        f"old_str occurs {count} times in {where}, at lines {shown}); it must match exactly "
        "one place. Include more surrounding context in old_str (and the same context in "
        "new_str) so that it is unique.",
        artifact_id=artifact_id,
        occurrences=count,
    )


def _line_of(content: str, pos: int) -> int:
    return content.count("\n", 0, pos) + 1


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """`text`, or its head and tail around a note of how much was left out."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n… [{len(text) - 2 * half} characters omitted] …\n{text[-half:]}"
