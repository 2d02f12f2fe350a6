"""Helpers for workflow tests: configs with agents and workflow files, and a scripted model
that answers by agent (its system prompt) and by instruction (for parallel items)."""

from __future__ import annotations

import json
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import make_config, write_agent
from scripted_llm import Response, ScriptedLLM


def workflow_config(root: Path, workflows: dict[str, str], agents: dict[str, list[str]] | None = None,
                    **kwargs: Any) -> Path:
    """A config folder with a lead, the given agents (name -> tools) and workflow files."""
    config = make_config(root, **kwargs)
    for name, tools in (agents or {}).items():
        write_agent(config / "agents", name, tools=tools, prompt=f"You are {name}.")
    folder = config / "workflows"
    folder.mkdir(exist_ok=True)
    for name, text in workflows.items():
        (folder / f"{name}.yaml").write_text(textwrap.dedent(text), encoding="utf-8")
    return config


def agent_of(request: dict[str, Any]) -> str:
    system = request["messages"][0]["content"]
    return system.split("You are ", 1)[1].split(".", 1)[0]


def instruction_of(request: dict[str, Any]) -> str:
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


class ByAgent:
    """Answers each request by its agent: from a FIFO list, or from a function of the request
    (for parallel items, which arrive in any order). Records (agent, instruction) pairs."""

    def __init__(self, llm: ScriptedLLM, answers: dict[str, list[Any] | Callable[[dict], Any]]) -> None:
        self.answers = {k: (v if callable(v) else list(v)) for k, v in answers.items()}
        self.lock = threading.Lock()
        self.seen: list[tuple[str, str]] = []
        llm.route(self)

    def __call__(self, request: dict[str, Any]) -> Response | None:
        agent = agent_of(request)
        with self.lock:
            self.seen.append((agent, instruction_of(request)))
            entry = self.answers.get(agent)
            if not callable(entry):
                return entry.pop(0) if entry else None
        return entry(request)  # outside the lock: it may wait for another request

    def agents(self) -> list[str]:
        return [agent for agent, _ in self.seen]


def by_item(table: dict[str, Any]) -> Callable[[dict], Any]:
    """Answer by which key occurs in the request's instruction (one answer per key, or a
    list consumed in order for repeated requests of the same item)."""
    lists = {k: list(v) if isinstance(v, list) else [v] for k, v in table.items()}

    def answer(request: dict[str, Any]) -> Any:
        text = instruction_of(request)
        for key, queue in lists.items():
            if key in text and queue:
                return queue.pop(0) if len(queue) > 1 else queue[0]
        return None

    return answer


def as_json(value: Any) -> str:
    return json.dumps(value)


Factory = Callable[..., Any]
