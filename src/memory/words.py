"""Words: the stop words left out of queries and static embeddings, and a light stemmer for
telling which of a query's words a text contains (hybrid search's lexical coverage)."""

from __future__ import annotations

import re

STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves""".split()
)
# letters and digits only: `heapq.nlargest` and `capture_output` are two words each, as both
# backends index them (FTS5's unicode61 splits at "." and "_"; PostgreSQL's tsvector is made
# from the text with "." and "_" turned into spaces, schema.py)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_SUFFIXES = ("ingly", "edly", "ing", "ies", "ied", "ed", "es", "ly", "s")


def terms(query: str) -> list[str]:
    """The query's content words, in order, once each."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        if word not in STOP_WORDS and word not in seen:
            seen[word] = None
    return list(seen)[:32]




_NAME = re.compile(r"[^\W_]+(?:[._][^\W_]+)+", re.UNICODE)


def names(query: str) -> list[str]:
    """The dotted and snake names of the query (`logging.basicconfig`, `capture_output`),
    lower-cased, once each."""
    return list(dict.fromkeys(_NAME.findall(query.lower())))[:8]


def name_words(name: str) -> list[str]:
    """A name's words in order (`logging.basicconfig` → logging, basicconfig): the phrase
    the full-text index matches it by."""
    return _WORD.findall(name)


def names_held(names: list[str], text: str) -> float:
    """The share of `names` that `text` holds whole: `bisect.insort` is held by
    "bisect.insort(a, x)" but not by "bisect.insort_left(...)", and `mimetypes.guess_type`
    not by "mimetypes.MimeTypes.guess_type" (another name that shares its words)."""
    if not names:
        return 1.0
    lowered = text.lower()
    return sum(re.search(rf"(?<![\w.]){re.escape(n)}(?!\w|\.\w)", lowered) is not None for n in names) / len(names)


def stem(word: str) -> str:
    """A crude stem: enough to see "deploys" and "deployed" share "deploy"."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def coverage(stems: list[str], text: str) -> float:
    """The share of `stems` (`stem` of the query's terms) found in `text`, as substrings of its
    lower-cased text: cheap (a search reads up to a few hundred texts), and a stem inside a
    longer word counts too, which only makes the factor a little generous."""
    if not stems:
        return 0.0
    lowered = text.lower()
    return sum(s in lowered for s in stems) / len(stems)
