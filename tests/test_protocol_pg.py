"""The Agent Protocol on PostgreSQL with two workers (two engines on one database, each behind
its own uvicorn server): a CONFIRM interrupt raised on one is answered through the other,
exactly once, and two workers racing to resume one pause give one winner and one 409."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from browser_helpers import serving
from langgraph_sdk import get_client
from pg import fresh_database
from scripted_llm import Call, Text, ToolCalls

from artifactflow import tool
from artifactflow.api.app import create_app

EFFECTS: list[str] = []


@tool(permission="confirm")
async def deploy(target: str) -> str:
    """Deploy the service (needs a person's approval).

    Args:
        target: Where to deploy.
    """
    EFFECTS.append(target)
    return f"deployed to {target}"


@pytest.fixture
async def workers(make_client: Any, tmp_path: Any) -> AsyncIterator[tuple[Any, Any]]:
    EFFECTS.clear()
    async with fresh_database() as url:
        opened = []
        for name in ("a", "b"):  # one after another: the first creates the schema
            opened.append(
                await make_client(
                    extra_tools=[deploy],
                    lead_tools=["deploy"],
                    data_dir=tmp_path / f"data-{name}",
                    yaml_text=f"database_url: {url}\n",
                )
            )
        async with (
            serving(create_app(client=opened[0])) as url_a,
            serving(create_app(client=opened[1])) as url_b,
        ):
            yield get_client(url=url_a, api_key=None), get_client(url=url_b, api_key=None)
        for client in opened:
            await client.aclose()


async def test_interrupt_answered_through_the_other_worker(workers: Any, llm: Any) -> None:
    a, b = workers
    thread = await a.threads.create(metadata={"team": "ops"})
    tid = thread["thread_id"]
    assert (await b.threads.get(tid))["metadata"] == {"team": "ops"}
    llm.script(ToolCalls([Call("deploy", {"target": "prod"}, id="c1")]), Text("done on b"))
    parts = [
        p
        async for p in a.runs.stream(
            tid,
            "lead_agent",
            input={"messages": [{"role": "user", "content": "ship it"}]},
            stream_mode=["updates", "messages-tuple"],
        )
    ]
    assert any(p.event == "updates" and "__interrupt__" in p.data for p in parts)
    assert (await b.threads.get(tid))["status"] == "interrupted"
    state = await b.threads.get_state(tid)
    assert state["next"] == ["tool_execution"] and state["tasks"][0]["interrupts"]

    out = await b.runs.wait(
        tid, "lead_agent", command={"resume": {"decisions": [{"type": "approve"}]}}
    )
    assert out["messages"][-1]["content"] == "done on b"
    assert EFFECTS == ["prod"]
    assert (await a.threads.get(tid))["status"] == "idle"
    runs = await a.runs.list(tid)
    assert [r["status"] for r in runs] == ["success", "success"]
    history = await a.threads.get_history(tid)
    assert [m["type"] for m in history[0]["values"]["messages"]] == ["human", "ai", "tool", "ai"]


async def test_two_workers_racing_to_resume_one_pause(workers: Any, llm: Any) -> None:
    a, b = workers
    tid = (await a.threads.create())["thread_id"]
    llm.script(ToolCalls([Call("deploy", {"target": "prod"}, id="c1")]), Text("once"))
    await a.runs.wait(tid, "lead_agent", input={"messages": [{"role": "user", "content": "go"}]})
    resume = {"resume": {"decisions": [{"type": "approve"}]}}
    results = await asyncio.gather(
        a.runs.create(tid, "lead_agent", command=resume),
        b.runs.create(tid, "lead_agent", command=resume),
        return_exceptions=True,
    )
    won = [r for r in results if isinstance(r, dict)]
    lost = [r for r in results if isinstance(r, httpx.HTTPStatusError)]
    assert len(won) == 1 and len(lost) == 1, results
    assert lost[0].response.status_code == 409
    joined = await a.runs.join(tid, won[0]["run_id"])
    assert joined["messages"][-1]["content"] == "once"
    assert EFFECTS == ["prod"]
