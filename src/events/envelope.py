"""Execution events: an envelope (`Event`) around one typed payload per event type.

Event names are forever: a UI or a script keys on them. Every event carries the ids that place
it (conversation, message, thread) and an `event_id` that is monotonic and gap-free per
message, so a reader can replay from any point. `llm_chunk` carries a delta and is streamed
only, never stored. The payload classes (one per type) are in `event_payloads`; `TypedEvent`
is the same envelope as a discriminated union, published in the HTTP API's schema.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal, NamedTuple, Union

from pydantic import BaseModel, Field, SerializeAsAny, create_model, model_validator

from .payloads import PAYLOADS, EventData, EventType

__all__ = ["EPHEMERAL_TYPES", "FINAL_TYPES", "Emitted", "Event", "EventSchemaError", "EventType", "TypedEvent"]

EPHEMERAL_TYPES = frozenset({EventType.LLM_CHUNK})
# Events after which a message's stream ends (for now or for good).
FINAL_TYPES = frozenset(
    {EventType.COMPLETE, EventType.ERROR, EventType.CANCELLED, EventType.PERMISSION_REQUEST}
)


class EventSchemaError(ValueError):
    """An emitter built an event whose data does not match its type's definition."""


class _Envelope(BaseModel):
    event_id: int = Field(description="Monotonic, gap-free per message; llm_chunk: the last stored event's id")
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
    def build(cls, data: EventData, **envelope: Any) -> Event:
        """Build an event to emit from its payload (which names the type): a payload with a
        field its class does not declare is refused."""
        type_ = getattr(type(data), "type", None)
        if type_ is None or PAYLOADS.get(type_) is not type(data):
            raise EventSchemaError(f"{type(data).__name__} is no event payload; known: {', '.join(PAYLOADS)}")
        extra = data.__pydantic_extra__ or {}
        if extra:
            raise EventSchemaError(
                f"event {type_.value!r} has no field(s) {', '.join(sorted(extra))}; declare them "
                f"on {type(data).__name__} in events/payloads.py"
            )
        return cls(type=type_, data=data, **envelope)

    @property
    def is_final(self) -> bool:
        return self.type in FINAL_TYPES

    def to_json_line(self) -> str:
        return self.model_dump_json()


class Emitted(NamedTuple):
    """What a graph node writes to LangGraph's custom stream: a payload and the agent that
    produced it. The run (`core/run/runner.py`) numbers, stores and publishes it."""

    data: EventData
    agent: str | None = None

    def dump(self) -> dict[str, Any]:
        """Plain data, for an event that waits in graph state (a workflow step's start)."""
        return {"type": self.data.type.value, "agent": self.agent, "data": self.data.to_dict()}

    @classmethod
    def load(cls, raw: dict[str, Any]) -> Emitted:
        """The inverse of `dump` (leniently, as stored events)."""
        return cls(PAYLOADS[EventType(raw["type"])].model_validate(raw.get("data") or {}), raw.get("agent"))


def _typed_envelope(type_: EventType, payload: type[EventData]) -> type[BaseModel]:
    name = "".join(part.upper() if part == "llm" else part.capitalize() for part in type_.value.split("_"))
    name += "Event"
    return create_model(
        name,
        __base__=_Envelope,
        __doc__=payload.__doc__,
        type=(Literal[type_.value], ...),  # type: ignore[valid-type]
        data=(payload, ...),
    )


TYPED_EVENTS: dict[EventType, type[BaseModel]] = {t: _typed_envelope(t, p) for t, p in PAYLOADS.items()}
TypedEvent = Annotated[Union[tuple(TYPED_EVENTS.values())], Field(discriminator="type")]  # noqa: UP007
"""Every event as a discriminated union on `type` (for schemas and strict readers)."""


def _publish_as_union(cls: type[Event]) -> None:
    """Publish `Event` in JSON schemas as the discriminated union, so API users see every
    type's fields; at run time it stays one class."""
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(TypedEvent)  # pyright: ignore[reportArgumentType]

    def schema(core_schema: Any, handler: Any) -> Any:
        return handler(adapter.core_schema)

    cls.__get_pydantic_json_schema__ = classmethod(lambda _c, cs, h: schema(cs, h))  # type: ignore[assignment]


_publish_as_union(Event)
