"""When a new memory is a duplicate of a stored one, and nothing else is.

Merging used to take any stored text with cosine ≥ 0.95 and replace it, which on API docs
replaced `time.strftime` by `time.strptime` and `re.sub` by `re.subn`: near vectors are not
the same fact. Now a new text merges with a stored one only when

- both normalise to the same text (case, runs of white space, and sentence punctuation that
  ends a word: "I take my coffee black, with no sugar" = "I take my coffee black with no
  sugar."); the stored memory stays as it is (its time moves on); or
- their vectors are near-identical (cosine ≥ `memory.dedupe_threshold`) AND the new text
  contains the stored one once both are normalised ("Falcon ships in Q3" then "Falcon ships in
  Q3, on a Friday"): the new text replaces it and the stored text goes to the item's history.

Dots inside a word (`re.sub`), `+` and other symbols are kept, so `C` and `C++`, `re.sub` and
`re.subn` (the shorter is inside the longer, but as a whole word only) stay apart.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np
import sqlalchemy as sa

from . import records
from .records import MemoryRow, m, ns_key
from .search import top

if TYPE_CHECKING:
    from .cache import VectorCache
    from .embedders import Embedder

DUPLICATE_CANDIDATES = 8  # nearest stored vectors checked by their text

_SENTENCE_MARK = re.compile(r"[.,;:!?]+(?=\s|$)")
_SPACE = re.compile(r"\s+")


def normalised(text: str) -> str:
    return _SPACE.sub(" ", _SENTENCE_MARK.sub("", text.casefold())).strip()


def same_text(stored: str, new: str) -> bool:
    return normalised(stored) == normalised(new)


def duplicates(stored: str, new: str) -> bool:
    """`new` duplicates `stored`: the same normalised text, or it contains the stored text as
    whole words (so it is the stored fact with something added, never a different name)."""
    old, fresh = normalised(stored), normalised(new)
    if old == fresh:
        return True
    if not old or len(old) > len(fresh):
        return False
    return re.search(rf"(?<!\S){re.escape(old)}(?!\S)", fresh) is not None


async def find_duplicate(
    conn: Any, cache: VectorCache, namespace: tuple[str, ...], text: str, vector: bytes | None,
    embedder: Embedder | None, threshold: float,
) -> MemoryRow | None:
    """A memory of `namespace` that `text` duplicates, or None: the exact text, else the
    closest vectors (cosine ≥ `threshold`), checked by their text (`duplicates`)."""
    key = ns_key(namespace)
    row = (await conn.execute(
        sa.select(*records.ROW_COLUMNS).where(m.c.namespace == key, m.c.text == text).limit(1)
    )).first()
    if row is not None:
        return MemoryRow.of(row)
    if vector is None or embedder is None:
        return None
    query = np.frombuffer(vector, dtype=np.float32)
    cache.use(embedder.name, int(query.shape[0]))
    candidates = await cache.candidates(conn, [key])
    if not candidates.size:
        return None
    cosine = candidates.cosine(query)
    cosine[~candidates.has_vector | candidates.dead] = -1.0
    close = [int(i) for i in top(cosine, DUPLICATE_CANDIDATES) if cosine[i] >= threshold]
    rows = await records.by_seqs(conn, [int(candidates.seqs[i]) for i in close])
    for i in close:
        found = rows.get(int(candidates.seqs[i]))
        if found is not None and found.namespace == tuple(namespace) and duplicates(found.text, text):
            return found
    return None
