"""Schema creation and upgrades, by one process at a time.

Every process opens the store at start, and deployments start their workers together, so
"create the tables if missing" is a race: two processes both see a table missing and both
create it (`table af_meta already exists` on SQLite; a unique violation on `pg_type` on
PostgreSQL). So the whole check-create-upgrade runs in one transaction under a lock:

- SQLite: `BEGIN EXCLUSIVE` (other writers wait on `busy_timeout`; WAL readers go on);
- PostgreSQL: `pg_advisory_xact_lock`, released when the transaction ends.

DDL is transactional on both, so a process that dies half-way leaves nothing behind, and the
schema version in `af_meta` is written in the same transaction as the tables it describes.

Upgrades: `STEPS[n]` brings a version n-1 database to version n (plain SQLAlchemy against
the connection); new tables come from `create_all`, so a step only changes tables that
existed before. A newer artifactflow upgrades an older database the first time it opens it;
an older artifactflow refuses a newer database instead of guessing.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from ...errors import ConfigError
from . import schema as t

# Any 64-bit number unique to this application's schema lock.
ADVISORY_LOCK_KEY = 0x6166_5F73_6368  # "af_sch"

def _v2_message_columns(conn: Connection) -> None:
    """Version 2: `af_messages.cancel_requested_at` and `af_messages.decisions`."""
    for column in t.MESSAGE_COLUMNS_V2:
        added = column()
        kind = added.type.compile(dialect=conn.dialect)
        conn.execute(sa.text(f"ALTER TABLE {t.messages.name} ADD COLUMN {added.name} {kind}"))


def _v3_result_references(conn: Connection) -> None:
    """Version 3: recorded model requests may refer to a stored `tool_complete` result instead
    of repeating it (`replay/result_refs.py`). No table changes; the version number makes an
    older artifactflow, which cannot resolve those references, refuse the database instead of
    exporting empty tool messages."""


# Version 4 (long-term memory: `af_memories`, `af_memory_namespaces` and the full-text index
# made with them) adds tables only: `create_all` makes them, so it has no step.


def _v5_conversation_project(conn: Connection) -> None:
    """Version 5: `af_conversations.project` (with its index), the project a conversation's
    runs recall memories from. Existing conversations belong to no project."""
    table = t.conversations.name
    present = {c["name"] for c in sa.inspect(conn).get_columns(table)}
    for column in t.CONVERSATION_COLUMNS_V5:
        added = column()
        if added.name in present:  # a database created at this version by another step order
            continue
        kind = added.type.compile(dialect=conn.dialect)
        conn.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN {added.name} {kind}"))
        conn.execute(sa.text(f"CREATE INDEX IF NOT EXISTS ix_{table}_{added.name} ON {table} ({added.name})"))


def _v6_memory_namespaces(conn: Connection) -> None:
    """Version 6: memory namespaces are stored with each label escaped (`%` → `%25`, `.` →
    `%2E`, NUL → `%00`) so no label can reach another namespace (`memory/records.py`), and
    `af_memories.history` keeps the versions an update replaced; on PostgreSQL the `tsv`
    column is rebuilt to split dotted and snake names as SQLite's index does.

    Before, labels were joined by "." as they were. Only the user (the first label) could
    hold a dot: project names and conversation ids were refused with one, and LangGraph
    refuses dotted labels in its own operations. So a stored key is split as the row's
    `user_id` followed by the rest split on "." (a namespace-table key the same way).
    Keys that change move in two passes (first to a unique temporary key), since a new key
    may be another row's old one (user `a%` becomes `a%25`, which another user may be)."""
    table = t.memories.name
    present = {c["name"] for c in sa.inspect(conn).get_columns(table)}
    for column in t.MEMORY_COLUMNS_V6:
        added = column()
        if added.name not in present:
            kind = added.type.compile(dialect=conn.dialect)
            conn.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN {added.name} {kind}"))
    if conn.dialect.name == "postgresql":  # the tsvector splits dotted and snake names (schema.py)
        conn.execute(sa.text("DROP INDEX IF EXISTS ix_af_memories_tsv"))
        conn.execute(sa.text("ALTER TABLE af_memories DROP COLUMN IF EXISTS tsv"))
        conn.execute(sa.text(t.POSTGRES_MEMORY_TSV))
        conn.execute(sa.text("CREATE INDEX ix_af_memories_tsv ON af_memories USING gin (tsv) WITH (fastupdate = off)"))
    m, ns = t.memories, t.memory_namespaces
    moved = {
        seq: new for seq, user, old in conn.execute(sa.select(m.c.seq, m.c.user_id, m.c.namespace)).all()
        if (new := _escaped_key(user, old)) != old
    }
    for seq in moved:
        conn.execute(m.update().where(m.c.seq == seq).values(namespace=f"\x01moving\x01{seq}"))
    for seq, new in moved.items():
        conn.execute(m.update().where(m.c.seq == seq).values(namespace=new))
    renamed = [
        (old, new, user, version)
        for old, user, version in conn.execute(sa.select(ns.c.namespace, ns.c.user_id, ns.c.version)).all()
        if (new := _escaped_key(user, old)) != old
    ]
    for old, *_ in renamed:
        conn.execute(ns.delete().where(ns.c.namespace == old))
    for _, new, user, version in renamed:  # one version on: every cache reads it again
        conn.execute(ns.insert().values(namespace=new, user_id=user, version=version + 1))
    if renamed:
        conn.execute(t.memory_changes.delete().where(
            t.memory_changes.c.namespace.in_([old for old, *_ in renamed])
        ))


