"""The lexical side of search: BM25 through SQLite FTS5, `ts_rank` through PostgreSQL.

The query's words (lower-cased, English stop words dropped) are OR-ed, so a memory sharing any
content word matches and more shared (rarer) words rank higher. FTS5 indexes with the Porter
stemmer, PostgreSQL with the `english` configuration, so "deploying" finds "deployed" on both.
Each returns `(id, score)` with higher = better: the backend's score divided by the best of
the query, times the share of the query's words the memory contains. The second factor keeps
a memory that shares one common word with a long question (the best BM25 hit of a query
that really matched nothing) from getting the whole lexical weight in hybrid search.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from ..core.store.schema import MEMORY_FTS
from .records import m
from .words import coverage, stem, terms


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
            sa.select(m.c.id, (-rank).label("score"), m.c.text)
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
            sa.select(m.c.id, rank.label("score"), m.c.text)
            # `namespace || ''`: keeps the planner off the namespace index (every row of a
            # user's namespace matches it) and on the GIN index of `tsv` (10x faster at 10,000)
            .where(tsv.op("@@")(tsquery), m.c.namespace.concat("").in_(list(namespaces)))
            .order_by(rank.desc())
            .limit(limit)
        )
    rows = (await conn.execute(statement)).all()
    best = max((float(row[1]) for row in rows), default=0.0)
    if best <= 0:
        return []
    stems = [stem(w) for w in words]
    return [(row[0], float(row[1]) / best * coverage(stems, row[2])) for row in rows]
