"""`export_session`: one stored run → a `Session` (and a file).

Everything comes from the app store: the message and the conversation path before it (the
history the run saw), the recorded model calls (`af_model_calls`, see `recording.py`), the
event log (tool calls with arguments and full results, pauses and decisions), and the state
of the conversation when the run started: artifact versions and always-allowed tools older
than the message, plus stored history summaries of the path. A run that paused and resumed,
in one process or several, is one message, so it exports as one file.

Steps are the recorded model calls in the order they were made. Each tool call and pause is
tied to the step whose response asked for it, by walking the event log: an `llm_complete`
event is paired with its recorded call, and a tool event belongs to the latest step of the
same agent invocation.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..errors import NotFoundError, UserError
from ..shapes import AskedCall, ChatMessage, JsonObject, RecordedDecision, ToolResultDict
from . import delta
from . import store as calls
from .records import (
    ArtifactRecord,
    ArtifactVersionRecord,
    CallData,
    ConfigSnapshot,
    HistoryEntry,
    HistorySummaryRecord,
    ModelCallRow,
)
from .session import ModelCall, PermissionRecord, Session, ToolCallRecord

if TYPE_CHECKING:
    from ..core.conversations import ConversationManager
    from ..core.store.repository import AppStore


async def export_session(
    store: AppStore, conversations: ConversationManager, message_id: str, *, version: str
) -> Session:
    """The recorded run of `message_id` as a `Session` (write it with `Session.write`);
    `version` is the artifactflow version the file says exported it."""
    message = await store.get_message(message_id)
    if message is None:
        raise NotFoundError(f"message {message_id} not found")
    if message["status"] == "running":
        raise UserError(
            f"message {message_id} is still running; export it once it has finished or paused"
        )
    workflow = await store.get_workflow_run(message_id)
    if workflow is not None:
        raise UserError(
            f"message {message_id} is a run of workflow '{workflow['workflow']}'; export and "
            "replay cover chat runs only (read a workflow run with `artifactflow lineage`)"
        )
    events = await store.events(message_id)
    rows = await calls.rows(store, message_id, events)
    model_calls = _model_calls(rows)
    if not model_calls:
        raise UserError(
            f"message {message_id} has no recorded model requests (it ran with "
            "run.record_requests off or before recording existed, or made no model call), so "
            "it cannot be replayed"
        )
    conversation_id = message["conversation_id"]
    path = await conversations.path_to(message["parent_id"])
    session = Session(
        message_id=message_id,
        conversation_id=conversation_id,
        task=message["content"],
        status=message["status"],
        response=message.get("response"),
        outcome=message.get("outcome"),
        error=message.get("error"),
        created_at=message["created_at"],
        exported_at=time.time(),
        artifactflow_version=version,
        history=[
            HistoryEntry(id=m["id"], content=m["content"], response=m.get("response"),
                         status=m["status"])
            for m in path
        ],
        artifacts=await _artifacts_before(store, conversation_id, message["created_at"]),
        always_allowed=await calls.approvals_before(store, conversation_id, message["created_at"]),
        history_summaries=[
            HistorySummaryRecord(message_id=row["message_id"], covers=row["covers"],
                                 summary=row["summary"], model=row["model"],
                                 created_at=row["created_at"])
            for row in await calls.history_summaries(store, [m["id"] for m in path])
        ],
        configs=[cast(ConfigSnapshot, row["data"]) for row in rows if row["kind"] == calls.CONFIG],
        calls=model_calls,
    )
    session.tools, session.permissions = _from_events(events, model_calls)
    return session


def _model_calls(rows: list[ModelCallRow]) -> list[ModelCall]:
    """Rows → full requests (deltas resolved), numbered 1… in the order they were made."""
    by_seq: dict[int, CallData] = {row["seq"]: row["data"] for row in rows if row["kind"] == calls.CALL}
    messages: dict[int, list[ChatMessage]] = {}
    tools: dict[int, list[JsonObject] | None] = {}

    def resolve(seq: int) -> list[ChatMessage]:
        if seq not in messages:
            data = by_seq[seq]
            messages[seq] = delta.decode(data, resolve)
            tools[seq] = tools_of(data["base"]) if data.get("same_tools") else data.get("tools")
        return messages[seq]

    def tools_of(seq: int | None) -> list[JsonObject] | None:
        assert seq is not None  # `same_tools` is only written with a base
        resolve(seq)
        return tools[seq]

    out = []
    for step, seq in enumerate(sorted(by_seq), 1):
        data = by_seq[seq]
        out.append(
            ModelCall(
                step=step,
                agent=data.get("agent"),
                messages=resolve(seq),
                tools=tools_of(seq),
                response=data.get("response"),
                error=data.get("error"),
                target=data.get("target") or {},
                duration_ms=data.get("duration_ms"),
            )
        )
    return out


async def _artifacts_before(store: AppStore, conversation_id: str, before: float) -> list[ArtifactRecord]:
    """Each artifact's versions written before the run started, oldest artifact first."""
    out: list[ArtifactRecord] = []
    for artifact in await store.list_artifacts(conversation_id):
        versions = [
            ArtifactVersionRecord(version=v["version"], title=v["title"], content=v["content"],
                                  change=v["change"])
            for v in await store.artifact_versions(conversation_id, artifact["artifact_id"])
            if v["created_at"] < before
        ]
        if versions:
            out.append(ArtifactRecord(artifact_id=artifact["artifact_id"],
                                      content_type=artifact["content_type"], versions=versions))
    return out


