"""Execution events: an envelope (`Event`) around one typed payload per event type.

Event names are forever: a UI or a script keys on them. Every event carries the ids that place
it (conversation, message, thread) and an `event_id` that is monotonic and gap-free per
message, so a reader can replay from any point. `llm_chunk` carries a delta and is streamed
only, never stored. The payload classes (one per type) are in `event_payloads`; `TypedEvent`
is the same envelope as a discriminated union, published in the HTTP API's schema.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field, SerializeAsAny, create_model, model_validator

from .event_payloads import PAYLOADS, EventData

EventType = Literal[
    "metadata",
    "agent_start",
    "llm_chunk",
    "llm_complete",
    "agent_complete",
    "tool_start",
    "tool_complete",
    "permission_request",
    "permission_result",
    "subagent_start",
    "subagent_complete",
    "artifact_created",
    "artifact_updated",
    "workflow_node_start",
    "workflow_node_complete",
    "handoff",
    "context_compacted",
    "complete",
    "cancelled",
    "error",
]

EPHEMERAL_TYPES = frozenset({"llm_chunk"})
# Events after which a message's stream ends (for now or for good).
FINAL_TYPES = frozenset({"complete", "error", "cancelled", "permission_request"})


class EventSchemaError(ValueError):
    """An emitter built an event whose data does not match its type's definition."""


class _Envelope(BaseModel):
    event_id: int = Field(description="Monotonic, gap-free per message; 0 for llm_chunk")
    timestamp: float = Field(default_factory=time.time)
    agent: str | None = None
    conversation_id: str
    message_id: str
    thread_id: str


class Event(_Envelope):
    type: EventType
    data: SerializeAsAny[EventData] = Field(default_factory=EventData)

    @model_validator(mode="before")
    @classmethod
    def _typed_data(cls, value: Any) -> Any:
        """Parse `data` into the payload class of `type` (leniently: stored events may come
        from an older or newer writer)."""
        if isinstance(value, dict):
            payload = PAYLOADS.get(value.get("type", ""))
            data = value.get("data")
            if payload is not None and not isinstance(data, payload):
                raw = data.to_dict() if isinstance(data, EventData) else (data or {})
                value = {**value, "data": payload.model_validate(raw)}
        return value

    @classmethod
    def build(cls, type_: str, data: dict[str, Any] | EventData, **envelope: Any) -> Event:
        """Build an event to emit: unknown types and undeclared fields are refused."""
        payload = PAYLOADS.get(type_)
        if payload is None:
            raise EventSchemaError(f"unknown event type {type_!r}; known: {', '.join(PAYLOADS)}")
        if isinstance(data, dict):
            unknown = set(data) - set(payload.model_fields)
            if unknown:
                raise EventSchemaError(
                    f"event {type_!r} has no field(s) {', '.join(sorted(unknown))}; declare them "
                    f"on {payload.__name__} in core/event_payloads.py"
                )
            data = payload.model_validate(data)
        elif not isinstance(data, payload):
            raise EventSchemaError(f"event {type_!r} needs {payload.__name__}, got {type(data).__name__}")
        return cls(type=type_, data=data, **envelope)  # type: ignore[arg-type]

    @property
    def is_final(self) -> bool:
        return self.type in FINAL_TYPES

    def to_json_line(self) -> str:
        return self.model_dump_json()


def _typed_envelope(type_: str, payload: type[EventData]) -> type[BaseModel]:
    name = "".join(part.upper() if part == "llm" else part.capitalize() for part in type_.split("_"))
    name += "Event"
    return create_model(
        name,
        __base__=_Envelope,
        __doc__=payload.__doc__,
        type=(Literal[type_], ...),  # type: ignore[valid-type]
        data=(payload, ...),
    )


TYPED_EVENTS: dict[str, type[BaseModel]] = {t: _typed_envelope(t, p) for t, p in PAYLOADS.items()}
TypedEvent = Annotated[Union[tuple(TYPED_EVENTS.values())], Field(discriminator="type")]  # noqa: UP007
"""Every event as a discriminated union on `type` (for schemas and strict readers)."""


def _publish_as_union(cls: type[Event]) -> None:
    """Publish `Event` in JSON schemas as the discriminated union, so API users see every
    type's fields; at run time it stays one class."""
    from pydantic import TypeAdapter

    adapter = TypeAdapter(TypedEvent)

    def schema(core_schema: Any, handler: Any) -> Any:
        return handler(adapter.core_schema)

    cls.__get_pydantic_json_schema__ = classmethod(lambda _c, cs, h: schema(cs, h))  # type: ignore[assignment]


_publish_as_union(Event)
