"""Reads of a conversation that cost O(page), not O(conversation length).

Opening a long conversation should not get slower as it grows. The conversation tree
(`ConversationRecords.list_messages`) returns every message by contract, and reading a thread's
values from its events touches every event of every message; these reads instead use what each
message row already holds (its question, its final answer, status, metrics: a per-message
summary written once when the run ends) and reach only the rows they return:

- `thread_head`: the conversation row and its active message (two primary-key lookups): what
  "open the thread" and "the thread's state" need;
- `branch_page`: a page of the active branch, newest first, walking `parent_id` up from a
  message with a recursive query bounded by the page size (one primary-key lookup per row);
  `before` continues from the last page;
- `conversation_page`: a page of conversations (most recently active first, the `updated_at`
  index) each with its active message: thread search without reading any thread's messages.

They are plain functions over the store so the protocol server (and our own API) can call them
without a mixin change; the statements are built once and reused (SQLAlchemy's compiled cache
keys them on their shape).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect

from . import schema as t
from .codec import event_record, loads
from .conversation_records import _message
from .rows import ConversationRow, EventRow, MessageRow
from .sqlite_writer import sqlite_writer_for

if TYPE_CHECKING:
    from .repository import AppStore

MAX_PAGE = 1000


@dataclass(frozen=True)
class ThreadHead:
    """A conversation and its active message (None before the first message)."""

    conversation: ConversationRow
    active: MessageRow | None


@dataclass(frozen=True)
class BranchPage:
    """Messages of a branch, newest first; `before` asks for the next (older) page, None at
    the root."""

    messages: list[MessageRow]
    before: str | None


def _check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be between 1 and {MAX_PAGE}, got {limit}")


def _conversation_query() -> sa.Select[tuple[object, ...]]:
    return sa.select(t.conversations).where(t.conversations.c.id == sa.bindparam("cid"))


def _message_query() -> sa.Select[tuple[object, ...]]:
    return sa.select(t.messages).where(t.messages.c.id == sa.bindparam("mid"))


def _branch_query() -> sa.Select[tuple[object, ...]]:
    """From message `start`, up its parents, at most `limit` rows, newest first."""
    m = t.messages
    first = sa.select(m.c.id, m.c.parent_id, sa.literal(1).label("depth")).where(
        m.c.id == sa.bindparam("start")
    )
    path = first.cte("branch_path", recursive=True)
    step = (
        sa.select(m.c.id, m.c.parent_id, (path.c.depth + 1).label("depth"))
        .join(path, m.c.id == path.c.parent_id)
        .where(path.c.depth < sa.bindparam("limit"))
    )
    path = path.union_all(step)
    return sa.select(m).join(path, m.c.id == path.c.id).order_by(path.c.depth)


_CONVERSATION, _MESSAGE, _BRANCH = _conversation_query(), _message_query(), _branch_query()


async def thread_head(store: AppStore, conversation_id: str) -> ThreadHead | None:
    """The conversation and its active message; None if there is no such conversation."""
    rows = await store.fetch_rows(_CONVERSATION.params(cid=conversation_id))
    if not rows:
        return None
    conversation: ConversationRow = dict(rows[0])  # type: ignore[assignment]
    active_id = conversation["active_message_id"]
    active = None
    if active_id is not None:
        found = await store.fetch_rows(_MESSAGE.params(mid=active_id))
        active = _message(found[0]) if found else None
    return ThreadHead(conversation, active)


async def branch_page(
    store: AppStore, conversation_id: str, *, limit: int = 20, before: str | None = None
) -> BranchPage | None:
    """Up to `limit` messages of the active branch, newest first, starting at the active
    message, or at the parent of `before` (a message of this conversation) for the next page.
    None if there is no such conversation; `ValueError` for a bad `limit` or a `before` that is
    not a message of this conversation."""
    _check_limit(limit)
    head = await thread_head(store, conversation_id)
    if head is None:
        return None
    start: str | None
    if before is None:
        start = head.active["id"] if head.active is not None else None
    else:
        found = await store.fetch_rows(_MESSAGE.params(mid=before))
        if not found or found[0]["conversation_id"] != conversation_id:
            raise ValueError(f"message {before!r} is not in conversation {conversation_id!r}")
        start = found[0]["parent_id"]
    if start is None:
        return BranchPage([], None)
    rows = await store.fetch_rows(_BRANCH.params(start=start, limit=limit))
    messages = [_message(r) for r in rows]
    more = len(messages) == limit and messages[-1]["parent_id"] is not None
    return BranchPage(messages, messages[-1]["id"] if more else None)


async def conversation_page(
    store: AppStore,
    *,
    user_id: str | None = None,
    project: str | None = None,
    limit: int = 20,
    offset: int = 0,
) -> list[ThreadHead]:
    """Conversations, most recently active first, each with its active message: two queries
    whatever the conversations' lengths."""
    _check_limit(limit)
    if offset < 0:
        raise ValueError(f"offset must be ≥ 0, got {offset}")
    conversations = await store.list_conversations(
        user_id=user_id, limit=limit, offset=offset, project=project
    )
    wanted = [c["active_message_id"] for c in conversations if c["active_message_id"]]
    active: dict[str, MessageRow] = {}
    if wanted:
        rows = await store.fetch_rows(sa.select(t.messages).where(t.messages.c.id.in_(wanted)))
        active = {r["id"]: _message(r) for r in rows}
    return [
        ThreadHead(c, active.get(c["active_message_id"] or "")) for c in conversations
    ]


