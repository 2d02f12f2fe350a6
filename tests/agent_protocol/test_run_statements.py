"""A protocol run's own bookkeeping on SQLite: its run and thread rows go to the store's writer
(`core/store/ap_statements.py`), a run without a webhook claims no delivery, and the watcher
does not follow the run's events a second time. Counted on the app store's SQLAlchemy engine,
in process (`httpx.ASGITransport`), through real HTTP routes, a real SQLite file and the
scripted model."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import event

from artifactflow.api.app import create_app
from artifactflow.testing.scripted_llm import Text


async def test_a_protocol_run_keeps_its_rows_off_sqlalchemy(make_client: Any, llm_env: Any) -> None:
    llm_env.script(Text("hello back", chunk_size=4))
    af = await make_client()
    assert af.admin.store.is_sqlite
    app = create_app(client=af)
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://testserver", timeout=600
    ) as client:
        thread_id = (await client.post("/threads", json={})).json()["thread_id"]
        event.listen(af.admin.store.engine.sync_engine, "before_cursor_execute", seen)
        body = {
            "assistant_id": "agent",
            "input": {"messages": [{"role": "user", "content": "hello"}]},
            "stream_mode": "updates",
        }
        response = await client.post(f"/threads/{thread_id}/runs/stream", json=body)
        assert response.status_code == 200, response.text
        event.remove(af.admin.store.engine.sync_engine, "before_cursor_execute", seen)
        assert "event: updates" in response.text and "event: error" not in response.text
        runs = (await client.get(f"/threads/{thread_id}/runs")).json()
    assert [r["status"] for r in runs] == ["success"]  # settled by the time the stream ended
    for table in ("ap_runs", "ap_threads", "webhook_deliveries"):
        assert not [s for s in statements if table in s], table
    # the events were read by nobody but the stream's own handle (none for a new message)
    assert not [s for s in statements if "FROM af_events" in s]
