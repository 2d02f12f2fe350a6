"""Shared steps of the conformance suite: start a run, collect a stream, wait for a status."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import StreamPart


def human(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


async def collect(parts: AsyncIterator[StreamPart]) -> list[StreamPart]:
    return [part async for part in parts]


def events(parts: list[StreamPart], name: str) -> list[Any]:
    return [p.data for p in parts if p.event == name or p.event.startswith(name + "|")]


def messages_of(values: dict[str, Any] | None) -> list[dict[str, Any]]:
    return list((values or {}).get("messages") or [])


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def last_ai(values: dict[str, Any] | None) -> dict[str, Any]:
    ai = [m for m in messages_of(values) if m.get("type") in ("ai", "AIMessageChunk")]
    assert ai, f"no AI message in {values!r}"
    return ai[-1]


async def wait_for_status(
    client: LangGraphClient, thread_id: str, run_id: str, statuses: set[str], seconds: float = 30
) -> dict[str, Any]:
    """Poll the run until its status is one of `statuses` (observable state, not a sleep)."""
    async with asyncio.timeout(seconds):
        while True:
            run = await client.runs.get(thread_id, run_id)
            if run["status"] in statuses:
                return dict(run)
            await asyncio.sleep(0.05)


async def wait_for_thread(
    client: LangGraphClient, thread_id: str, statuses: set[str], seconds: float = 30
) -> dict[str, Any]:
    async with asyncio.timeout(seconds):
        while True:
            thread = await client.threads.get(thread_id)
            if thread["status"] in statuses:
                return dict(thread)
            await asyncio.sleep(0.05)


def approve() -> dict[str, Any]:
    return {"resume": {"decisions": [{"type": "approve"}]}}