def _same_response(call: ModelCall, data: Mapping[str, Any]) -> bool:
    response = call.response
    if response is None:
        return data.get("content") is None and not data.get("tool_calls")
    recorded = [(c.get("id"), c.get("name"), c.get("arguments")) for c in response.get("tool_calls", [])]
    logged = [(c.get("id"), c.get("name"), c.get("arguments")) for c in data.get("tool_calls") or []]
    return response.get("content") == data.get("content") and recorded == logged


def _from_events(
    events: Sequence[Mapping[str, Any]], model_calls: list[ModelCall]
) -> tuple[list[ToolCallRecord], list[PermissionRecord]]:
    unpaired = [c for c in model_calls if c.response is not None]
    step_of: dict[str | None, int] = {}  # invocation → its latest step
    starts: dict[tuple[Any, str], Mapping[str, Any]] = {}  # a `tool_start` event's data
    asked_args: dict[str, object] = {}  # call id → the arguments a person was asked about
    tools: list[ToolCallRecord] = []
    pauses: list[PermissionRecord] = []
    for event in events:
        kind, data, agent = event["type"], event.get("data") or {}, event.get("agent")
        invocation = data.get("invocation")
        if kind == "llm_complete":
            call = next((c for c in unpaired if c.agent == agent and _same_response(c, data)), None)
            if call is not None:
                unpaired.remove(call)
                step_of[invocation] = call.step
        elif kind == "tool_start":
            starts[(invocation, data["tool_call_id"])] = data
        elif kind == "tool_complete":
            start = starts.pop((invocation, data["tool_call_id"]), None)
            arguments = start.get("arguments") if start else asked_args.get(data["tool_call_id"])
            tools.append(
                ToolCallRecord(
                    step=step_of.get(invocation),
                    agent=agent,
                    invocation=invocation,
                    tool_call_id=data["tool_call_id"],
                    tool=data["tool"],
                    arguments=arguments,
                    result=cast(ToolResultDict, data.get("result") or {}),
                    edited=bool(start and start.get("edited")),
                    denied=bool(data.get("denied")),
                )
            )
        elif kind == "permission_request":
            pending: list[AskedCall] = list(data.get("calls") or [])
            for call in pending:
                asked_args[call["tool_call_id"]] = call.get("arguments")
            known = [step_of[c.get("invocation")] for c in pending if c.get("invocation") in step_of]
            pauses.append(PermissionRecord(min(known) if known else None, pending, None))
        elif kind == "permission_result" and pauses and pauses[-1].decisions is None:
            decisions: list[RecordedDecision] = list(data.get("decisions") or [])
            pauses[-1].decisions = decisions
    return tools, pauses
