"""Typed events: one definition per type, used by emitters, readers and the API schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import TypeAdapter
from scripted_llm import Call, Text, ToolCalls

from artifactflow import Resume, tool
from artifactflow.api.app import create_app
from artifactflow.events import docs as event_docs
from artifactflow.events.envelope import Emitted, Event, EventSchemaError, EventType, TypedEvent
from artifactflow.events.payloads import (
    PAYLOADS,
    AgentStartData,
    EventData,
    LLMChunkData,
    MessageStatus,
    PermissionRequestData,
    ToolCompleteData,
)

IDS = {"event_id": 1, "conversation_id": "c", "message_id": "m", "thread_id": "t"}


@tool(permission="confirm")
async def stamp(label: str) -> str:
    """Stamp a label (needs approval)."""
    return f"stamped {label}"


def test_every_event_type_has_exactly_one_definition() -> None:
    assert set(EventType) == set(PAYLOADS)
    assert all(payload.type is type_ for type_, payload in PAYLOADS.items())
    assert len(set(PAYLOADS.values())) == len(PAYLOADS)


def test_build_refuses_non_payloads_and_undeclared_fields() -> None:
    with pytest.raises(EventSchemaError, match="EventData is no event payload"):
        Event.build(EventData(), **IDS)
    typo = ToolCompleteData.model_validate(
        {"tool_call_id": "a", "tool": "t", "success": True, "result": {"success": True}, "sucess": True}
    )
    with pytest.raises(EventSchemaError, match="no field.*sucess.*ToolCompleteData"):
        Event.build(typo, **IDS)
    with pytest.raises(ValueError):  # a declared field with the wrong type
        AgentStartData.model_validate({"round": "first"})


def test_wire_format_is_exactly_what_the_emitter_set() -> None:
    event = Event.build(LLMChunkData(invocation="lead", delta="hi"), **IDS)
    assert event.type == EventType.LLM_CHUNK == "llm_chunk"
    assert isinstance(event.data, LLMChunkData) and event.data.delta == "hi"
    assert json.loads(event.model_dump_json())["data"] == {"invocation": "lead", "delta": "hi"}
    assert json.loads(event.model_dump_json())["type"] == "llm_chunk"
    # Payloads are read by attribute only: the dict access of the first release is gone.
    with pytest.raises(TypeError):
        event.data["delta"]  # type: ignore[index]
    assert not hasattr(event.data, "get")


def test_emitted_round_trips_through_graph_state() -> None:
    emitted = Emitted(AgentStartData(invocation="lead", round=2), "lead_agent")
    raw = emitted.dump()
    assert raw == {"type": "agent_start", "agent": "lead_agent", "data": {"invocation": "lead", "round": 2}}
    assert Emitted.load(raw) == emitted


def test_stored_events_parse_leniently() -> None:
    """A newer writer's extra field survives a round trip through an older reader."""
    row = {"type": "error", **IDS, "data": {"message": "boom", "kind": "llm", "hint": "retry"}}
    event = Event.model_validate(row)
    assert event.data.message == "boom"
    assert json.loads(event.model_dump_json())["data"]["hint"] == "retry"


async def test_a_real_run_emits_only_declared_fields(make_client, llm) -> None:
    client = await make_client(lead_tools=["stamp"], extra_tools=[stamp])
    llm.script(ToolCalls([Call("stamp", {"label": "x"})]), Text("all stamped"))
    paused = await client.run("stamp it")
    assert paused.status == MessageStatus.WAITING
    request = paused.events[-1]
    assert isinstance(request.data, PermissionRequestData)
    assert request.data.calls[0].tool == "stamp" and request.data.calls[0].arguments == {"label": "x"}
    done = await client.run(Resume(paused.message_id, "approve"))
    assert done.status == "completed"
    stored = await client.runs.events(paused.message_id)
    adapter = TypeAdapter(TypedEvent)
    for event in stored:
        assert not (event.data.__pydantic_extra__ or {}), (event.type, event.data.__pydantic_extra__)
        typed = adapter.validate_python(event.model_dump(mode="json"))
        assert typed.type == event.type
    complete = next(e for e in stored if e.type == "tool_complete")
    assert isinstance(complete.data, ToolCompleteData) and complete.data.result.data == "stamped x"


def test_openapi_publishes_every_event_shape() -> None:
    schema = create_app().openapi()
    defs = schema["components"]["schemas"]
    for type_, payload in PAYLOADS.items():
        assert payload.__name__ in defs, type_
    union = defs["Event"]
    assert union["discriminator"]["propertyName"] == "type"
    assert len(union["oneOf"]) == len(PAYLOADS)
    tool_complete = defs["ToolCompleteEvent"]
    assert tool_complete["properties"]["type"]["const"] == "tool_complete"
    assert set(defs["ToolCompleteData"]["required"]) >= {"tool_call_id", "tool", "success", "result"}


def test_event_reference_page_is_current() -> None:
    page = Path(__file__).resolve().parent.parent / "docs" / "events.md"
    assert page.read_text(encoding="utf-8") == event_docs.render(), (
        "docs/events.md is stale: run python -m artifactflow.events.docs > docs/events.md"
    )
