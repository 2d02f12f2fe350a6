"""The place a replay runs: the current config on a temporary data folder.

`open_sandbox` opens an `Engine` from the caller's settings (agents, prompts,
plugins, permissions, hooks: what is being tested) with three changes: the data folder is a
temporary one (SQLite, never the user's database), MCP servers are not started, and telemetry
export is off. Tools the recording used that the current config cannot provide (MCP tools,
plugins not installed here) are registered as stubs from the recorded name, description,
schema and permission, so an agent naming them still loads; their calls are served from the
recording like every other call.

`seed` then rebuilds the conversation as the run found it: the messages before it (with their
ids, so stored history summaries apply), artifact versions and always-allowed tools.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

from ..core.engine import Engine, build_registry
from ..settings import Settings, load_settings
from ..settings.mcp import SEPARATOR
from ..shapes import JsonObject
from ..tools.base import Permission, Tool, ToolResult
from ..tools.mcp.manager import is_mcp_name
from . import store as calls
from .recording import recording

if TYPE_CHECKING:
    from .session import Session


def sandbox_settings(
    settings: Settings | None, folder: Path, provided: set[str] | None = None
) -> Settings:
    """`settings` on `folder`, without MCP servers (permissions naming MCP tools that neither
    the recording nor `provided` has are dropped with them) and without telemetry export."""
    base = settings or load_settings()
    permissions = {
        name: level
        for name, level in base.permissions.items()
        if not is_mcp_name(name, base) or name in (provided or set())
    }
    return base.model_copy(
        update={
            "data_dir": folder,
            "database_url": None,
            "mcp_servers": {},
            "permissions": permissions,
            "telemetry": base.telemetry.model_copy(update={"exporter": "none"}),
        }
    )


async def open_sandbox(
    session: Session,
    settings: Settings | None,
    folder: Path,
    *,
    extra_tools: list[Any] | None = None,
    notes: list[str] | None = None,
) -> Engine:
    current = settings or load_settings()
    probe = build_registry(current, extra_tools)  # what the current config provides
    stubs = [stub for stub in recorded_tools(session, current) if stub.name not in probe]
    if stubs and notes is not None:
        notes.append(
            "served from the recording without a current definition: "
            + ", ".join(sorted(s.name for s in stubs))
        )
    tools = [*(extra_tools or []), *stubs]
    replay_settings = sandbox_settings(current, folder, {s.name for s in stubs})
    return await Engine.open(replay_settings, extra_tools=tools, model_wrap=recording)


@contextlib.asynccontextmanager
async def sandboxed(
    session: Session,
    settings: Settings | None,
    *,
    extra_tools: list[Any] | None = None,
    notes: list[str] | None = None,
) -> AsyncIterator[Engine]:
    """`open_sandbox` on a temporary folder, closed and removed on the way out."""
    with tempfile.TemporaryDirectory(prefix="artifactflow-replay-") as folder:
        engine = await open_sandbox(
            session, settings, Path(folder), extra_tools=extra_tools, notes=notes
        )
        try:
            yield engine
        finally:
            await engine.aclose()


class _KnownTool(TypedDict, total=False):
    """What a recording says about a tool (its spec, its config snapshot)."""

    description: str
    schema: JsonObject | None
    permission: str
    source: str


def recorded_tools(session: Session, settings: Settings) -> list[Tool]:
    """A stub `Tool` for every tool the recording knows (its config snapshots, the specs sent
    to the model, the calls made), with the recorded schema and permission."""
    known: dict[str, _KnownTool] = {}
    for call in session.calls:
        for spec in call.tools or ():
            function = spec.get("function") or {}
            if function.get("name"):
                known.setdefault(function["name"], {
                    "description": function.get("description") or "",
                    "schema": function.get("parameters"),
                })
    for config in session.configs:
        for name, info in (config.get("tools") or {}).items():
            recorded = {k: v for k, v in info.items() if k in ("description", "schema", "permission", "source")}
            known.setdefault(name, {}).update(cast(_KnownTool, recorded))
    for record in session.tools:
        known.setdefault(record.tool, {})
    return [_stub(name, info, settings) for name, info in known.items() if name != "call_subagent"]


def _stub(name: str, info: _KnownTool, settings: Settings) -> Tool:
    permission = Permission.parse(info.get("permission") or "auto")
    server, _, remote = name.partition(SEPARATOR)
    config = settings.mcp_servers.get(server) if remote else None
    if config is not None:
        permission = config.permission_for(remote) or permission

    async def unavailable(**_: Any) -> ToolResult:  # replaced by the replay's tool server
        return ToolResult.fail(f"tool '{name}' is not available in a replay")

    return Tool(
        name=name,
        description=info.get("description") or "",
        args_model=None,
        func=unavailable,
        permission=permission,
        input_schema=info.get("schema") or {"type": "object", "properties": {}},
        source=info.get("source") or "replay",
    )


async def seed(engine: Engine, session: Session) -> str | None:
    """Rebuild the conversation as the run found it; returns the parent message id."""
    store = engine.store
    conversation_id = session.conversation_id
    await store.create_conversation(conversation_id)
    parent: str | None = None
    for turn in session.history:
        await store.add_message(
            conversation_id=conversation_id,
            content=turn["content"],
            parent_id=parent,
            message_id=turn["id"],
            status=turn.get("status") or "completed",
        )
        await store.update_message(turn["id"], response=turn.get("response"))
        parent = turn["id"]
    if parent is not None:
        await store.touch_conversation(conversation_id, active_message_id=parent)
    for row in session.history_summaries:
        await calls.put_history_summary(store, {**row, "conversation_id": conversation_id})
    for artifact in session.artifacts:
        first, *later = artifact["versions"]
        await store.create_artifact(
            conversation_id, artifact["artifact_id"], title=first["title"],
            content=first["content"], content_type=artifact["content_type"],
        )
        for version in later:
            await store.write_artifact_version(
                conversation_id, artifact["artifact_id"], expected_version=version["version"] - 1,
                content=version["content"], change=version["change"], title=version["title"],
            )
    if session.always_allowed:
        await store.allow_always(conversation_id, session.always_allowed)
    return parent