@dataclass(frozen=True)
class UsageSums:
    """The stored metrics of a conversation's messages, summed in the database
    (`usage_sums`): what `metrics.conversation_usage` folds, without reading the rows."""

    messages: int
    prompt: int
    completion: int
    total: int
    cost_usd: float
    priced: int  # messages with a cost
    unpriced: int  # messages with a call that had no price


def _metrics_document(dialect: str) -> sa.ColumnElement[object]:
    """`af_messages.metrics` (JSON text) as a JSON document: SQLite's JSON functions read the
    text as it is; PostgreSQL casts it (`CAST ... AS JSON` would give SQLite a number)."""
    if dialect == "sqlite":
        return sa.type_coerce(t.messages.c.metrics, sa.JSON)
    return sa.cast(t.messages.c.metrics, JSONB)


@functools.cache
def _usage_query(dialect: str) -> sa.Select[tuple[Any, ...]]:
    doc: Any = _metrics_document(dialect)
    zero = sa.literal(0)

    def number(*path: str) -> sa.ColumnElement[Any]:
        return sa.func.coalesce(sa.func.sum(doc[path].as_float()), zero)

    llm_calls = sa.func.coalesce(doc["llm_calls"].as_float(), zero)
    complete = doc["cost_complete"].as_boolean()
    unpriced = sa.case(
        (complete.is_(False), 1), (sa.and_(complete.is_(None), llm_calls > 0), 1), else_=0
    )
    cost = doc["cost_usd"].as_float()
    query: sa.Select[tuple[Any, ...]] = sa.select(  # type: ignore[assignment]
        sa.func.count(),
        number("tokens", "prompt"),
        number("tokens", "completion"),
        number("tokens", "total"),
        sa.func.coalesce(sa.func.sum(cost), zero),
        sa.func.count(cost),
        sa.func.coalesce(sa.func.sum(unpriced), zero),
    ).where(
        t.messages.c.conversation_id == sa.bindparam("cid"),
        t.messages.c.id != sa.bindparam("skip"),
    )
    return query


Bind = tuple[str, Any, "Callable[[Any], Any] | None"]  # (name, fixed value, bind processor)


@functools.cache
def _usage_sql(dialect: Dialect) -> tuple[str, tuple[Bind, ...]]:
    """`_usage_query` compiled once for the SQLite writer: its text and its positional
    parameters in order, each with its type's bind processor in this dialect (the JSON paths
    become `$."tokens"."prompt"`, ids go through their NUL-free column type) and the value of
    the literals; `cid` and `skip` are given per call. Through SQLAlchemy every call rebuilt
    the statement's cache key (a walk of its JSON paths and CASE) and took a pooled
    connection and a thread hop."""
    compiled = _usage_query(dialect.name).compile(dialect=dialect)
    order = []
    for name in compiled.positiontup or ():
        kind = dialect.type_descriptor(compiled.binds[name].type)
        order.append((name, compiled.params.get(name), kind.bind_processor(dialect)))
    return str(compiled), tuple(order)


