"""Where a nearly-right quotation sits in a document (the approximate half of an artifact edit).

A model quoting the text it wants to replace often gets it almost right: a typo, other
indentation, one changed character. rapidfuzz does the character work in C:
- similarity is its Indel ratio, 2·LCS / (len(a) + len(b)), the measure difflib's
  `SequenceMatcher.ratio` approximates;
- windows of the document near the quotation come from `fuzz.partial_ratio_alignment` for
  quotations up to 64 characters (exact over every window, bit-parallel, linear), and from one
  `process.extract` over overlapping windows for longer ones (cost ~n·m/13 word operations;
  `partial_ratio` for long needles degrades badly on repetitive text);
- an Indel alignment of the quotation against a window gives matching blocks.

The stretch returned follows three rules, each pinned by a test:
1. it runs from the start of one matching block to the end of another, the pair with the best
   similarity (characters an alignment tie borrowed from the neighbours are left out);
2. both edges are then polished: the most similar span with each edge within 8 characters
   of where rule 1 (or, for a short target, the best window) put it;
3. unmatched non-space characters at an edge of the quotation that face non-space
   characters of the document are substitutions and are taken in: 'Xrices' replaces
   'Prices', not 'rices', although 'rices' scores higher.
Further candidates (for the caller's ambiguity check) come from searching again with each
stretch found masked (short quotations) or from the next-best window that does not overlap one
(long quotations); candidates never overlap. Worst cases measured by benchmarks/fuzzy_edit.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from rapidfuzz import fuzz, process
from rapidfuzz.distance import Indel, LCSseq, MatchingBlock

_SHORT_NEEDLE = 64  # partial_ratio's bit-parallel path: linear in the document
_MAX_PASSES = 4  # alignments per candidate while narrowing its window
_MAX_RATIO_ROUNDS = 32  # Dinkelbach rounds (it converges in a handful)
_POLISH_RADIUS = 8
_POLISH_WIDE_UP_TO = 1_000  # longer targets polish 2 characters each way per round
_MAX_POLISH_ROUNDS = 4
_EDGE = 64  # characters compared when looking for substitutions at an edge


@dataclass(frozen=True)
class FuzzyMatch:
    """A stretch `content[start:end]` and its similarity (0..1) to the text searched for."""

    start: int
    end: int
    similarity: float
    text: str
    line: int  # 1-based line number of `start`


def similarity(a: str, b: str) -> float:
    """Similarity of two texts in 0..1: 2·LCS / (len(a) + len(b)); 1.0 for two empty texts."""
    return Indel.normalized_similarity(a, b)


def find_closest(content: str, target: str, *, limit: int = 3) -> list[FuzzyMatch]:
    """Up to `limit` stretches of `content` most similar to `target`, best first, never
    overlapping. Empty when either text is empty."""
    if not content or not target:
        return []
    mask = _mask_char(target)
    searched = content
    ranked = _scan(content, target)
    found: list[FuzzyMatch] = []
    for _ in range(limit + 2):  # a candidate overlapping an earlier one is dropped, not counted
        window = _next_window(searched, target, ranked, found)
        if window is None:
            break
        start, end = _refine(searched, target, *window)
        if similarity(searched[start:end], target) <= 0.0:
            break  # nothing left that shares a character with the target
        if not any(start < f.end and end > f.start for f in found):
            text = content[start:end]
            line = content.count("\n", 0, start) + 1
            found.append(FuzzyMatch(start, end, similarity(text, target), text, line))
            if len(found) >= limit:
                break
        searched = searched[:start] + mask * (end - start) + searched[end:]
    found.sort(key=lambda match: (-match.similarity, match.start))
    return found


def _mask_char(target: str) -> str:
    """A character that cannot match anything in `target`."""
    code = 0xE000  # private use area
    while chr(code) in target:
        code += 1
    return chr(code)


def _scan(content: str, target: str) -> list[tuple[int, int]] | None:
    """For a long target: windows 1.25x its length, a quarter apart, best first (None for a
    short target or a short document, which `_next_window` searches directly)."""
    m, n = len(target), len(content)
    if m <= _SHORT_NEEDLE or n <= m:
        return None
    stride = m // 4
    length = m + stride  # every stretch of length m lies wholly inside some window
    starts = list(range(0, n - length + 1, stride))
    if not starts or starts[-1] != n - length:
        starts.append(max(0, n - length))
    windows = [content[s : s + length] for s in starts]
    ranked = process.extract(target, windows, scorer=fuzz.ratio, limit=None)
    return [(starts[index], starts[index] + length) for _, _, index in ranked]


def _next_window(
    text: str, target: str, ranked: list[tuple[int, int]] | None, found: list[FuzzyMatch]
) -> tuple[int, int] | None:
    if ranked is None:
        if len(text) <= len(target):
            return 0, len(text)
        aligned = fuzz.partial_ratio_alignment(target, text)
        if aligned is None:  # only below a score_cutoff, and none is passed
            return None
        return aligned.dest_start, aligned.dest_end
    while ranked:
        start, end = ranked.pop(0)
        if all(min(end, f.end) - max(start, f.start) < (end - start) // 2 for f in found):
            return start, end
    return None


def _refine(text: str, target: str, start: int, end: int) -> tuple[int, int]:
    """Rules 1-3 on a window. A window from `partial_ratio` (exactly the target's length) is
    itself a good seed for the polish, so it competes with the block span."""
    seeds = [_narrowed_block_span(text, target, start, end)]
    if end - start == len(target):
        seeds.append((start, end))
    polished = [_polish(text, target, *seed) for seed in seeds]
    start, end = max(polished, key=lambda span: _preference(text, target, *span))
    return _take_substitutions(text, target, start, end)


def _narrowed_block_span(text: str, target: str, start: int, end: int) -> tuple[int, int]:
    """Rule 1 on a window, narrowed until stable.

    An alignment against a window with spare text on either side can, in a tie, spell the
    target's first characters out of scattered letters of the spare text (easy in repetitive
    prose), leaving the true beginning unmatched. So the window is narrowed and aligned again,
    keeping only as much spare room as the target has unmatched characters at each edge.
    """
    n = len(text)
    left = right = len(target) // 2 + 8  # a stretch within 0.85 is at most ~1.35x the target
    for _ in range(_MAX_PASSES):
        lo, hi = max(0, start - left), min(n, end + right)
        s, e, lead, tail = _best_block_span(target, text[lo:hi])
        if (lo + s, lo + e) == (start, end):
            break
        start, end = lo + s, lo + e
        left, right = lead + lead // 2 + 8, tail + tail // 2 + 8
    return start, end


def _best_block_span(target: str, window: str) -> tuple[int, int, int, int]:
    """Rule 1: the span from the start of one matching block to the end of another with the
    best similarity, found exactly over all pairs by Dinkelbach's iteration for ratios.
    Returns (start, end, target characters unmatched before it, and after it)."""
    blocks = _blocks(target, window)
    m = len(target)
    if not blocks:
        return 0, len(window), 0, 0
    before = [0]  # matched characters before block i
    for block in blocks:
        before.append(before[-1] + block.size)
    ratio, best = -1.0, (0, len(blocks) - 1)
    for _ in range(_MAX_RATIO_ROUNDS):
        # maximise 2·matched - ratio·length over block pairs i <= j in one sweep
        lowest, lowest_i, top, pair = float("inf"), 0, float("-inf"), best
        for j, block in enumerate(blocks):
            head = 2 * before[j] - max(ratio, 0.0) * block.b
            if head < lowest:
                lowest, lowest_i = head, j
            value = 2 * before[j + 1] - max(ratio, 0.0) * (block.b + block.size) - lowest
            if value > top:
                top, pair = value, (lowest_i, j)
        i, j = pair
        score = 2 * (before[j + 1] - before[i]) / (m + blocks[j].b + blocks[j].size - blocks[i].b)
        if score <= ratio + 1e-12:
            break
        ratio, best = score, pair
    i, j = best
    last = blocks[j]
    return blocks[i].b, last.b + last.size, blocks[i].a, m - (last.a + last.size)


def _polish(text: str, target: str, start: int, end: int) -> tuple[int, int]:
    """Rule 2: the best span with both edges within a few characters of the seed's, searched
    exhaustively (8 each way, 2 for targets over 1,000 characters) and again around the best
    while it lies on the border of the searched square."""
    radius = _POLISH_RADIUS if len(target) <= _POLISH_WIDE_UP_TO else 2
    n = len(text)
    for _ in range(_MAX_POLISH_ROUNDS):
        spans = [
            (s, e)
            for s in range(max(0, start - radius), start + radius + 1)
            for e in range(max(s + 1, end - radius), min(n, end + radius) + 1)
        ]
        best = max(spans, key=lambda span: _preference(text, target, *span), default=(start, end))
        if best == (start, end) or (abs(best[0] - start) < radius and abs(best[1] - end) < radius):
            return best
        start, end = best
    return start, end


def _preference(text: str, target: str, start: int, end: int) -> tuple[float, int, int]:
    """Order of spans: most similar, then shortest, then earliest."""
    return similarity(text[start:end], target), start - end, -start


def _take_substitutions(text: str, target: str, start: int, end: int) -> tuple[int, int]:
    """Rule 3: widen over characters the target replaced rather than dropped.

    When the target has `u` more unmatched non-space characters at an edge than the stretch
    has, and the document has non-space characters just outside the stretch, the stretch takes
    in 1 to u + 1 of them (never crossing whitespace), whichever scores best: one each for
    substitutions, one more for a transposition ('qucik' for 'quick'). Unmatched means
    droppable without shortening the longest common subsequence, so no alignment tie decides.
    """
    head_t, head_c = target[:_EDGE], text[start : start + _EDGE]
    lead = _spare(head_t, head_c, head=True) - _spare(head_c, head_t, head=True)
    if lead > 0 and not _has_space(target[:lead]):
        choices = [start - k for k in range(1, lead + 2) if _solid(text, start - k, start)]
        if choices:
            start = max(choices, key=lambda s: (similarity(text[s:end], target), s))
    tail_t, tail_c = target[-_EDGE:], text[max(start, end - _EDGE) : end]
    trail = _spare(tail_t, tail_c, head=False) - _spare(tail_c, tail_t, head=False)
    if trail > 0 and not _has_space(target[-trail:]):
        choices = [end + k for k in range(1, trail + 2) if _solid(text, end, end + k)]
        if choices:
            end = max(choices, key=lambda e: (similarity(text[start:e], target), -e))
    return start, end


def _spare(a: str, b: str, *, head: bool) -> int:
    """How many characters at the head (or tail) of `a` can go without shortening LCS(a, b)."""
    full = LCSseq.similarity(a, b)
    count = 0
    while count < len(a):
        rest = a[count + 1 :] if head else a[: len(a) - count - 1]
        if LCSseq.similarity(rest, b) < full:
            break
        count += 1
    return count


def _blocks(a: str, b: str) -> list[MatchingBlock]:
    return [block for block in Indel.opcodes(a, b).as_matching_blocks() if block.size]


def _solid(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] lies inside the text and holds no whitespace."""
    return 0 <= start and end <= len(text) and not _has_space(text[start:end])


def _has_space(text: str) -> bool:
    return any(ch.isspace() for ch in text)


__all__ = ["FuzzyMatch", "find_closest", "similarity"]
