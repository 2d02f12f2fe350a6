"""Artifact tools: versioned documents the agents write and edit.

Every write goes through the store's optimistic lock: a tool reads the current version, computes
the new content and writes it with `expected_version` set to what it read. If another writer got
there first the store raises `ArtifactConflictError` and the tool reports it, so no update is
lost silently. Calls of one response on the same artifact id run in call order (`serial_key`),
so a create followed by an update of that artifact in one response works.

`update_artifact` replaces an exact, unique occurrence of `old_str`. When there is none it looks
for the most similar stretch of the document (`find_closest`) and replaces it if the similarity
is at least `FUZZY_THRESHOLD`, reporting what it replaced; otherwise it shows the model the
closest text so the next attempt can quote it exactly.
"""

from __future__ import annotations

import bisect
import inspect
import logging
import re
from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

from ...errors import ArtifactConflictError
from ..base import ToolResult
from ..context import ToolContext
from ..decorator import tool

logger = logging.getLogger(__name__)

FUZZY_THRESHOLD = 0.85
"""Minimum similarity (0..1) for `update_artifact` to replace a near match of `old_str`."""

AMBIGUITY_MARGIN = 0.05
"""Two near matches whose similarities differ by less than this are ambiguous."""

MIN_FUZZY_CHARS = 4
"""`old_str` shorter than this (ignoring surrounding whitespace) is never matched fuzzily."""

MAX_ID_LENGTH = 128
MAX_TITLE_LENGTH = 500
MAX_CONTENT_TYPE_LENGTH = 100
DEFAULT_CONTENT_TYPE = "text/markdown"
READ_MAX_RESULT_CHARS = 100_000
ARTIFACT_KEY = "artifact:{id}"
"""Calls on one artifact id run one after another, in call order (create, then update)."""
_SNIPPET_CHARS = 1_500

_ID_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
_CONTENT_TYPE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+\-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+\-]*$")
_CONTENT_TYPE_ALIASES = {
    "markdown": "text/markdown",
    "md": "text/markdown",
    "text": "text/plain",
    "txt": "text/plain",
    "plain": "text/plain",
    "json": "application/json",
    "html": "text/html",
    "csv": "text/csv",
    "yaml": "application/yaml",
    "python": "text/x-python",
}


# --- fuzzy matching ------------------------------------------------------------------------

@dataclass(frozen=True)
class FuzzyMatch:
    """A stretch `content[start:end]` and its similarity (0..1) to the text searched for."""

    start: int
    end: int
    similarity: float
    text: str
    line: int  # 1-based line number of `start`


# Character-level SequenceMatcher is quadratic-ish; beyond this product of lengths the
# comparison goes line by line first and only compares changed lines character by character.
_CHAR_LEVEL_LIMIT = 250_000
_CHUNK_CHAR_LIMIT = 4_000_000
_MAX_SEED_OCCURRENCES = 64
_MAX_SEEDS = 96
_MAX_CANDIDATES = 8
_CLIMB_CANDIDATES = 3
_MAX_CLIMB_EVALS = 160
_MAX_SCAN_WINDOWS = 4_000


def _matched_flat(a: str, b: str) -> int:
    blocks = SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()
    return sum(block.size for block in blocks)


_WORDS = re.compile(r"\S+\s*|\s+")


def _split(text: str, level: int) -> list[str]:
    return text.splitlines(keepends=True) if level == 0 else _WORDS.findall(text)


