"""Saved assistants: a graph plus an agent configuration, with versions.

The current version lives in `af_assistants`, every version (the current one too) in
`af_assistant_versions`; an update writes version n+1 and makes it current, `set_latest` points
the assistant back at an older one. `config` and `context` are kept as the caller sent them
(LangGraph's shapes: `config = {"configurable": {...}}`); `AssistantRow.agent_config` is what a
run uses (configurable, then context, key by key). The config-file agents and the workflows are
the built-in assistants, read-only, and are not stored here (`protocol/assistants_store.py`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..core.store.schema import assistant_versions, assistants
from ..errors import NotFoundError, UserError
from .agent_config import AgentConfig, merged

if TYPE_CHECKING:
    from ..core.store.repository import AppStore


@dataclass(frozen=True)
class AssistantRow:
    assistant_id: str
    graph_id: str
    name: str
    description: str | None
    config: dict[str, Any]
    context: dict[str, Any]
    metadata: dict[str, Any]
    version: int
    created_at: float
    updated_at: float
    user_id: str | None = None  # its owner (None: saved before issue 34, or with auth off)

    def visible_to(self, user: str | None) -> bool:
        """Whether `user` may see and change it: its owner; anyone when it has none or auth
        is off (`user` None)."""
        return user is None or self.user_id is None or self.user_id == user

    @property
    def agent_config(self) -> AgentConfig:
        return merged(self.config.get("configurable"), self.context, where="assistant config")


def _row(r: Mapping[Any, Any], *, version: int | None = None, updated_at: float | None = None) -> AssistantRow:
    return AssistantRow(
        assistant_id=r["assistant_id"],
        graph_id=r["graph_id"],
        name=r["name"],
        description=r["description"],
        config=json.loads(r["config"]),
        context=json.loads(r["context"]),
        metadata=json.loads(r["metadata"]),
        version=version if version is not None else r["version"],
        created_at=r["created_at"],
        updated_at=updated_at if updated_at is not None else r.get("updated_at", r["created_at"]),
        user_id=r.get("user_id"),
    )


def check_config(config: Mapping[str, Any] | None, context: Mapping[str, Any] | None) -> None:
    """`config.configurable` and `context` hold `AgentConfig` keys only (a `UserError` names
    the bad one); `config`'s other LangGraph keys (tags, recursion_limit) are kept, unused."""
    configurable = (config or {}).get("configurable")
    merged(configurable, where="config.configurable")
    merged(context, where="context")


async def get(store: AppStore, assistant_id: str) -> AssistantRow | None:
    rows = await store.fetch_rows(sa.select(assistants).where(assistants.c.assistant_id == assistant_id))
    return _row(rows[0]) if rows else None


async def create(
    store: AppStore,
    *,
    graph_id: str,
    config: dict[str, Any],
    context: dict[str, Any],
    metadata: dict[str, Any],
    name: str | None,
    description: str | None,
    assistant_id: str | None = None,
    if_exists: str = "raise",
    user_id: str | None = None,
) -> AssistantRow:
    check_config(config, context)
    assistant_id = assistant_id or str(uuid.uuid4())
    existing = await get(store, assistant_id)
    if existing is not None:
        if if_exists == "do_nothing":
            return existing
        raise UserError(f"assistant {assistant_id} already exists")
    now = time.time()
    values = dict(
        assistant_id=assistant_id,
        graph_id=graph_id,
        name=name or "Untitled",
        description=description,
        config=json.dumps(config),
        context=json.dumps(context),
        metadata=json.dumps(metadata),
        created_at=now,
    )
    await store.write(
        assistants.insert().values(**values, version=1, updated_at=now, user_id=user_id),
        assistant_versions.insert().values(**values, version=1),
    )
    row = await get(store, assistant_id)
    assert row is not None
    return row


async def update(store: AppStore, assistant_id: str, changes: dict[str, Any]) -> AssistantRow:
    """A new version from the current one with `changes` (graph_id, config, context,
    metadata (merged), name, description), made current."""
    current = await get(store, assistant_id)
    if current is None:
        raise NotFoundError(f"assistant {assistant_id} not found")
    config = changes.get("config", current.config)
    context = changes.get("context", current.context)
    check_config(config, context)
    latest = await store.fetch_value(
        sa.select(sa.func.max(assistant_versions.c.version)).where(
            assistant_versions.c.assistant_id == assistant_id
        )
    )
    version = int(latest or 0) + 1
    now = time.time()
    values = dict(
        graph_id=changes.get("graph_id") or current.graph_id,
        name=changes.get("name") or current.name,
        description=changes.get("description", current.description),
        config=json.dumps(config),
        context=json.dumps(context),
        metadata=json.dumps({**current.metadata, **(changes.get("metadata") or {})}),
    )
    await store.write(
        assistant_versions.insert().values(
            assistant_id=assistant_id, version=version, created_at=now, **values
        ),
        assistants.update()
        .where(assistants.c.assistant_id == assistant_id)
        .values(version=version, updated_at=now, **values),
    )
    row = await get(store, assistant_id)
    assert row is not None
    return row


async def delete(store: AppStore, assistant_id: str) -> None:
    if await get(store, assistant_id) is None:
        raise NotFoundError(f"assistant {assistant_id} not found")
    await store.write(
        assistant_versions.delete().where(assistant_versions.c.assistant_id == assistant_id),
        assistants.delete().where(assistants.c.assistant_id == assistant_id),
    )


async def versions(store: AppStore, assistant_id: str) -> list[AssistantRow]:
    """Newest first."""
    current = await get(store, assistant_id)
    if current is None:
        raise NotFoundError(f"assistant {assistant_id} not found")
    rows = await store.fetch_rows(
        sa.select(assistant_versions)
        .where(assistant_versions.c.assistant_id == assistant_id)
        .order_by(assistant_versions.c.version.desc())
    )
    return [_row(r, updated_at=r["created_at"]) for r in rows]


async def set_latest(store: AppStore, assistant_id: str, version: int) -> AssistantRow:
    rows = await store.fetch_rows(
        sa.select(assistant_versions).where(
            assistant_versions.c.assistant_id == assistant_id,
            assistant_versions.c.version == version,
        )
    )
    if not rows:
        raise NotFoundError(f"assistant {assistant_id} has no version {version}")
    r = rows[0]
    await store.write(
        assistants.update()
        .where(assistants.c.assistant_id == assistant_id)
        .values(
            version=version,
            updated_at=time.time(),
            **{k: r[k] for k in ("graph_id", "name", "description", "config", "context", "metadata")},
        )
    )
    row = await get(store, assistant_id)
    assert row is not None
    return row


async def search(store: AppStore, user_id: str | None = None) -> list[AssistantRow]:
    """The stored assistants `user_id` may see (`AssistantRow.visible_to`; every one for
    None), newest first (the caller filters the rest: few rows)."""
    query = sa.select(assistants).order_by(assistants.c.created_at.desc())
    if user_id is not None:
        query = query.where(sa.or_(assistants.c.user_id.is_(None), assistants.c.user_id == user_id))
    return [_row(r) for r in await store.fetch_rows(query)]
