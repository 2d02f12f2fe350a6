"""Small tools several run tests share: an AUTO echo, a CONFIRM tool that pauses the run, and a
tool that sleeps (to hold a run while a test acts on it)."""

from __future__ import annotations

import asyncio

from artifactflow import tool


@tool
async def echo(text: str) -> str:
    """Echo."""
    return text


@tool(permission="confirm")
async def guarded(text: str) -> str:
    """Needs approval."""
    return text


@tool
async def sleepy(seconds: float) -> str:
    """Sleep a while."""
    await asyncio.sleep(seconds)
    return "slept"