def _matched_chars(a: str, b: str, level: int = 0) -> int:
    """Characters of `a` matched in `b`: character by character when small, else by lines
    (then words) first, comparing only the differing chunks character by character."""
    if not a or not b:
        return 0
    if len(a) * len(b) <= _CHAR_LEVEL_LIMIT:
        return _matched_flat(a, b)
    if level > 1:
        # Two huge differing chunks: too costly to compare; count nothing (never over-reports).
        return _matched_flat(a, b) if len(a) * len(b) <= _CHUNK_CHAR_LIMIT else 0
    parts_a, parts_b = _split(a, level), _split(b, level)
    if len(parts_a) == 1 and len(parts_b) == 1:
        return _matched_chars(a, b, level + 1)
    matched = 0
    opcodes = SequenceMatcher(None, parts_a, parts_b, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            matched += sum(len(part) for part in parts_a[i1:i2])
        elif tag == "replace":
            matched += _matched_chars("".join(parts_a[i1:i2]), "".join(parts_b[j1:j2]), level + 1)
    return matched


def similarity(a: str, b: str) -> float:
    """Similarity of two texts in 0..1 (like `SequenceMatcher.ratio`, fast on long texts)."""
    total = len(a) + len(b)
    if total == 0:
        return 1.0
    return 2.0 * _matched_chars(a, b) / total


@dataclass(frozen=True)
class _Anchor:
    t_start: int  # span in the searched-for text
    t_end: int
    c_start: int  # span in the content
    c_end: int

    @property
    def diagonal(self) -> int:
        return self.c_start - self.t_start


def _normalize_line(line: str) -> str:
    return " ".join(line.split())


def _line_starts(text: str) -> list[int]:
    starts = [0]
    pos = text.find("\n")
    while pos != -1:
        starts.append(pos + 1)
        pos = text.find("\n", pos + 1)
    return starts


def _char_anchors(content: str, target: str) -> list[_Anchor]:
    m = len(target)
    seed_len = max(3, min(32, m // 6))
    if m < seed_len:
        return []
    step = max(1, seed_len // 2)
    offsets = list(range(0, m - seed_len + 1, step))
    if offsets[-1] != m - seed_len:
        offsets.append(m - seed_len)
    if len(offsets) > _MAX_SEEDS:
        stride = len(offsets) / _MAX_SEEDS
        offsets = sorted({offsets[int(i * stride)] for i in range(_MAX_SEEDS)} | {offsets[-1]})
    anchors: list[_Anchor] = []
    for off in offsets:
        seed = target[off : off + seed_len]
        if not seed.strip():
            continue
        found: list[int] = []
        pos = content.find(seed)
        while pos != -1 and len(found) <= _MAX_SEED_OCCURRENCES:
            found.append(pos)
            pos = content.find(seed, pos + 1)
        if len(found) > _MAX_SEED_OCCURRENCES:
            continue  # too common to say anything about where the target is
        anchors.extend(_Anchor(off, off + seed_len, p, p + seed_len) for p in found)
    return anchors


def _line_anchors(content: str, target: str, content_starts: list[int]) -> list[_Anchor]:
    """Whole lines equal up to whitespace (catches indentation and spacing differences)."""
    target_lines = target.splitlines(keepends=True)
    if len(target_lines) < 2:
        return []
    index: dict[str, list[int]] = {}
    content_lines = content.splitlines(keepends=True)
    for number, line in enumerate(content_lines):
        key = _normalize_line(line)
        if len(key) >= 3:
            index.setdefault(key, []).append(number)
    anchors: list[_Anchor] = []
    t_pos = 0
    for line in target_lines:
        key = _normalize_line(line)
        hits = index.get(key, []) if len(key) >= 3 else []
        if 0 < len(hits) <= _MAX_SEED_OCCURRENCES:
            for number in hits:
                c_start = content_starts[number]
                anchors.append(
                    _Anchor(t_pos, t_pos + len(line), c_start, c_start + len(content_lines[number]))
                )
        t_pos += len(line)
    return anchors


def _clusters(anchors: list[_Anchor], m: int) -> list[list[_Anchor]]:
    """Groups of anchors that agree on where the target sits, best supported first."""
    if not anchors:
        return []
    anchors = sorted(anchors, key=lambda a: a.diagonal)
    width = max(16, m // 4)
    windows: list[tuple[int, int, int]] = []  # (score, i, j) for anchors[i:j]
    counts: Counter[tuple[int, int]] = Counter()  # distinct target spans in the window
    covered = 0
    j = 0
    for i in range(len(anchors)):
        while j < len(anchors) and anchors[j].diagonal - anchors[i].diagonal <= width:
            key = (anchors[j].t_start, anchors[j].t_end)
            if counts[key] == 0:
                covered += key[1] - key[0]
            counts[key] += 1
            j += 1
        windows.append((covered, i, j))
        key = (anchors[i].t_start, anchors[i].t_end)
        counts[key] -= 1
        if counts[key] == 0:
            covered -= key[1] - key[0]
    windows.sort(key=lambda w: (-w[0], w[1]))
    chosen: list[list[_Anchor]] = []
    taken: list[tuple[int, int]] = []
    separation = max(1, m // 2)
    for _, i, j in windows:
        lo, hi = anchors[i].diagonal, anchors[j - 1].diagonal
        if any(lo - separation < t_hi and hi + separation > t_lo for t_lo, t_hi in taken):
            continue
        chosen.append(anchors[i:j])
        taken.append((lo, hi))
        if len(chosen) >= _MAX_CANDIDATES:
            break
    return chosen


def _estimates(cluster: list[_Anchor], m: int, n: int) -> list[tuple[int, int]]:
    diagonals = sorted(a.diagonal for a in cluster)
    median = diagonals[len(diagonals) // 2]
    first = min(cluster, key=lambda a: (a.t_start, abs(a.diagonal - median)))
    last = max(cluster, key=lambda a: (a.t_end, -abs(a.diagonal - median)))
    start = first.c_start - first.t_start
    end = last.c_end + (m - last.t_end)
    spans = [(start, end), (median, median + m)]
    return [(max(0, s), min(n, e)) for s, e in spans]


def _snap_variants(content: str, target: str, span: tuple[int, int], starts: list[int]) -> list[tuple[int, int]]:
    """The span widened or narrowed to line boundaries when only whitespace is in between."""
    start, end = span
    n = len(content)
    variants = [span]
    line_index = bisect.bisect_right(starts, start) - 1
    line_start = starts[line_index]
    snapped_start = start
    if content[line_start:start].strip() == "":
        snapped_start = line_start
    end_index = bisect.bisect_right(starts, max(end - 1, 0)) - 1
    next_start = starts[end_index + 1] if end_index + 1 < len(starts) else n
    line_end = next_start - 1 if next_start > 0 and content[next_start - 1 : next_start] == "\n" else next_start
    snapped_end = end
    if content[end:line_end].strip() == "":
        snapped_end = next_start if target.endswith("\n") else line_end
    for candidate in ((snapped_start, end), (start, snapped_end), (snapped_start, snapped_end)):
        if candidate not in variants and candidate[0] < candidate[1]:
            variants.append(candidate)
    return variants


def _climb(content: str, target: str, start: int, end: int, score: float) -> tuple[int, int, float]:
    n = len(content)
    step = max(1, min(8, len(target) // 16))
    evals = 0
    while step >= 1 and evals < _MAX_CLIMB_EVALS:
        improved = False
        for ds, de in ((-step, 0), (step, 0), (0, -step), (0, step)):
            s, e = start + ds, end + de
            if s < 0 or e > n or s >= e:
                continue
            evals += 1
            value = similarity(content[s:e], target)
            if value > score + 1e-12:
                start, end, score, improved = s, e, value, True
                break
        if not improved:
            step //= 2
    return start, end, score


def _scan_spans(content: str, target: str) -> list[tuple[int, int]]:
    """Fallback when nothing anchors the target: coarse windows ranked by character overlap."""
    m, n = len(target), len(content)
    if n <= m:
        return [(0, n)]
    step = max(1, m // 4, (n - m) // _MAX_SCAN_WINDOWS + 1)
    matcher = SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(target)
    scored: list[tuple[float, int]] = []
    for s in range(0, n - m + step, step):
        s = min(s, n - m)
        matcher.set_seq1(content[s : s + m])
        scored.append((matcher.quick_ratio(), s))
    scored.sort(key=lambda x: (-x[0], x[1]))
    return [(s, s + m) for _, s in scored[:_CLIMB_CANDIDATES]]


def _extend_edges(content: str, target: str, start: int, end: int) -> tuple[int, int]:
    """Widen a span over characters the target replaced rather than dropped.

    Similarity favours leaving out a mismatched first or last character ('Xhe' scores higher
    against 'he' than against 'The'), but replacing 'he' would leave the stray 'T' behind. When
    the target has unmatched non-space characters at an edge and the content has as many
    non-space characters just outside the span, they are taken to be substitutions.
    """
    edge = 64
    head = SequenceMatcher(None, content[start : start + edge], target[:edge], autojunk=False)
    first = head.get_matching_blocks()[0]
    if first.size:
        extra = first.b - first.a
        before = content[max(0, start - extra) : start]
        if extra > 0 and len(before) == extra and not _has_space(before + target[: first.b]):
            start -= extra
    tail_c = content[max(start, end - edge) : end]
    tail_t = target[-edge:]
    blocks = [b for b in SequenceMatcher(None, tail_c, tail_t, autojunk=False).get_matching_blocks() if b.size]
    if blocks:
        last = blocks[-1]
        left_c = len(tail_c) - (last.a + last.size)
        left_t = len(tail_t) - (last.b + last.size)
        extra = left_t - left_c
        after = content[end : end + extra]
        if extra > 0 and len(after) == extra and not _has_space(after + tail_t[last.b + last.size :]):
            end += extra
    return start, end


def _has_space(text: str) -> bool:
    return any(ch.isspace() for ch in text)


def find_closest(content: str, target: str, *, limit: int = 3) -> list[FuzzyMatch]:
    """The stretches of `content` most similar to `target`, best first, not overlapping.

    Anchors (exact short substrings of `target`, and lines equal up to whitespace) vote for
    where `target` would sit; each candidate is then scored with `similarity` and its edges
    adjusted to the best-scoring boundaries. Cost stays near-linear in the content size.
    """
    if not content or not target:
        return []
    m, n = len(target), len(content)
    starts = _line_starts(content)
    anchors = _char_anchors(content, target) + _line_anchors(content, target, starts)
    spans: list[list[tuple[int, int]]] = []
    for cluster in _clusters(anchors, m):
        group: list[tuple[int, int]] = []
        for estimate in _estimates(cluster, m, n):
            for variant in _snap_variants(content, target, estimate, starts):
                if variant not in group and variant[0] < variant[1]:
                    group.append(variant)
        if group:
            spans.append(group)
    if not spans:
        spans = [[span] for span in _scan_spans(content, target)]

    scored: list[tuple[float, int, int]] = []
    for group in spans:
        best = max(((similarity(content[s:e], target), s, e) for s, e in group), key=lambda x: x[0])
        scored.append(best)
    scored.sort(key=lambda x: -x[0])
    refined: list[tuple[float, int, int]] = []
    for index, (score, s, e) in enumerate(scored):
        if index < _CLIMB_CANDIDATES:
            s, e, score = _climb(content, target, s, e, score)
            s2, e2 = _extend_edges(content, target, s, e)
            if (s2, e2) != (s, e):
                s, e, score = s2, e2, similarity(content[s2:e2], target)
        refined.append((score, s, e))
    refined.sort(key=lambda x: (-x[0], x[1]))

    results: list[FuzzyMatch] = []
    for score, s, e in refined:
        if any(s < r.end and e > r.start for r in results):
            continue
        line = bisect.bisect_right(starts, s)
        results.append(FuzzyMatch(s, e, score, content[s:e], line))
        if len(results) >= limit:
            break
    return results


# --- helpers -------------------------------------------------------------------------------

def _line_of(content: str, pos: int) -> int:
    return content.count("\n", 0, pos) + 1


def _snippet(text: str, limit: int = _SNIPPET_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n… [{len(text) - 2 * half} characters omitted] …\n{text[-half:]}"


def _fence(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def _check_id(artifact_id: str) -> str | None:
    if not artifact_id:
        return "id must not be empty"
    if len(artifact_id) > MAX_ID_LENGTH:
        return f"id is {len(artifact_id)} characters long; the limit is {MAX_ID_LENGTH}"
    if not _ID_RE.match(artifact_id):
        return (
            f"invalid id {artifact_id!r}: use only letters, digits, '_', '-' and '.' "
            "(for example 'report', 'task_plan' or 'notes-v2.md')"
        )
    return None


def _check_title(title: str) -> str | None:
    if not title.strip():
        return "title must not be empty"
    if len(title) > MAX_TITLE_LENGTH:
        return f"title is {len(title)} characters long; the limit is {MAX_TITLE_LENGTH}"
    return None


def _normalize_content_type(value: str) -> tuple[str | None, str | None]:
    cleaned = value.strip().lower()
    cleaned = _CONTENT_TYPE_ALIASES.get(cleaned, cleaned)
    if not cleaned:
        return None, "content_type must not be empty (for example 'text/markdown')"
    if len(cleaned) > MAX_CONTENT_TYPE_LENGTH or not _CONTENT_TYPE_RE.match(cleaned):
        return None, (
            f"invalid content_type {value!r}: give a MIME type such as 'text/markdown', "
            "'text/plain' or 'application/json'"
        )
    return cleaned, None


async def _emit(ctx: ToolContext, event_type: str, data: dict[str, Any]) -> None:
    """Report an artifact change; a failing listener must not turn a done write into an error."""
    if ctx.emit is None:
        return
    try:
        outcome = ctx.emit(event_type, data)
        if inspect.isawaitable(outcome):
            await outcome
    except Exception:  # pragma: no cover - defensive
        logger.exception("emitting %s for artifact %s failed", event_type, data.get("artifact_id"))


async def _available_ids(store: Any, conversation_id: str) -> str:
    rows = await store.list_artifacts(conversation_id)
    if not rows:
        return "there are no artifacts in this conversation yet (create one with create_artifact)"
    return "available ids: " + ", ".join(f"'{r['artifact_id']}'" for r in rows)


async def _load(ctx: ToolContext, artifact_id: str) -> tuple[Any, dict[str, Any] | None, ToolResult | None]:
    store = ctx.service("store")
    problem = _check_id(artifact_id)
    if problem:
        return store, None, ToolResult.fail(problem)
    row = await store.get_artifact(ctx.conversation_id, artifact_id)
    if row is None:
        available = await _available_ids(store, ctx.conversation_id)
        return store, None, ToolResult.fail(
            f"no artifact with id '{artifact_id}' in this conversation; {available}",
            artifact_id=artifact_id,
        )
    return store, row, None


async def _write(
    ctx: ToolContext,
    store: Any,
    row: dict[str, Any],
    *,
    content: str,
    change: str,
    title: str | None = None,
    extra: dict[str, Any] | None = None,
) -> ToolResult:
    artifact_id = row["artifact_id"]
    try:
        version = await store.write_artifact_version(
            ctx.conversation_id,
            artifact_id,
            expected_version=row["version"],
            content=content,
            change=change,
            title=title,
            agent=ctx.agent,
            message_id=ctx.message_id,
        )
    except ArtifactConflictError:
        return ToolResult.fail(
            f"artifact '{artifact_id}' was changed by another writer while this {change} ran "
            f"(it is no longer at version {row['version']}); nothing was written. Read it again "
            "with read_artifact and redo the change on the current text.",
            artifact_id=artifact_id,
            conflict=True,
            expected_version=row["version"],
        )
    new_title = title if title is not None else row["title"]
    data: dict[str, Any] = {
        "artifact_id": artifact_id,
        "version": version,
        "previous_version": row["version"],
        "change": change,
        "title": new_title,
        "size": len(content),
    }
    data.update(extra or {})
    await _emit(
        ctx,
        "artifact_updated",
        {
            "artifact_id": artifact_id,
            "title": new_title,
            "version": version,
            "previous_version": row["version"],
            "change": change,
            "content_type": row["content_type"],
        },
    )
    return ToolResult(success=True, data=data, metadata=dict(data))


# --- tools ---------------------------------------------------------------------------------

@tool(permission="auto", serial_key=ARTIFACT_KEY)
async def create_artifact(
    id: str,
    title: str,
    content: str,
    ctx: ToolContext,
    content_type: str = DEFAULT_CONTENT_TYPE,
) -> ToolResult:
    """Create a new artifact: a versioned document (report, plan, draft, data) in this
    conversation that you and the user can read and that later calls can edit. Fails if the id
    is already taken; then change the existing artifact with update_artifact or rewrite_artifact.

    Args:
        id: Short stable identifier: letters, digits, '_', '-' and '.', at most 128 characters (e.g. 'report', 'task_plan').
        title: Human-readable title shown to the user.
        content: The full initial content.
        content_type: MIME type of the content, 'text/markdown' unless it is something else (e.g. 'text/plain', 'application/json', 'text/csv').
    """
    store = ctx.service("store")
    problem = _check_id(id) or _check_title(title)
    if problem:
        return ToolResult.fail(problem)
    normalized_type, problem = _normalize_content_type(content_type)
    if problem or normalized_type is None:
        return ToolResult.fail(problem or "invalid content_type")
    title = title.strip()
    try:
        await store.create_artifact(
            ctx.conversation_id,
            id,
            title=title,
            content=content,
            content_type=normalized_type,
            agent=ctx.agent,
            message_id=ctx.message_id,
        )
    except ArtifactConflictError:
        existing = await store.get_artifact(ctx.conversation_id, id)
        where = f" (now at version {existing['version']}, titled {existing['title']!r})" if existing else ""
        return ToolResult.fail(
            f"an artifact with id '{id}' already exists in this conversation{where}. Use "
            "update_artifact to change part of it, rewrite_artifact to replace all of it, or "
            "choose a different id.",
            artifact_id=id,
            exists=True,
        )
    data = {
        "artifact_id": id,
        "title": title,
        "version": 1,
        "content_type": normalized_type,
        "size": len(content),
    }
    await _emit(
        ctx,
        "artifact_created",
        {"artifact_id": id, "title": title, "version": 1, "content_type": normalized_type},
    )
    return ToolResult(success=True, data=data, metadata=dict(data))


@tool(permission="auto", serial_key=ARTIFACT_KEY)
async def update_artifact(id: str, old_str: str, new_str: str, ctx: ToolContext) -> ToolResult:
    """Edit part of an artifact: replace the text old_str with new_str, creating a new version.
    old_str should be copied exactly from the current content (read_artifact shows it) and must
    occur exactly once: include enough surrounding lines to make it unique. If it is not found
    exactly, a near match (similarity >= 0.85, e.g. a typo or different whitespace) is replaced
    instead and the result says what was replaced; otherwise the error shows the closest text.
    To delete text, pass an empty new_str. To replace everything, use rewrite_artifact.

    Args:
        id: Id of the artifact to edit.
        old_str: The exact text to replace (must be non-empty and occur once in the current version).
        new_str: The replacement text (may be empty to delete old_str).
    """
    store, row, failure = await _load(ctx, id)
    if failure is not None or row is None:
        return failure or ToolResult.fail("artifact not found")
    if old_str == "":
        return ToolResult.fail(
            "old_str must not be empty: quote the text to replace (to add text, quote the "
            "neighbouring text and repeat it in new_str together with the addition)"
        )
    if old_str == new_str:
        return ToolResult.fail("old_str and new_str are identical: nothing would change")
    content: str = row["content"]
    version = row["version"]

    count = content.count(old_str)
    if count == 1:
        start = content.index(old_str)
        new_content = content[:start] + new_str + content[start + len(old_str) :]
        return await _write(
            ctx, store, row, content=new_content, change="update",
            extra={"match": "exact", "line": _line_of(content, start)},
        )
    if count > 1:
        lines: list[int] = []
        pos = content.find(old_str)
        while pos != -1 and len(lines) < 10:
            lines.append(_line_of(content, pos))
            pos = content.find(old_str, pos + len(old_str))
        shown = ", ".join(str(n) for n in lines) + (", …" if count > len(lines) else "")
        return ToolResult.fail(
            f"old_str occurs {count} times in artifact '{id}' (v{version}, at lines {shown}); "
            "it must match exactly one place. Include more surrounding context in old_str "
            "(and the same context in new_str) so that it is unique.",
            artifact_id=id,
            occurrences=count,
        )

    if len(old_str.strip()) < MIN_FUZZY_CHARS:
        return ToolResult.fail(
            f"old_str {old_str!r} was not found in artifact '{id}' (v{version}). Copy the exact "
            "text to replace from read_artifact, with some surrounding context.",
            artifact_id=id,
        )
    matches = find_closest(content, old_str)
    if not matches:
        return ToolResult.fail(
            f"old_str was not found in artifact '{id}' (v{version}), and nothing similar to it "
            "is there (the artifact is empty). Use rewrite_artifact to give it content.",
            artifact_id=id,
        )
    best = matches[0]
    if best.similarity >= FUZZY_THRESHOLD:
        rivals = [
            m for m in matches[1:]
            if m.similarity >= FUZZY_THRESHOLD and m.similarity > best.similarity - AMBIGUITY_MARGIN
        ]
        if rivals:
            places = ", ".join(
                f"line {m.line} (similarity {m.similarity:.2f})" for m in [best, *rivals]
            )
            return ToolResult.fail(
                f"old_str was not found exactly in artifact '{id}' (v{version}), and it nearly "
                f"matches {1 + len(rivals)} places: {places}. Copy the exact text to replace "
                "from read_artifact and include more surrounding context so it is unique.",
                artifact_id=id,
                match="ambiguous",
            )
        new_content = content[: best.start] + new_str + content[best.end :]
        return await _write(
            ctx, store, row, content=new_content, change="update",
            extra={
                "match": "fuzzy",
                "similarity": round(best.similarity, 3),
                "replaced": best.text,
                "line": best.line,
                "note": (
                    "old_str was not found exactly; the most similar text (shown in 'replaced') "
                    "was replaced. Check that this was the intended text."
                ),
            },
        )
    return ToolResult.fail(
        f"old_str was not found in artifact '{id}' (v{version}). The closest text, at line "
        f"{best.line} (similarity {best.similarity:.2f}, below the {FUZZY_THRESHOLD:.2f} needed "
        f"for an approximate match), is:\n{_fence(_snippet(best.text))}\nCopy the exact text "
        "to replace from the artifact (read_artifact shows it) and retry.",
        artifact_id=id,
        match="none",
        closest=_snippet(best.text),
        similarity=round(best.similarity, 3),
        line=best.line,
    )


@tool(permission="auto", serial_key=ARTIFACT_KEY)
async def rewrite_artifact(
    id: str, content: str, ctx: ToolContext, title: str | None = None
) -> ToolResult:
    """Replace the whole content of an existing artifact (and optionally its title), creating a
    new version; earlier versions stay readable. Prefer update_artifact for small edits.

    Args:
        id: Id of the artifact to replace.
        content: The complete new content.
        title: New title; omit to keep the current one.
    """
    store, row, failure = await _load(ctx, id)
    if failure is not None or row is None:
        return failure or ToolResult.fail("artifact not found")
    if title is not None:
        problem = _check_title(title)
        if problem:
            return ToolResult.fail(problem)
        title = title.strip()
    if content == row["content"] and (title is None or title == row["title"]):
        data = {
            "artifact_id": id,
            "version": row["version"],
            "change": "none",
            "title": row["title"],
            "note": "the content and title are already exactly this; no new version was written",
        }
        return ToolResult(success=True, data=data, metadata=dict(data))
    return await _write(ctx, store, row, content=content, change="rewrite", title=title)


@tool(permission="auto", max_result_chars=READ_MAX_RESULT_CHARS, serial_key=ARTIFACT_KEY)
async def read_artifact(id: str, ctx: ToolContext, version: int | None = None) -> ToolResult:
    """Read an artifact's content: the current version, or an earlier one. The answer starts
    with one header line (id, version, title, content type) followed by the exact content.

    Args:
        id: Id of the artifact to read.
        version: Version number to read (1 is the first); omit for the current version.
    """
    store, row, failure = await _load(ctx, id)
    if failure is not None or row is None:
        return failure or ToolResult.fail("artifact not found")
    current = row["version"]
    title, content, change = row["title"], row["content"], None
    if version is not None and version != current:
        old = await store.get_artifact_version(ctx.conversation_id, id, version)
        if old is None:
            return ToolResult.fail(
                f"artifact '{id}' has no version {version}; available versions are 1 to "
                f"{current} (the current one is {current})",
                artifact_id=id,
                current_version=current,
            )
        title, content, change = old["title"], old["content"], old["change"]
    shown = version if version is not None else current
    metadata = {
        "artifact_id": id,
        "version": shown,
        "current_version": current,
        "title": title,
        "content_type": row["content_type"],
        "size": len(content),
    }
    if change is not None:
        metadata["change"] = change
    state = "current" if shown == current else f"current is v{current}"
    header = (
        f"[artifact '{id}' v{shown} ({state}) · {row['content_type']} · "
        f"{len(content)} chars · title: {title}]"
    )
    return ToolResult(success=True, data=f"{header}\n{content}", metadata=metadata)


@tool(permission="auto")
async def list_artifacts(ctx: ToolContext) -> ToolResult:
    """List the artifacts of this conversation: id, title, current version, content type and
    size in characters. Use read_artifact to see one's content.
    """
    store = ctx.service("store")
    rows = await store.list_artifacts(ctx.conversation_id)
    items = [
        {
            "id": r["artifact_id"],
            "title": r["title"],
            "version": r["version"],
            "content_type": r["content_type"],
            "size": len(r["content"]),
        }
        for r in rows
    ]
    return ToolResult(success=True, data=items, metadata={"count": len(items)})


ARTIFACT_TOOLS = [create_artifact, update_artifact, rewrite_artifact, read_artifact, list_artifacts]

__all__ = [
    "ARTIFACT_TOOLS",
    "FUZZY_THRESHOLD",
    "FuzzyMatch",
    "create_artifact",
    "find_closest",
    "list_artifacts",
    "read_artifact",
    "rewrite_artifact",
    "similarity",
    "update_artifact",
]
