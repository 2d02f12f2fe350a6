"""System prompts and message lists for one agent step.

The lead sees: its prompt, the subagents it may call, the conversation's artifact inventory
(the plan in full), the conversation history (root → parent), the task, and its own memory.
A subagent sees only its prompt, the current plan, its instruction and its own memory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from ..shapes import ChatMessage, Role
from .spec import AgentSpec

PLAN_ID = "task_plan"
PREVIEW_CHARS = 240


def subagent_section(subagents: list[AgentSpec]) -> str:
    if not subagents:
        return ""
    lines = ["## Subagents you can call with call_subagent"]
    lines += [f"- {a.name}: {a.description or 'no description'}" for a in subagents]
    return "\n".join(lines)


def artifact_inventory(artifacts: Sequence[Mapping[str, Any]]) -> str:
    if not artifacts:
        return "## Artifacts in this conversation\n(none yet)"
    lines = ["## Artifacts in this conversation"]
    plan = None
    for art in artifacts:
        if art["artifact_id"] == PLAN_ID:
            plan = art
            continue
        preview = " ".join(art["content"].split())[:PREVIEW_CHARS]
        more = "…" if len(art["content"]) > PREVIEW_CHARS else ""
        lines.append(
            f"- id `{art['artifact_id']}` (v{art['version']}, {art['content_type']}): "
            f"{art['title']} — {preview}{more}"
        )
    if plan is not None:
        lines.append(f"\n### Current plan (`{PLAN_ID}`, v{plan['version']})\n{plan['content']}")
    return "\n".join(lines)


def lead_messages(
    spec: AgentSpec,
    *,
    task: str,
    history: list[list[str]],
    memory: list[ChatMessage],
    subagents: list[AgentSpec],
    artifacts: Sequence[Mapping[str, Any]] | None,
) -> list[ChatMessage]:
    sections = [spec.prompt or "You are a helpful assistant."]
    if "call_subagent" in spec.tools:
        sections.append(subagent_section(subagents))
    if artifacts is not None:
        sections.append(artifact_inventory(artifacts))
    system = "\n\n".join(s for s in sections if s)
    messages: list[ChatMessage] = [{"role": "system", "content": system}]
    messages += [ChatMessage(role=cast(Role, role), content=content) for role, content in history]
    messages.append({"role": "user", "content": task})
    messages += memory
    return messages


def subagent_messages(
    spec: AgentSpec,
    *,
    instruction: str,
    plan: Mapping[str, Any] | None,
    memory: list[ChatMessage],
) -> list[ChatMessage]:
    system = spec.prompt or f"You are {spec.name}."
    if plan is not None:
        system += f"\n\n## Current plan\n{plan['content']}"
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": instruction},
        *memory,
    ]
