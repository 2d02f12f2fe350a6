"""The session file: one run, self-contained, as JSON lines.

```
{"type": "session", "format": "artifactflow-session", "version": 1, "task": ..., "history": [...],
 "artifacts": [...], "always_allowed": [...], "status": ..., "response": ..., ...}
{"type": "config", "agents": {...}, "models": {...}, "tools": {...}, "settings": {...}}
{"type": "model_call", "step": 1, "agent": "lead_agent", "messages": [...], "tools": [...],
 "response": {"content": ..., "tool_calls": [...], ...}}
{"type": "model_call", "step": 2, ..., "from_step": 1, "keep": 3, "messages": [<new ones>],
 "tools_from_step": 1, "response": ...}
{"type": "tool_call", "step": 1, "tool_call_id": ..., "tool": ..., "arguments": ..., "result": ...}
{"type": "permission", "step": 1, "calls": [...], "decisions": [...]}
```

A step is one model request, numbered in the order the run made them. A request's messages
are stored as a prefix delta on an earlier step (`from_step` + `keep`, see `delta.py`) unless
the file was written with `full_messages=True`; readers always get the full lists. One line
per record keeps a golden session reviewable in a pull request and greppable.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, cast

from ..errors import UserError
from ..shapes import AskedCall, ChatMessage, JsonObject, RecordedDecision, ToolResultDict
from . import delta
from .records import (
    ArtifactRecord,
    ConfigSnapshot,
    ErrorRecord,
    HistoryEntry,
    HistorySummaryRecord,
    ResponseRecord,
    TargetInfo,
)

FORMAT = "artifactflow-session"
VERSION = 1
RECENT = 8  # earlier steps considered as delta bases when writing


class SessionFileError(UserError):
    """A session file cannot be read: not JSON lines, another format, or inconsistent."""


@dataclass
class ModelCall:
    """One model request as the run sent it, and what came back (`response` or `error`)."""

    step: int
    agent: str | None
    messages: list[ChatMessage]
    tools: list[JsonObject] | None  # OpenAI function specs
    response: ResponseRecord | None = None
    error: ErrorRecord | None = None
    target: TargetInfo = field(default_factory=lambda: TargetInfo())
    duration_ms: float | None = None


@dataclass
class ToolCallRecord:
    """One tool call of the run with its full result (`ToolResult.to_dict()`)."""

    step: int | None
    agent: str | None
    invocation: str | None
    tool_call_id: str
    tool: str
    arguments: Any
    result: ToolResultDict
    edited: bool = False
    denied: bool = False


@dataclass
class PermissionRecord:
    """One pause: the calls that waited, and the decisions given (None: never answered)."""

    step: int | None
    calls: list[AskedCall]
    decisions: list[RecordedDecision] | None


@dataclass
class Session:
    """A recorded run (see the module docstring for the file format)."""

    message_id: str
    conversation_id: str
    task: str
    status: str
    response: str | None = None
    outcome: str | None = None
    error: str | None = None
    created_at: float | None = None
    exported_at: float | None = None
    artifactflow_version: str | None = None
    history: list[HistoryEntry] = field(default_factory=list)
    artifacts: list[ArtifactRecord] = field(default_factory=list)
    always_allowed: list[str] = field(default_factory=list)
    history_summaries: list[HistorySummaryRecord] = field(default_factory=list)
    configs: list[ConfigSnapshot] = field(default_factory=list)
    calls: list[ModelCall] = field(default_factory=list)
    tools: list[ToolCallRecord] = field(default_factory=list)
    permissions: list[PermissionRecord] = field(default_factory=list)

    _HEADER = (
        "message_id", "conversation_id", "task", "status", "response", "outcome", "error",
        "created_at", "exported_at", "artifactflow_version", "history", "artifacts",
        "always_allowed", "history_summaries",
    )

    def decision_for(self, tool_call_id: str) -> RecordedDecision | None:
        """The recorded decision for a paused call, or None if it was never answered."""
        for pause in self.permissions:
            for decision in pause.decisions or ():
                if decision.get("tool_call_id") == tool_call_id:
                    return decision
        return None

    def asked(self) -> dict[str, int | None]:
        """Tool-call ids the recorded run asked a person about → their step."""
        return {c["tool_call_id"]: p.step for p in self.permissions for c in p.calls}

    # --- writing --------------------------------------------------------------------------

    def lines(self, *, full_messages: bool = False) -> list[JsonObject]:
        """The file's JSON lines (see the module docstring)."""
        header: JsonObject = {"type": "session", "format": FORMAT, "version": VERSION}
        header.update({k: getattr(self, k) for k in self._HEADER})
        out: list[JsonObject] = [header]
        out += [{"type": "config", **config} for config in self.configs]
        recent: list[ModelCall] = []
        for call in self.calls:
            line: JsonObject = {"type": "model_call", "step": call.step, "agent": call.agent,
                                    "target": call.target}
            candidates = [(c.step, c.messages) for c in reversed(recent)]
            base, keep, new = delta.encode(call.messages, [] if full_messages else candidates)
            if base is not None:
                line.update(from_step=base, keep=keep)
            line["messages"] = new
            same = next((c for c in recent if c.step == base), None)
            if same is not None and same.tools == call.tools and call.tools:
                line["tools_from_step"] = base
            else:
                line["tools"] = call.tools
            line.update(response=call.response, error=call.error, duration_ms=call.duration_ms)
            out.append(line)
            recent = (recent + [call])[-RECENT:]
        out += [{"type": "tool_call", **asdict(record)} for record in self.tools]
        out += [{"type": "permission", **asdict(record)} for record in self.permissions]
        return out

    def write(self, path: str | Path, *, full_messages: bool = False) -> Path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("w", encoding="utf-8") as handle:
            for line in self.lines(full_messages=full_messages):
                handle.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
        return target


