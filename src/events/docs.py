"""Renders the event reference (docs/events.md) from the payload classes.

The classes in `event_payloads` are the one definition of every event type; the reference page
is generated from them so it cannot fall behind (a test compares the two). Regenerate with
`python -m artifactflow.events.docs > docs/events.md`.
"""

from __future__ import annotations

import inspect
import types
import typing
from typing import Any

from pydantic import BaseModel

from .envelope import EPHEMERAL_TYPES, FINAL_TYPES
from .payloads import PAYLOADS

HEADER = """# Event reference

Every event is one JSON object: the envelope below plus `data`, whose fields depend on `type`.
This page is generated from `src/events/payloads.py` (`python -m artifactflow.events.docs`);
the HTTP API publishes the same shapes in its OpenAPI schema (`Event`, a union discriminated on
`type`; `TypedEvent` in Python). Fields marked optional are left out of `data` when the emitter
did not set them.

| envelope field | type | meaning |
|---|---|---|
| `type` | string | one of the types below; names never change |
| `event_id` | integer | monotonic and gap-free per message; an `llm_chunk` carries the id of the last stored event |
| `timestamp` | number | seconds since the epoch |
| `agent` | string or null | the agent that produced it |
| `conversation_id`, `message_id`, `thread_id` | string | where it belongs |

From Python, `event.data` is the typed payload, one class per type in
`artifactflow.events.payloads` (`event.data.delta`, `isinstance(event.data, ToolCompleteData)`
or a `match` on the class; `event.data.to_dict()` gives the JSON object); `event.type` is the
`EventType` enum, equal to its string.

## Delivery

- Every event but `llm_chunk` is stored in the message's event log before anyone sees it;
  `llm_chunk` (a token delta, not the accumulated text) is streamed only.
- A run segment ends with one final event: `complete`, `cancelled`, `error`, or
  `permission_request` when it pauses for approval (the resumed segment goes on with
  `permission_result`, in the same message and numbering).
- A reader reattaches from any `event_id` and gets the stored events after it, then live
  ones, with no loss and no duplicates: `client.runs.get(message_id, after_event_id=N)`,
  `artifactflow events MESSAGE_ID --after N --follow`, or SSE on
  `GET /api/v1/stream/{message_id}` with `Last-Event-ID: N` or `?after=N`.
- Over SSE each event is one message: `id` = `event_id`, `event` = `type`, `data` = the event
  as JSON; with several workers on PostgreSQL a reader on any worker sees the same stream,
  token deltas included (on SQLite, a reader in another process polls the log and gets no
  deltas).
"""


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is list:
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return "object"
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if annotation is type(None):
        return "null"
    if annotation is Any:
        return "any"
    if inspect.isclass(annotation):
        if issubclass(annotation, BaseModel):
            return f"`{annotation.__name__}`"
        if issubclass(annotation, str) and annotation is not str:  # a StrEnum
            return " | ".join(f"`{m.value}`" for m in annotation)  # type: ignore[attr-defined]
        return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(
            annotation, annotation.__name__
        )
    return str(annotation)


def _fields(model: type[BaseModel]) -> list[str]:
    rows = []
    for name, field in model.model_fields.items():
        optional = "" if field.is_required() else " (optional)"
        description = field.description or ""
        rows.append(f"| `{name}` | {_type_name(field.annotation)}{optional} | {description} |")
    return rows


def render() -> str:
    lines = [HEADER]
    nested: dict[str, type[BaseModel]] = {}
    for type_, payload in PAYLOADS.items():
        notes = []
        if type_ in EPHEMERAL_TYPES:
            notes.append("streamed only, never stored")
        if type_ in FINAL_TYPES:
            notes.append("ends a stream")
        suffix = f" ({'; '.join(notes)})" if notes else ""
        lines.append(f"## `{type_}`{suffix}\n")
        doc = inspect.getdoc(payload)
        if doc and payload.__doc__:
            lines.append(doc + "\n")
        lines.append("| field | type | meaning |\n|---|---|---|")
        lines.extend(_fields(payload))
        lines.append("")
        for field in payload.model_fields.values():
            for arg in (field.annotation, *typing.get_args(field.annotation)):
                if inspect.isclass(arg) and issubclass(arg, BaseModel):
                    nested[arg.__name__] = arg
    lines.append("## Shared shapes\n")
    for name, model in sorted(nested.items()):
        lines.append(f"### `{name}`\n")
        lines.append("| field | type | meaning |\n|---|---|---|")
        lines.extend(_fields(model))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(render(), end="")
