"""Tool results in recorded requests, stored once: a reference to the event that holds them.

A tool round's result is written to the event log (`tool_complete`, `data.result.data`) and
then sent to the model as the content of a `tool` message, so a recorded request
(`af_model_calls`) would store every result a second time: at 4 KB results that copy was 0.84×
the tool payload (issue 21, step 5). When the content is byte-for-byte the stored result, the
row keeps the message with `content: None` and a reference `[index in append, event_id]` in
`results`; reading the row puts the event's text back (`store.rows`), so every reader (export,
replay, eval) gets the request exactly as it was sent.

Only what is certain is referred to: a `tool_complete` event of the same message that is
already stored (the segment's published events, `RunContext.stored_events`), for the same
`tool_call_id`, whose result is a string equal to the content. A result the model saw
formatted (JSON of a dict, `ERROR: …`) or truncated is kept literally, as is one whose event
was not stored yet when the call ended, or that a hook added. Rows written before references
existed have no `results` and read as they always did.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..events.envelope import Event
from ..events.payloads import EventType, ToolCompleteData

MIN_CHARS = 64  # shorter results are cheaper kept than referred to
Ref = list[int]  # [index in the row's `append`, event_id of the `tool_complete`]


@dataclass
class StoredResults:
    """The string results of one segment's stored `tool_complete` events, by tool_call_id
    (the latest wins: a model may reuse ids), read incrementally from the segment's list."""

    source: Sequence[Event] | None = None
    seen: int = 0
    by_call: dict[str, tuple[int, str]] = field(default_factory=dict)

    def update(self, events: Sequence[Event]) -> None:
        if events is not self.source:  # a new segment of the message: a new list
            self.source, self.seen = events, 0
            self.by_call.clear()
        end = len(events)
        for i in range(self.seen, end):
            event = events[i]
            if event.type is EventType.TOOL_COMPLETE and isinstance(event.data, ToolCompleteData):
                text = event.data.result.data
                if isinstance(text, str):
                    self.by_call[event.data.tool_call_id] = (event.event_id, text)
        self.seen = end


def _candidates(append: Sequence[Any]) -> Iterator[tuple[int, str, str]]:
    """(index, tool_call_id, content) of the tool messages worth a reference."""
    for i, message in enumerate(append):
        if isinstance(message, Mapping) and message.get("role") == "tool":
            content, call_id = message.get("content"), message.get("tool_call_id")
            if isinstance(content, str) and len(content) >= MIN_CHARS and isinstance(call_id, str):
                yield i, call_id, content


def unseen(append: Sequence[Any], results: StoredResults) -> bool:
    """Whether a tool message of `append` matches no stored result yet: its event may still
    be on its way to the store (or the id's stored result is an earlier call's: ids repeat)."""
    for _, call_id, content in _candidates(append):
        found = results.by_call.get(call_id)
        if found is None or found[1] != content:
            return True
    return False


def shrink(append: Sequence[Any], results: StoredResults) -> tuple[list[Any], list[Ref]]:
    """`append` with each tool message whose content is a stored result replaced by a copy
    with `content: None`, and the references that restore them."""
    out: list[Any] = list(append)
    refs: list[Ref] = []
    for i, call_id, content in _candidates(append):
        found = results.by_call.get(call_id)
        if found is not None and found[1] == content:
            out[i] = {**append[i], "content": None}
            refs.append([i, found[0]])
    return out, refs


def wanted(rows: Iterable[Mapping[str, Any]]) -> set[int]:
    """Event ids the `results` of these call payloads refer to."""
    return {event_id for data in rows for _, event_id in data.get("results") or ()}


def expand(data: dict[str, Any], events: Mapping[int, Mapping[str, Any]]) -> None:
    """Put the referred results back into `data["append"]` (in place) and drop `results`, so
    the payload is what it would have been without references. `events`: stored events by
    id (`event_id`, `type`, `data`). A reference that does not resolve to the same call's
    string result is an error, never a guess."""
    refs = data.pop("results", None)
    if not refs:
        return
    append = data["append"]
    for index, event_id in refs:
        message = append[index]
        event = events.get(event_id)
        text = None
        if event is not None and event.get("type") == EventType.TOOL_COMPLETE.value:
            payload = event.get("data") or {}
            if payload.get("tool_call_id") == message.get("tool_call_id"):
                text = (payload.get("result") or {}).get("data")
        if not isinstance(text, str) or message.get("content") is not None:
            raise ValueError(
                f"recorded request refers to tool result event {event_id} for call "
                f"{message.get('tool_call_id')!r}, which the event log does not hold"
            )
        append[index] = {**message, "content": text}
