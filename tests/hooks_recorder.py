"""Helpers for the engine-level hook tests: a hook that records every point, a compact view
of what it saw, and scripted answers per agent (the lead and its subagents call at once)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from artifactflow import Client, load_settings, tool
from artifactflow.hooks import POINTS, Hooks

SUB = "search_agent"


@tool
async def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"facts about {topic}"


def _recording(point: str) -> Any:
    async def method(self: Recorder, *args: Any) -> None:
        self.calls.append((point, args))

    method.__name__ = point
    return method


class Recorder(Hooks):
    """Records (point, args) for every hook point, in firing order; changes nothing."""

    name = "recorder"

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def seen(self) -> list[tuple[Any, ...]]:
        return [describe(point, args) for point, args in self.calls]

    def args(self, point: str) -> list[tuple[Any, ...]]:
        return [args for p, args in self.calls if p == point]


for _point in POINTS:
    setattr(Recorder, _point, _recording(_point))


def _agent(name: str) -> str:
    return "lead" if name == "lead_agent" else name


def describe(point: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """A compact, comparable view of one firing."""
    run, rest = args[0], args[1:]
    if point == "before_run":
        return (point, rest[0])
    if point == "on_run_start":
        return (point, run.segment)
    if point == "on_run_end":
        return (point, rest[0].status)
    if point in ("on_agent_start", "before_model_request", "on_model_start", "after_model_request", "on_model_end", "on_compaction"):
        return (point, _agent(rest[0].name), rest[0].round)
    if point == "on_agent_end":
        return (point, _agent(rest[0].name), rest[0].round, rest[1].outcome)
    if point in ("before_tool_call", "on_tool_start", "after_tool_call"):
        return (point, rest[0].id)
    if point == "on_tool_end":
        return (point, rest[0].call.id)
    if point == "on_tool_round_start":
        return (point, _agent(rest[0].agent), rest[0].round, tuple(c.id for c in rest[0].calls))
    if point == "after_tool_round":
        return (point, _agent(rest[0].agent), rest[0].round, tuple(o.call.id for o in rest[0].outcomes))
    if point == "on_permission_request":
        return (point, tuple(c.id for c in rest[0].calls))
    if point == "on_permission_result":
        return (point, tuple(d.action for d in rest[0].decisions))
    if point == "on_error":
        return (point, rest[0].scope)
    return (point,)


def agent_of(request: dict[str, Any]) -> str:
    system = request["messages"][0]["content"]
    return SUB if system.startswith(f"You are {SUB}") else "lead"


def by_agent(llm: Any, answers: dict[str, list[Any]]) -> None:
    """Answer each agent from its own queue."""
    lock = threading.Lock()

    def route(request: dict[str, Any]) -> Any:
        with lock:
            queue = answers.get(agent_of(request))
            return queue.pop(0) if queue else None

    llm.route(route)


async def open_client(
    config: Path, data: Path, hooks: list[Any] | None = None, extra_tools: list[Any] | None = None
) -> Client:
    """A `Client` with these hooks (and `lookup` unless other tools are given); the caller
    closes it."""
    settings = load_settings(config, data)
    return await Client.open(settings, extra_tools=extra_tools or [lookup], hooks=hooks or [])
