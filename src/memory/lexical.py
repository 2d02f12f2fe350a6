"""The lexical side of search: BM25 through SQLite FTS5, `ts_rank` through PostgreSQL.

The query's words (lower-cased, English stop words dropped) are OR-ed, so a memory sharing any
content word matches and more shared (rarer) words rank higher. FTS5 indexes with the Porter
stemmer, PostgreSQL with the `english` configuration, so "deploying" finds "deployed" on both.
Each returns `(id, score)` with higher = better; hybrid search divides by the best score of
the query (search.py), so only the relative sizes matter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from ..core.store.schema import MEMORY_FTS
from .records import m

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
_WORD = re.compile(r"\w+", re.UNICODE)


def terms(query: str) -> list[str]:
    """The query's content words, in order, once each."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        if word not in STOP_WORDS and word not in seen:
            seen[word] = None
    return list(seen)[:32]


async def lexical_scores(
    conn: AsyncConnection, namespaces: Sequence[str], query: str, limit: int
) -> list[tuple[str, float]]:
    words = terms(query)
    if not words or not namespaces:
        return []
    if conn.dialect.name == "sqlite":
        match = " OR ".join(f'"{w}"' for w in words)
        fts = sa.table(MEMORY_FTS, sa.column("rowid"))
        rank = sa.func.bm25(sa.literal_column(MEMORY_FTS))  # negative: lower is better
        statement = (
            sa.select(m.c.id, (-rank).label("score"))
            .select_from(fts.join(m, m.c.seq == fts.c.rowid))
            .where(sa.literal_column(MEMORY_FTS).op("MATCH")(match), m.c.namespace.in_(list(namespaces)))
            .order_by(rank)
            .limit(limit)
        )
    else:
        tsquery = sa.func.to_tsquery(sa.literal_column("'english'::regconfig"), " | ".join(words))
        tsv = sa.literal_column("af_memories.tsv")
        rank = sa.func.ts_rank(tsv, tsquery)
        statement = (
            sa.select(m.c.id, rank.label("score"))
            .where(tsv.op("@@")(tsquery), m.c.namespace.in_(list(namespaces)))
            .order_by(rank.desc())
            .limit(limit)
        )
    return [(row[0], float(row[1])) for row in (await conn.execute(statement)).all()]