def _escaped_key(user: str, old: str) -> str:
    def escape(label: str) -> str:
        return label.replace("%", "%25").replace(".", "%2E").replace("\x00", "%00")

    rest = old[len(user) + 1 :].split(".") if old.startswith(user + ".") else []
    if old != user and not old.startswith(user + "."):  # not written by this app: split as it was
        return ".".join(escape(label) for label in old.split("."))
    return ".".join([escape(user), *(escape(label) for label in rest)])


# Version 7 (the agent platform: assistants, run configs, crons, webhook deliveries) adds
# tables only: `create_all` makes them, so it has no step.


def _v8_thread_public_ids(conn: Connection) -> None:
    """Version 8: `ap_threads.public_id` (issue 34: thread ids are a space per user). Existing
    threads keep their id as both key and public id (NULL)."""
    table = t.ap_threads.name
    present = {c["name"] for c in sa.inspect(conn).get_columns(table)}
    for column in t.AP_THREAD_COLUMNS_V8:
        added = column()
        if added.name in present:  # made at this version by `create_all` (a version 6 database)
            continue
        kind = added.type.compile(dialect=conn.dialect)
        conn.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN {added.name} {kind}"))


# Version 9 (`ap_renderings`, issue 36) adds a table only: `create_all` makes it, so it has no
# step.


# version → step that upgrades a database from version - 1. Version 1 has no step.
STEPS: dict[int, Callable[[Connection], None]] = {
    2: _v2_message_columns,
    3: _v3_result_references,
    5: _v5_conversation_project,
    6: _v6_memory_namespaces,
    8: _v8_thread_public_ids,
}


def upgrade(conn: Connection) -> int:
    """Create missing tables and run upgrade steps; return the version before (0: new)."""
    found = sa.inspect(conn).has_table(t.meta.name)
    current = 0
    if found:
        row = conn.execute(sa.select(t.meta.c.value).where(t.meta.c.key == "schema")).first()
        current = int(row[0]) if row else 0
    if current > t.SCHEMA_VERSION:
        raise ConfigError(
            f"the database schema is version {current}, newer than this artifactflow "
            f"({t.SCHEMA_VERSION}); upgrade artifactflow"
        )
    if current == t.SCHEMA_VERSION:
        return current
    t.metadata.create_all(conn)  # new tables, in their latest form
    for version in range(current + 1, t.SCHEMA_VERSION + 1):
        if current and version in STEPS:
            STEPS[version](conn)  # changes to tables that existed before
    if current:
        conn.execute(
            t.meta.update().where(t.meta.c.key == "schema").values(value=str(t.SCHEMA_VERSION))
        )
    else:
        conn.execute(t.meta.insert().values(key="schema", value=str(t.SCHEMA_VERSION)))
    return current


async def migrate(engine: AsyncEngine) -> int:
    """Bring the schema to `SCHEMA_VERSION` under the backend's lock; safe from any number of
    processes at once. Returns the version found before (0: a new database)."""
    if engine.dialect.name == "sqlite":
        async with engine.connect() as conn:
            # No driver-managed transaction: we issue BEGIN EXCLUSIVE ourselves.
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.exec_driver_sql("BEGIN EXCLUSIVE")
            try:
                before = await conn.run_sync(upgrade)
            except BaseException:
                await conn.exec_driver_sql("ROLLBACK")
                raise
            await conn.exec_driver_sql("COMMIT")
            return before
    async with engine.begin() as conn:
        await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(ADVISORY_LOCK_KEY)))
        return await conn.run_sync(upgrade)
