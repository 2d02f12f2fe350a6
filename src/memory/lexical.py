"""The lexical side of search: BM25 through SQLite FTS5, `ts_rank` through PostgreSQL.

The query's words (lower-cased, English stop words dropped) are OR-ed, so a memory sharing any
content word matches and more shared (rarer) words rank higher. FTS5 indexes with the Porter
stemmer, PostgreSQL with the `english` configuration, so "deploying" finds "deployed" on both.
A lexical query does not score every row that shares a word with it (at 50,000 memories a
common word matches thousands, and BM25 / `ts_rank` of each was most of a search's time):
each word is first counted up to `COMMON` rows (a LIMIT, which stops early); words found more
often than that add little to BM25 and are left out of the OR when a rarer word remains (the
coverage factor below still rewards a memory holding them); when all are common, the words are
AND-ed instead. A dotted or snake name in the query (`logging.basicConfig`) is searched as a
phrase too on SQLite (FTS5 `"logging basicconfig"`: a rare term to BM25, so the memory holding
the name outranks shorter ones that only mention its parts; PostgreSQL's `ts_rank` ranks
phrases poorly, its lexical-only MRR fell, so it keeps the words). Each returns
`(seq, score)`, higher = better: the backend's score divided by the best of the query, times the share of the query's words the memory contains, times
`1 - NAME_MISS · (share of the query's names the memory does not hold whole)`: a memory about
`mimetypes.MimeTypes.guess_type` or `bisect.insort_left` is not about `mimetypes.guess_type`
or `bisect.insort`, though it shares every word. The second factor keeps
a memory that shares one common word with a long question (the best BM25 hit of a query
that really matched nothing) from getting the whole lexical weight in hybrid search.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from ..core.store.schema import MEMORY_FTS
from .records import m
from .words import coverage, name_words, names, names_held, stem, terms

# the share of the lexical score a memory loses per query name it does not hold whole
# (words.names_held); chosen on the benchmark's tune split (0 / 0.25 / 0.5 / 1 gave SQLite
# keyword MRR 0.952 / 0.976 / 0.976 / 1.0, PostgreSQL 0.929 / 0.976 / 1.0 / 1.0): 0.5, not 1,
# so a memory that writes a name loosely ("call basicConfig") still counts for something
NAME_MISS = 0.5
COMMON = 400  # a word in more rows than this is common (see above)


async def _common(conn: AsyncConnection, words: list[str]) -> set[str]:
    """The words found in more than `COMMON` rows (over all users: an estimate is enough),
    counted in one statement (one round trip, not one per word)."""
    if conn.dialect.name == "sqlite":
        probe = f"(SELECT count(*) FROM (SELECT 1 FROM {MEMORY_FTS} WHERE {MEMORY_FTS} MATCH :q{{i}} LIMIT :n))"
        params: dict[str, object] = {f"q{i}": f'"{w}"' for i, w in enumerate(words)}
    else:
        probe = ("(SELECT count(*) FROM (SELECT 1 FROM af_memories "
                 "WHERE tsv @@ to_tsquery('english'::regconfig, :q{i}) LIMIT :n) AS hits{i})")
        params = {f"q{i}": w for i, w in enumerate(words)}
    params["n"] = COMMON + 1
    statement = sa.text("SELECT " + ", ".join(probe.format(i=i) for i in range(len(words))))
    counts = (await conn.execute(statement, params)).one()
    return {w for w, count in zip(words, counts, strict=True) if int(count) > COMMON}


async def lexical_scores(
    conn: AsyncConnection, namespaces: Sequence[str], query: str, limit: int
) -> list[tuple[int, float]]:
    """`(seq, score)` of the best `limit` rows of `namespaces` for `query`."""
    words = terms(query)
    if not words or not namespaces:
        return []
    common = await _common(conn, words) if len(words) > 1 else set()
    rare = [w for w in words if w not in common]
    chosen, joiner = (rare, "OR") if rare else (words, "AND")
    phrases = names(query)
    if conn.dialect.name == "sqlite":
        match = "(" + f" {joiner} ".join(f'"{w}"' for w in chosen) + ")"
        match += "".join(f' OR "{" ".join(name_words(p))}"' for p in phrases)
        fts = sa.table(MEMORY_FTS, sa.column("rowid"))
        rank = sa.func.bm25(sa.literal_column(MEMORY_FTS))  # negative: lower is better
        statement = (
            sa.select(m.c.seq, (-rank).label("score"), m.c.text)
            .select_from(fts.join(m, m.c.seq == fts.c.rowid))
            .where(sa.literal_column(MEMORY_FTS).op("MATCH")(match), m.c.namespace.in_(list(namespaces)))
            .order_by(rank)
            .limit(limit)
        )
    else:
        words_query = "(" + (" | " if joiner == "OR" else " & ").join(chosen) + ")"
        tsquery = sa.func.to_tsquery(sa.literal_column("'english'::regconfig"), words_query)
        tsv = sa.literal_column("af_memories.tsv")
        rank = sa.func.ts_rank(tsv, tsquery)
        statement = (
            sa.select(m.c.seq, rank.label("score"), m.c.text)
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
    return [(row[0], float(row[1]) / best * coverage(stems, row[2]) * (1 - NAME_MISS * (1 - names_held(phrases, row[2]))))
            for row in rows]
