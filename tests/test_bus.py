"""The bus's wire format: payloads stay under PostgreSQL's 8000 bytes, order and text kept."""

from __future__ import annotations

import json

from artifactflow.core.run.bus import MAX_PAYLOAD, encode_items, payloads
from artifactflow.events.envelope import Event, EventType
from artifactflow.events.payloads import PAYLOADS


def event(type_: str, event_id: int, data: dict) -> Event:
    payload = PAYLOADS[EventType(type_)].model_validate(data)
    return Event.build(payload, event_id=event_id, timestamp=1.0, agent="lead_agent",
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


async def test_the_listener_listens_again_after_its_connection_is_killed():
    import asyncio

    import asyncpg
    from pg import fresh_database

    from artifactflow.core.run.bus import PgBus
    from artifactflow.core.store.repository import AppStore

    async with fresh_database() as url:
        store = await AppStore.open(url)
        bus = PgBus(url, store.engine)
        await bus.start()
        try:
            queue = bus.subscribe("m")
            admin = await asyncpg.connect(url)
            try:
                await admin.execute("SELECT pg_terminate_backend($1)", bus._conn.get_server_pid())
            finally:
                await admin.close()
            heard = None
            for _ in range(100):  # bounded: the bus reconnects within a second or two
                await bus.publish_position("m", 7)
                try:
                    heard = await asyncio.wait_for(queue.get(), 0.1)
                    break
                except TimeoutError:
                    continue
            assert heard == [{"i": 7}]
        finally:
            await bus.close()
            await store.close()
