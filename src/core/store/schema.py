"""App-store tables (SQLAlchemy Core), shared by the SQLite and PostgreSQL backends.

JSON payloads are stored as text so both backends behave the same. `SCHEMA_VERSION` is
written to `meta`; `migrate.py` brings older databases forward.

Every string column strips NUL (U+0000) on the way in, replacing it with U+FFFD: PostgreSQL
cannot store NUL in text at all (SQLite can), and the two backends must agree on what was
stored. Event payloads are JSON, where NUL is escaped, so they keep the exact text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

from .version import SCHEMA_VERSION as SCHEMA_VERSION  # re-exported: migrate.py reads it here

NUL = "\x00"
REPLACEMENT = "\ufffd"


class _NulFree(sa.types.TypeDecorator[str]):
    def process_bind_param(self, value: Any, dialect: Any) -> Any:
        if isinstance(value, str) and NUL in value:
            return value.replace(NUL, REPLACEMENT)
        return value


class NulFreeText(_NulFree):
    impl = sa.Text
    cache_ok = True


class NulFreeString(_NulFree):
    impl = sa.String
    cache_ok = True


def _key(
    name: str, length: int = 64, string: Callable[[int], sa.types.TypeEngine[str]] = NulFreeString
) -> sa.Column[str]:
    """A string column that is (part of) the primary key."""
    return sa.Column(name, string(length), primary_key=True)


def _created_at() -> sa.Column[float]:
    return sa.Column("created_at", sa.Float, nullable=False)


def _conversation_id() -> sa.Column[str]:
    """The owning conversation, whose deletion takes the row with it."""
    return sa.Column(
        "conversation_id",
        NulFreeString(64),
        sa.ForeignKey("af_conversations.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    )


# Added in version 2 (see `migrate.STEPS`): a cancel any worker accepted, which the run's
# owner must honour (`core/run/cancel.py`), and the decisions a resume accepted, kept until the
# resumed run is past the pause so a recovery resumes with them instead of asking again.
MESSAGE_COLUMNS_V2: list[Callable[[], sa.Column[Any]]] = [
    lambda: sa.Column("cancel_requested_at", sa.Float, nullable=True),
    lambda: sa.Column("decisions", NulFreeText, nullable=True),  # JSON: `shapes.AcceptedDecisions`
]

# Added in version 5: the project a conversation belongs to (its runs recall the project's
# memories, `memory/recall.py`); None: no project.
CONVERSATION_COLUMNS_V5: list[Callable[[], sa.Column[Any]]] = [
    lambda: sa.Column("project", NulFreeString(100), nullable=True, index=True),
]

# Added to `af_memories` by schema version 6 (migrate.py): the previous versions of an item
# whose text an update replaced (JSON list, oldest first; src/memory/records.py).
MEMORY_COLUMNS_V6: list[Callable[[], sa.Column[Any]]] = [
    lambda: sa.Column("history", NulFreeText, nullable=True),
]

metadata = sa.MetaData()

meta = sa.Table("af_meta", metadata,
    _key("key"),
    sa.Column("value", NulFreeText, nullable=False),
)

users = sa.Table("af_users", metadata,
    _key("id"),
    sa.Column("name", NulFreeString(200), nullable=False, unique=True),
    _created_at(),
)

tokens = sa.Table("af_tokens", metadata,
    _key("id"),
    sa.Column("user_id", NulFreeString(64), sa.ForeignKey("af_users.id"), nullable=False),
    sa.Column("token_hash", NulFreeString(128), nullable=False, unique=True),
    _created_at(),
)

conversations = sa.Table("af_conversations", metadata,
    _key("id"),
    sa.Column("user_id", NulFreeString(64), nullable=True, index=True),
    sa.Column("title", NulFreeText, nullable=True),
    sa.Column("active_message_id", NulFreeString(64), nullable=True),
    _created_at(),
    sa.Column("updated_at", sa.Float, nullable=False, index=True),
    *[column() for column in CONVERSATION_COLUMNS_V5],
)

messages = sa.Table("af_messages", metadata,
    _key("id"),
    _conversation_id(),
    sa.Column("parent_id", NulFreeString(64), nullable=True),
    sa.Column("thread_id", NulFreeString(64), nullable=False, unique=True),
    sa.Column("content", NulFreeText, nullable=False),
    sa.Column("response", NulFreeText, nullable=True),
    sa.Column("status", NulFreeString(16), nullable=False, index=True),
    sa.Column("outcome", NulFreeString(32), nullable=True),
    sa.Column("error", NulFreeText, nullable=True),
    sa.Column("waiting_for", NulFreeText, nullable=True),  # JSON: interrupt id + pending calls
    sa.Column("metrics", NulFreeText, nullable=True),  # JSON
    sa.Column("run_token", NulFreeString(64), nullable=True),
    sa.Column("lease_expires_at", sa.Float, nullable=True),
    sa.Column("checkpoints_deleted", sa.Boolean, nullable=False, default=False),
    _created_at(),
    sa.Column("updated_at", sa.Float, nullable=False),
    *[column() for column in MESSAGE_COLUMNS_V2],
)

events = sa.Table("af_events", metadata,
    _key("message_id"),
    sa.Column("event_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("type", NulFreeString(32), nullable=False),
    sa.Column("agent", NulFreeString(100), nullable=True),
    sa.Column("timestamp", sa.Float, nullable=False),
    sa.Column("data", NulFreeText, nullable=False),  # JSON, or "" when data_z holds it
    sa.Column("data_z", sa.LargeBinary, nullable=True),  # zlib-compressed JSON of large events
)

artifacts = sa.Table("af_artifacts", metadata,
    _key("conversation_id"),
    _key("artifact_id", 128),
    sa.Column("title", NulFreeText, nullable=False),
    sa.Column("content_type", NulFreeString(100), nullable=False),
    sa.Column("content", NulFreeText, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    _created_at(),
    sa.Column("updated_at", sa.Float, nullable=False),
)

artifact_versions = sa.Table("af_artifact_versions", metadata,
    _key("conversation_id"),
    _key("artifact_id", 128),
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("title", NulFreeText, nullable=False),
    sa.Column("content", NulFreeText, nullable=False),
    sa.Column("change", NulFreeString(32), nullable=False),
    sa.Column("agent", NulFreeString(100), nullable=True),
    sa.Column("message_id", NulFreeString(64), nullable=True),
    _created_at(),
)

approvals = sa.Table("af_approvals", metadata,
    _key("conversation_id"),
    _key("tool_name", 200),
    _created_at(),
)

tool_executions = sa.Table("af_tool_executions", metadata,
    _key("message_id"),
    _key("tool_call_id", 200),
    sa.Column("status", NulFreeString(16), nullable=False),  # started | finished
    sa.Column("result", NulFreeText, nullable=True),
    sa.Column("updated_at", sa.Float, nullable=False),
)

# Exactly-once marks of hook points that fire inside re-runnable nodes (src/hooks/dedupe.py).
hook_marks = sa.Table("af_hook_marks", metadata,
    _key("message_id"),
    _key("key", 400),
    sa.Column("value", NulFreeText, nullable=False),  # JSON output of the first firing
    _created_at(),
)

history_summaries = sa.Table("af_history_summaries", metadata,
    # The conversation path root → message_id (inclusive) condensed once (core/window/history);
    # every later message whose path passes through message_id reuses it.
    _key("message_id"),
    _conversation_id(),
    sa.Column("covers", sa.Integer, nullable=False),  # messages on the path it replaces
    sa.Column("summary", NulFreeText, nullable=False),
    sa.Column("model", NulFreeString(200), nullable=True),
    _created_at(),
)

# Every model request of a run with its response, for `artifactflow export` and replay
# (src/replay/recording.py). A request is stored as a delta on an earlier one of the same
# message (the messages it shares + the new ones), so a run's rows grow linearly.
model_calls = sa.Table("af_model_calls", metadata,
    sa.Column(
        "message_id",
        sa.String(64),
        sa.ForeignKey("af_messages.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("kind", sa.String(16), nullable=False),  # call | config
    sa.Column("agent", sa.String(100), nullable=True),
    _created_at(),
    sa.Column("data_z", sa.LargeBinary, nullable=False),  # zlib-compressed JSON
)

workflow_runs = sa.Table("af_workflow_runs", metadata,
    _key("message_id", 64, sa.String),
    sa.Column("conversation_id", sa.String(64), nullable=False, index=True),
    sa.Column("workflow", sa.String(100), nullable=False, index=True),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("definition", sa.Text, nullable=False),  # the file's text: resume runs this one
    sa.Column("input", sa.Text, nullable=False),  # JSON
    _created_at(),
)

workflow_nodes = sa.Table("af_workflow_nodes", metadata,  # lineage: one row per node execution
    _key("message_id", 64, sa.String),
    _key("execution_id", 200, sa.String),
    sa.Column("node_id", sa.String(100), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("kind", sa.String(16), nullable=True),
    sa.Column("iteration", sa.Integer, nullable=False),
    sa.Column("group_id", sa.String(200), nullable=True),
    sa.Column("item_index", sa.Integer, nullable=True),
    sa.Column("parents", sa.Text, nullable=False),  # JSON list of execution ids
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("input", sa.Text, nullable=True),  # JSON
    sa.Column("output", sa.Text, nullable=True),  # JSON
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("finished_at", sa.Float, nullable=True),
)

# Long-term memory (src/memory/, schema version 4): LangGraph `BaseStore` items by namespace
# (`(user, "global")`, `(user, "project", name)`, `(user, "conversation", id)`, ...), each
# with its text, its vector (float32 bytes, with the embedder that made it) and, for the lexical
# side, a full-text index the backend keeps: an FTS5 table kept by triggers on SQLite, a
# generated `tsvector` column with a GIN index on PostgreSQL (both made after `create_all`
# creates the table, below). `seq` is the integer key FTS5 needs (a stable rowid).
memories = sa.Table("af_memories", metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("id", NulFreeString(64), nullable=False, unique=True),
    sa.Column("user_id", NulFreeString(64), nullable=False, index=True),
    sa.Column("namespace", NulFreeString(600), nullable=False),  # escaped labels joined by "."
    sa.Column("key", NulFreeString(200), nullable=False),
    # set for `(user, "conversation", id)`: deleted with its conversation
    sa.Column("conversation_id", NulFreeString(64), nullable=True, index=True),
    sa.Column("value", NulFreeText, nullable=False),  # JSON object (the BaseStore item value)
    sa.Column("text", NulFreeText, nullable=False),  # what is embedded and indexed
    sa.Column("embedder", NulFreeString(200), nullable=True),  # "static:wordllama-256", ...
    sa.Column("vector", sa.LargeBinary, nullable=True),  # float32, unit length
    _created_at(),
    sa.Column("updated_at", sa.Float, nullable=False),
    *[column() for column in MEMORY_COLUMNS_V6],
    sa.UniqueConstraint("namespace", "key", name="uq_af_memories_namespace_key"),
)

# One row per namespace that holds memories: `version` grows with every write in it, so a
# process's cached vectors of a namespace are checked with one indexed read (src/memory/cache.py).
memory_namespaces = sa.Table("af_memory_namespaces", metadata,
    _key("namespace", 600),
    sa.Column("user_id", NulFreeString(64), nullable=False, index=True),
    sa.Column("version", sa.Integer, nullable=False),
)

# What each version of a namespace changed (the `seq` of every row written or deleted), so a
# cache a few versions behind reads only those rows; the last `MEMORY_CHANGES_KEPT` versions of
# each namespace are kept, an older cache reads its namespace again.
memory_changes = sa.Table("af_memory_changes", metadata,
    _key("namespace", 600),
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
)
MEMORY_CHANGES_KEPT = 256

MEMORY_FTS = "af_memories_fts"
_SQLITE_MEMORY_FTS = (
    f"CREATE VIRTUAL TABLE {MEMORY_FTS} USING fts5("
    "text, content='af_memories', content_rowid='seq', tokenize='porter unicode61')",
    f"CREATE TRIGGER af_memories_ai AFTER INSERT ON af_memories BEGIN "
    f"INSERT INTO {MEMORY_FTS}(rowid, text) VALUES (new.seq, new.text); END",
    f"CREATE TRIGGER af_memories_ad AFTER DELETE ON af_memories BEGIN "
    f"INSERT INTO {MEMORY_FTS}({MEMORY_FTS}, rowid, text) VALUES ('delete', old.seq, old.text); END",
    f"CREATE TRIGGER af_memories_au AFTER UPDATE OF text ON af_memories BEGIN "
    f"INSERT INTO {MEMORY_FTS}({MEMORY_FTS}, rowid, text) VALUES ('delete', old.seq, old.text); "
    f"INSERT INTO {MEMORY_FTS}(rowid, text) VALUES (new.seq, new.text); END",
)
# "." and "_" become spaces first: the english parser keeps `heapq.nlargest` (a host name to
# it) and `capture_output` as one word, where SQLite's unicode61 splits them (schema 6)
POSTGRES_MEMORY_TSV = (
    "ALTER TABLE af_memories ADD COLUMN tsv tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english', translate(text, '._', '  '))) STORED"
)
_POSTGRES_MEMORY_FTS = (
    POSTGRES_MEMORY_TSV,
    "CREATE INDEX ix_af_memories_tsv ON af_memories USING gin (tsv) WITH (fastupdate = off)",
)
for _statement in _SQLITE_MEMORY_FTS:
    event.listen(memories, "after_create", sa.DDL(_statement).execute_if(dialect="sqlite"))
for _statement in _POSTGRES_MEMORY_FTS:
    event.listen(memories, "after_create", sa.DDL(_statement).execute_if(dialect="postgresql"))

# --- the agent platform (version 6; issue 35): tables only, so `create_all` makes them -------

# A saved configuration of a graph (the lead agent or a workflow): the current version here,
# every version in `af_assistant_versions` (`client/assistants.py`). JSON as text.
assistants = sa.Table("af_assistants", metadata,
    _key("assistant_id"),
    sa.Column("graph_id", NulFreeString(200), nullable=False, index=True),
    sa.Column("name", NulFreeString(200), nullable=False, index=True),
    sa.Column("description", NulFreeText, nullable=True),
    sa.Column("config", NulFreeText, nullable=False),  # {"configurable": {...}, ...}
    sa.Column("context", NulFreeText, nullable=False),
    sa.Column("metadata", NulFreeText, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("user_id", NulFreeString(64), nullable=True, index=True),
    _created_at(),
    sa.Column("updated_at", sa.Float, nullable=False),
)
assistant_versions = sa.Table("af_assistant_versions", metadata,
    _key("assistant_id"),
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("graph_id", NulFreeString(200), nullable=False),
    sa.Column("name", NulFreeString(200), nullable=False),
    sa.Column("description", NulFreeText, nullable=True),
    sa.Column("config", NulFreeText, nullable=False),
    sa.Column("context", NulFreeText, nullable=False),
    sa.Column("metadata", NulFreeText, nullable=False),
    _created_at(),
)
# The agent configuration a message runs with (`client/agent_config.py`), so a resume in any
# process runs it on the same model, prompt, tools and permissions.
run_configs = sa.Table("af_run_configs", metadata,
    _key("message_id"),
    sa.Column("config", NulFreeText, nullable=False),
    _created_at(),
)
# Scheduled runs (`protocol/crons.py`): `next_run_at` is the compare-and-set that makes a due
# tick start exactly once across workers.
crons = sa.Table("af_crons", metadata,
    _key("cron_id"),
    sa.Column("assistant_id", NulFreeString(200), nullable=False),
    sa.Column("thread_id", NulFreeString(64), nullable=True, index=True),
    sa.Column("user_id", NulFreeString(64), nullable=True, index=True),
    sa.Column("schedule", NulFreeString(200), nullable=False),
    sa.Column("timezone", NulFreeString(64), nullable=False),
    sa.Column("payload", NulFreeText, nullable=False),  # the run's body, JSON
    sa.Column("metadata", NulFreeText, nullable=False),
    sa.Column("end_time", sa.Float, nullable=True),
    sa.Column("next_run_at", sa.Float, nullable=True, index=True),  # None: finished
    sa.Column("enabled", sa.Boolean, nullable=False),
    _created_at(),
    sa.Column("updated_at", sa.Float, nullable=False),
)
# One row per protocol run with a webhook: its delivery, claimed once (`protocol/webhooks.py`).
webhook_deliveries = sa.Table("af_webhook_deliveries", metadata,
    _key("run_id"),
    sa.Column("url", NulFreeText, nullable=False),
    sa.Column("status", NulFreeString(16), nullable=False),  # sending | delivered | failed | refused
    sa.Column("attempts", NulFreeText, nullable=False),  # JSON list of {at, status_code, error}
    _created_at(),
    sa.Column("updated_at", sa.Float, nullable=False),
)
# Store items that expire (`protocol/store_ttl.py`): the item lives in the long-term store; this
# row says when it goes (`ttl` minutes after its last write, or read with `refresh_ttl`).
store_ttl = sa.Table("af_store_ttl", metadata,
    _key("namespace", 600),  # JSON list of labels, the owner first
    _key("key", 200),
    sa.Column("ttl_minutes", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False, index=True),
)


# The Agent Protocol's own records (`protocol/records.py`): a thread's metadata beside its
# conversation, and the protocol's runs. Version 7 (before, the protocol made them on first use).
# Version 8 (issue 34): `public_id`, the id its owner gave a thread whose key was derived
# because another user holds that id (`protocol/thread_ids.py`); NULL: the key itself.
AP_THREAD_COLUMNS_V8: list[Callable[[], sa.Column[Any]]] = [
    lambda: sa.Column("public_id", sa.String(200), nullable=True),
]
ap_threads = sa.Table(
    "ap_threads",
    metadata,
    sa.Column("thread_id", sa.String(64), primary_key=True),
    sa.Column("user_id", sa.String(64), nullable=True, index=True),
    sa.Column("metadata", sa.Text, nullable=False, default="{}"),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    *[column() for column in AP_THREAD_COLUMNS_V8],
)

ap_runs = sa.Table(
    "ap_runs",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("thread_id", sa.String(64), nullable=False, index=True),
    sa.Column("user_id", sa.String(64), nullable=True),
    sa.Column("assistant_id", sa.String(200), nullable=False),
    sa.Column("message_id", sa.String(64), nullable=True, index=True),
    sa.Column("cursor", sa.Integer, nullable=False, default=0),
    # pending | running | success | error | interrupted | timeout
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("multitask_strategy", sa.String(16), nullable=False),
    sa.Column("metadata", sa.Text, nullable=False, default="{}"),
    sa.Column("request", sa.Text, nullable=True),  # a queued run's body, JSON
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

# Version 9 (issue 36): each ended message as the Agent Protocol shows it (`protocol/
# renderings.py`), so a thread's state and history are read, not rebuilt from every message's
# events. Valid while the message's `status` and `updated_at` are these and `version` is the
# renderer's; anything else is rendered again. Bytes: already-serialised JSON (orjson).
ap_renderings = sa.Table(
    "ap_renderings",
    metadata,
    _key("message_id"),
    _conversation_id(),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("step_count", sa.Integer, nullable=False),
    sa.Column("messages", sa.LargeBinary, nullable=False),  # JSON list: after its last step
    sa.Column("steps", sa.LargeBinary, nullable=False),  # JSON: `renderings.compact`
)
