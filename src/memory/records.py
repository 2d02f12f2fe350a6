"""Memory rows in the app store (tables `af_memories`, `af_memory_namespaces`, schema.py).

SQLAlchemy Core only, one code path for SQLite and PostgreSQL. A namespace is stored as its
labels, each escaped (`%` → `%25`, `.` → `%2E`, NUL → `%00`), joined by "." (`ns_key`), so no
label value can reach another namespace: a user id `john.smith@example.com` is one label, and
`alice` does not see `alice.project`'s memories (schema version 6 re-encoded older rows,
store/migrate.py). A prefix `p` covers `p` and every key starting with `p + "."`: since a
label's own dots are escaped, that is exactly the namespaces below it. Every write in a namespace moves its
`af_memory_namespaces.version` on in the same transaction; that is how each process's vector
cache (cache.py) learns, with one indexed read, that another worker wrote.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import sqlalchemy as sa
import sqlalchemy.exc
from sqlalchemy.ext.asyncio import AsyncConnection

from ..core.store import schema as t

SEP = "."
m = t.memories
ns_table = t.memory_namespaces
changes = t.memory_changes


_ESCAPES = {"%": "%25", ".": "%2E", "\x00": "%00"}
_UNESCAPE = re.compile(r"%(25|2E|00)")
_PLAIN = {"25": "%", "2E": ".", "00": "\x00"}


def escape_label(label: str) -> str:
    if "%" not in label and "." not in label and "\x00" not in label:
        return label
    return "".join(_ESCAPES.get(c, c) for c in label)


def unescape_label(text: str) -> str:
    return _UNESCAPE.sub(lambda found: _PLAIN[found.group(1)], text) if "%" in text else text


def ns_key(namespace: Sequence[str]) -> str:
    """The stored form of `namespace`: escaped labels joined by "."; one-to-one."""
    return SEP.join(escape_label(label) for label in namespace)


def ns_tuple(key: str) -> tuple[str, ...]:
    return tuple(unescape_label(part) for part in key.split(SEP))


def user_of(key: str) -> str:
    """The user (first label) of a stored namespace key."""
    return unescape_label(key.split(SEP, 1)[0])


def conversation_of(namespace: Sequence[str]) -> str | None:
    """The conversation a `(user, "conversation", id, ...)` namespace belongs to."""
    return namespace[2] if len(namespace) >= 3 and namespace[1] == "conversation" else None


def under(column: Any, prefixes: Iterable[str]) -> Any:
    """`column` is one of `prefixes` or a namespace below one of them."""
    return sa.or_(
        *[sa.or_(column == p, column.startswith(p + SEP, autoescape=True)) for p in prefixes]
    )


@dataclass
class MemoryRow:
    seq: int
    id: str
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    text: str
    embedder: str | None
    vector: bytes | None
    created_at: float
    updated_at: float

    @classmethod
    def of(cls, row: Any) -> MemoryRow:
        return cls(
            seq=row.seq, id=row.id, namespace=ns_tuple(row.namespace), key=row.key,
            value=orjson.loads(row.value), text=row.text, embedder=row.embedder,
            vector=row.vector, created_at=row.created_at, updated_at=row.updated_at,
        )


ROW_COLUMNS = (m.c.seq, m.c.id, m.c.namespace, m.c.key, m.c.value, m.c.text, m.c.embedder,
               m.c.vector, m.c.created_at, m.c.updated_at)


async def bump(conn: AsyncConnection, namespace: str, seqs: Iterable[int]) -> None:
    """Move `namespace`'s version on (creating its row) and log the rows `seqs` it changed,
    inside the caller's transaction."""
    version = await _next_version(conn, namespace)
    rows = [{"namespace": namespace, "version": version, "seq": seq} for seq in sorted(set(seqs))]
    if rows:
        await conn.execute(changes.insert(), rows)
    if version > t.MEMORY_CHANGES_KEPT and version % 16 == 0:  # prune now and then
        await conn.execute(changes.delete().where(
            changes.c.namespace == namespace, changes.c.version <= version - t.MEMORY_CHANGES_KEPT
        ))


async def _next_version(conn: AsyncConnection, namespace: str) -> int:
    step = (
        ns_table.update().where(ns_table.c.namespace == namespace)
        .values(version=ns_table.c.version + 1).returning(ns_table.c.version)
    )
    row = (await conn.execute(step)).first()
    if row is not None:
        return int(row[0])
    try:
        async with conn.begin_nested():  # another worker may create it at the same moment
            await conn.execute(
                ns_table.insert().values(namespace=namespace, user_id=user_of(namespace), version=1)
            )
        return 1
    except sqlalchemy.exc.IntegrityError:
        return int((await conn.execute(step)).scalar_one())


async def insert_many(conn: AsyncConnection, namespace: tuple[str, ...], rows: list[dict[str, Any]]) -> list[int]:
    """Insert many rows of one namespace in one statement (each `{id, key, value, text,
    embedder, vector}`), move the namespace's version on once; their seqs."""
    now = time.time()
    ns = ns_key(namespace)
    await conn.execute(m.insert(), [
        {**row, "user_id": namespace[0], "namespace": ns, "conversation_id": conversation_of(namespace),
         "value": orjson.dumps(row["value"]).decode(), "created_at": now, "updated_at": now}
        for row in rows
    ])
    seqs = []
    ids = [row["id"] for row in rows]
    for start in range(0, len(ids), 500):
        found = dict((await conn.execute(sa.select(m.c.id, m.c.seq).where(m.c.id.in_(ids[start : start + 500])))).all())
        seqs.extend(int(found[i]) for i in ids[start : start + 500])
    await bump(conn, ns, seqs)
    return seqs


