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