# --- reading --------------------------------------------------------------------------------


def read_session(path: str | Path) -> Session:
    """Load a session file; `SessionFileError` says which line is wrong and why."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SessionFileError(f"{source}: cannot read the session file: {exc}") from None
    records: list[tuple[int, JsonObject]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise SessionFileError(f"{source}, line {number}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict) or "type" not in record:
            raise SessionFileError(f"{source}, line {number}: expected an object with a 'type'")
        records.append((number, record))
    if not records or records[0][1].get("type") != "session":
        raise SessionFileError(
            f"{source}: not an artifactflow session file (the first line must be the session "
            "header written by `artifactflow export`)"
        )
    try:
        return _build(records)
    except SessionFileError as exc:
        raise SessionFileError(f"{source}, {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise SessionFileError(f"{source}: inconsistent session file: {exc!r}") from None


def _build(records: list[tuple[int, JsonObject]]) -> Session:
    _, header = records[0]
    if header.get("format") != FORMAT:
        raise SessionFileError(f"line 1: format {header.get('format')!r} is not {FORMAT!r}")
    if int(header.get("version", 0)) > VERSION:
        raise SessionFileError(
            f"line 1: format version {header['version']} is newer than this artifactflow "
            f"reads ({VERSION}); upgrade artifactflow"
        )
    session = Session(**{k: header[k] for k in Session._HEADER if k in header})
    steps: dict[int, ModelCall] = {}
    for number, record in records[1:]:
        kind = record.pop("type")
        if kind == "config":
            session.configs.append(cast(ConfigSnapshot, record))
        elif kind == "model_call":
            step = int(record["step"])
            base = record.get("from_step")
            if base is not None and int(base) not in steps:
                raise SessionFileError(f"line {number}: step {step} refers to unknown step {base}")
            entry = {"base": base, "keep": record.get("keep"), "append": record["messages"]}
            messages = delta.decode(entry, lambda key: steps[int(key)].messages)
            tools = record.get("tools")
            if record.get("tools_from_step") is not None:
                tools = steps[int(record["tools_from_step"])].tools
            call = ModelCall(step, record.get("agent"), messages, tools, record.get("response"),
                             record.get("error"), record.get("target") or {},
                             record.get("duration_ms"))
            if call.response is None and call.error is None:
                raise SessionFileError(f"line {number}: step {step} has neither response nor error")
            steps[step] = call
            session.calls.append(call)
        elif kind == "tool_call":
            session.tools.append(ToolCallRecord(**_known(ToolCallRecord, record)))
        elif kind == "permission":
            session.permissions.append(PermissionRecord(**_known(PermissionRecord, record)))
        else:
            raise SessionFileError(f"line {number}: unknown record type {kind!r}")
    return session


def _known(cls: type, record: JsonObject) -> JsonObject:
    """The fields `cls` declares (a newer writer's extra fields are ignored)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in record.items() if k in names}