def _usage_params(binds: tuple[Bind, ...], conversation_id: str, excluding: str) -> tuple[Any, ...]:
    given = {"cid": conversation_id, "skip": excluding}
    out = []
    for name, value, process in binds:
        value = given.get(name, value)
        out.append(value if process is None or value is None else process(value))
    return tuple(out)


async def usage_sums(store: AppStore, conversation_id: str, *, excluding: str) -> UsageSums:
    """The metrics of every message of the conversation but `excluding`, summed by the
    database in one statement: one row comes back however long the conversation is (its
    messages' rows, each with its list of calls, are not read and decoded here)."""
    writer = sqlite_writer_for(store)
    if writer is not None:  # every run's end asks: one hop, the SQL text made once
        sql, binds = _usage_sql(store.engine.dialect)
        params = _usage_params(binds, conversation_id, excluding)
        sums: list[Any] = list(await writer.run(lambda conn: conn.execute(sql, params).fetchone()))
    else:
        query = _usage_query(store.engine.dialect.name).params(cid=conversation_id, skip=excluding)
        sums = list((await store.fetch_rows(query))[0].values())
    count, prompt, completion, total, cost, priced, unpriced = sums
    return UsageSums(
        int(count), int(prompt), int(completion), int(total), float(cost), int(priced), int(unpriced)
    )


async def events_of(store: AppStore, message_ids: list[str]) -> dict[str, list[EventRow]]:
    """The stored events of every message in `message_ids`, in event order: one statement per
    500 messages, where `events(message_id)` per message costs a read (and its message's)
    each. The size of what comes back is the messages' logs: for reads that need them all."""
    out: dict[str, list[EventRow]] = {mid: [] for mid in message_ids}
    for start in range(0, len(message_ids), 500):
        query = (
            sa.select(t.events)
            .where(t.events.c.message_id.in_(message_ids[start : start + 500]))
            .order_by(t.events.c.message_id, t.events.c.event_id)
        )
        for row in await store.fetch_rows(query):
            out[row["message_id"]].append(event_record(row))
    return out


# plain SQL text: no column types to apply to each of a long thread's rows (a `select` of the
# same columns cost ~3× as much per row, most of it in SQLAlchemy's result processing)
_TREE = sa.text(
    "SELECT id, conversation_id, parent_id, status, waiting_for, created_at, updated_at "
    "FROM af_messages WHERE conversation_id = :cid ORDER BY created_at, id"
)
_TREE_KEYS: tuple[str, ...] = ("id", "conversation_id", "parent_id", "status", "waiting_for", "created_at", "updated_at")


async def message_tree(store: AppStore, conversation_id: str) -> list[dict[str, Any]]:
    """Every message of the conversation, in `list_messages`' order, with what the thread's
    shape and its states need (ids, parent, status, the pause it waits on, times), not its
    texts, metrics or decisions: the protocol's thread reads show each message from its
    stored rendering and read a whole row only to render one (`messages_by_id`)."""
    async with store.reads.connect() as conn:
        rows = (await conn.execute(_TREE, {"cid": conversation_id})).all()
    out: list[dict[str, Any]] = []
    for row in rows:
        record = dict(zip(_TREE_KEYS, row, strict=True))
        if record["waiting_for"] is not None:
            record["waiting_for"] = loads(record["waiting_for"])
        out.append(record)
    return out


async def messages_by_id(store: AppStore, message_ids: list[str]) -> dict[str, MessageRow]:
    """The whole rows of `message_ids` (one statement per 500)."""
    out: dict[str, MessageRow] = {}
    for start in range(0, len(message_ids), 500):
        query = sa.select(t.messages).where(t.messages.c.id.in_(message_ids[start : start + 500]))
        out.update((row["id"], _message(row)) for row in await store.fetch_rows(query))
    return out
