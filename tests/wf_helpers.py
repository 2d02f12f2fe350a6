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
    """Answers each request from a per-agent queue; a callable entry decides from the request."""

    def __init__(self, llm: ScriptedLLM, answers: dict[str, list[Any]]) -> None:
        self.answers = {k: list(v) for k, v in answers.items()}
        self.lock = threading.Lock()
        self.seen: list[tuple[str, str]] = []
        llm.route(self)

    def __call__(self, request: dict[str, Any]) -> Response | None:
        agent = agent_of(request)
        with self.lock:
            self.seen.append((agent, instruction_of(request)))
            queue = self.answers.get(agent)
            if not queue:
                return None
            entry = queue[0]
            if callable(entry):
                answer = entry(request)
                if answer is not None:
                    return answer
                return None
            return queue.pop(0)


def as_json(value: Any) -> str:
    return json.dumps(value)


Factory = Callable[..., Any]
