"""The bus's wire format: payloads stay under PostgreSQL's 8000 bytes, order and text kept."""

from __future__ import annotations

import json

from artifactflow.core.events import Event
from artifactflow.core.run.bus import MAX_PAYLOAD, encode_items, payloads


def event(type_: str, event_id: int, data: dict) -> Event:
    return Event.build(type_, data, event_id=event_id, timestamp=1.0, agent="lead_agent",
                       conversation_id="c", message_id="m", thread_id="t")


def test_a_large_delta_is_cut_into_deltas_that_add_up_and_fit():
    text = "é" * 5000 + "x" * 9000  # multi-byte characters count as bytes on the wire
    items = encode_items([event("llm_chunk", 3, {"delta": text, "invocation": "lead"})])
    texts = payloads("m", items)
    assert len(texts) > 1 and all(len(p.encode("utf-8")) <= MAX_PAYLOAD for p in texts)
    deltas = [item["d"]["delta"] for p in texts for item in json.loads(p)["x"]]
    assert "".join(deltas) == text
    assert all(item["i"] == 3 and item["t"] == "llm_chunk" for p in texts for item in json.loads(p)["x"])


def test_small_events_travel_inline_large_ones_by_id_in_order():
    batch = [
        event("agent_start", 1, {"invocation": "lead", "round": 1}),
        event("llm_chunk", 1, {"delta": "hi", "invocation": "lead"}),
        event("agent_complete", 2, {"invocation": "lead", "content": "r" * 20_000}),
        event("complete", 3, {"response": "done", "outcome": "completed", "metrics": {}}),
    ]
    items = [item for p in payloads("m", encode_items(batch)) for item in json.loads(p)["x"]]
    assert [(item.get("t"), item["i"]) for item in items] == [
        ("agent_start", 1), ("llm_chunk", 1), (None, 2), ("complete", 3)
    ]
    assert items[3]["d"]["response"] == "done"