async def insert(
    conn: AsyncConnection, *, id: str, namespace: tuple[str, ...], key: str, value: dict[str, Any],
    text: str, embedder: str | None, vector: bytes | None, now: float | None = None,
    bump_version: bool = True,
) -> int:
    """Insert a row; its `seq`. `bump_version=False`: the caller bumps once for many rows."""
    now = time.time() if now is None else now
    ns = ns_key(namespace)
    done = await conn.execute(m.insert().values(
        id=id, user_id=namespace[0], namespace=ns, key=key, conversation_id=conversation_of(namespace),
        value=orjson.dumps(value).decode(), text=text, embedder=embedder, vector=vector,
        created_at=now, updated_at=now,
    ))
    seq = int(done.inserted_primary_key[0])  # type: ignore[index]
    if bump_version:
        await bump(conn, ns, [seq])
    return seq


HISTORY_KEPT = 50  # previous versions kept per item (the oldest go first beyond that)


async def update(
    conn: AsyncConnection, row: MemoryRow, *, value: dict[str, Any], text: str,
    embedder: str | None, vector: bytes | None,
) -> None:
    """Replace `row`'s value and text. When the text changes, the previous text and value go
    to the row's `history` (newest last), so an update never loses what it replaced."""
    now = time.time()
    values: dict[str, Any] = {
        "value": orjson.dumps(value).decode(), "text": text, "embedder": embedder, "vector": vector,
        "updated_at": now,
    }
    if text != row.text:
        stored = (await conn.execute(sa.select(m.c.history).where(m.c.seq == row.seq))).scalar()
        history = orjson.loads(stored) if stored else []
        history.append({"text": row.text, "value": row.value, "created_at": row.updated_at, "replaced_at": now})
        values["history"] = orjson.dumps(history[-HISTORY_KEPT:]).decode()
    await conn.execute(m.update().where(m.c.seq == row.seq).values(**values))
    await bump(conn, ns_key(row.namespace), [row.seq])


async def touch(conn: AsyncConnection, row: MemoryRow) -> None:
    """Mark `row` as just saved again (a true duplicate): its text and value stay."""
    await conn.execute(m.update().where(m.c.seq == row.seq).values(updated_at=time.time()))
    await bump(conn, ns_key(row.namespace), [row.seq])


async def history_of(conn: AsyncConnection, seq: int) -> list[dict[str, Any]]:
    stored = (await conn.execute(sa.select(m.c.history).where(m.c.seq == seq))).scalar()
    return list(orjson.loads(stored)) if stored else []


async def delete(conn: AsyncConnection, seq: int, namespace: tuple[str, ...]) -> None:
    await conn.execute(m.delete().where(m.c.seq == seq))
    await bump(conn, ns_key(namespace), [seq])


async def by_key(conn: AsyncConnection, namespace: tuple[str, ...], key: str) -> MemoryRow | None:
    row = (await conn.execute(
        sa.select(*ROW_COLUMNS).where(m.c.namespace == ns_key(namespace), m.c.key == key)
    )).first()
    return MemoryRow.of(row) if row else None


async def by_id(conn: AsyncConnection, memory_id: str) -> MemoryRow | None:
    row = (await conn.execute(sa.select(*ROW_COLUMNS).where(m.c.id == memory_id))).first()
    return MemoryRow.of(row) if row else None


async def by_ids(conn: AsyncConnection, ids: Sequence[str]) -> dict[str, MemoryRow]:
    if not ids:
        return {}
    rows = (await conn.execute(sa.select(*ROW_COLUMNS).where(m.c.id.in_(list(ids))))).all()
    return {row.id: MemoryRow.of(row) for row in rows}


async def by_seqs(conn: AsyncConnection, seqs: Sequence[int]) -> dict[int, MemoryRow]:
    if not seqs:
        return {}
    rows = (await conn.execute(sa.select(*ROW_COLUMNS).where(m.c.seq.in_([int(s) for s in seqs])))).all()
    return {row.seq: MemoryRow.of(row) for row in rows}


async def namespace_versions(conn: AsyncConnection, prefixes: Sequence[str]) -> dict[str, int]:
    """Every stored namespace equal to or below one of `prefixes`, with its version."""
    if not prefixes:
        return {}
    users = sorted({user_of(p) for p in prefixes})
    rows = (await conn.execute(
        sa.select(ns_table.c.namespace, ns_table.c.version).where(
            ns_table.c.user_id.in_(users), under(ns_table.c.namespace, prefixes)
        )
    )).all()
    return {row[0]: row[1] for row in rows}


async def changed_since(conn: AsyncConnection, namespace: str, version: int) -> list[int] | None:
    """The seqs of the rows written or deleted in `namespace` after `version`; None when the
    log no longer reaches back that far (read the namespace again)."""
    rows = (await conn.execute(
        sa.select(changes.c.version, changes.c.seq).where(changes.c.namespace == namespace, changes.c.version > version)
    )).all()
    if rows and min(r[0] for r in rows) != version + 1:
        return None
    return sorted({r[1] for r in rows})


def covered(namespace: str, prefixes: Sequence[str]) -> bool:
    """The stored key `namespace` is one of `prefixes` or below one."""
    return any(namespace == p or namespace.startswith(p + SEP) for p in prefixes)


def call_key(message_id: str, tool_call_id: str) -> str:
    """The id of a memory a tool call saves: the same call, replayed, saves once."""
    return hashlib.sha256(f"{message_id}\x00{tool_call_id}".encode()).hexdigest()[:32]
