"""`--live-model`: send each recorded request to the model the current config names, and
report how the answers changed.

Each step's exact recorded messages and tool specs go to the model that serves that agent
now (its profile in the current config), one request at a time, in step order; no graph runs
and no tool runs. The answer is compared with the recorded one:

- tool calls (names and parsed arguments, in order) that differ are a divergence: that is a
  change of behaviour (a different tool, different arguments, a call more or less);
- text that differs while the calls are the same is reported with its similarity, but does not
  fail the replay: a sampled model rarely repeats a sentence word for word;
- a model error is a divergence.

The report's divergence is the first step whose tool calls changed or that failed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from ..agents.model.base import ModelRequest
from ..errors import ArtifactFlowError
from .diff import json_diff, similarity, text_diff
from .report import Divergence, DivergenceKind, LiveStep, ReplayReport, Verdict
from .sandbox import sandboxed

if TYPE_CHECKING:
    from ..settings import Settings
    from .session import ModelCall, Session


async def live_replay(
    session: Session,
    settings: Settings | None,
    *,
    path: str | None = None,
    extra_tools: list[Any] | None = None,
) -> ReplayReport:
    notes: list[str] = []
    steps: list[LiveStep] = []
    try:
        async with sandboxed(session, settings, extra_tools=extra_tools, notes=notes) as engine:
            for call in session.calls:
                steps.append(await _step(engine.services, call))
    except Exception as exc:
        return ReplayReport(path, Verdict.FAILED, len(session.calls), error=str(exc), notes=notes)
    failing = [s.divergence for s in steps if s.divergence is not None and
               s.verdict in ("tool calls changed", "failed")]
    changed = [s.step for s in steps if s.verdict == "text changed"]
    if changed:
        notes.append(f"text changed (tool calls the same) at step(s) {', '.join(map(str, changed))}")
    verdict = Verdict.DIVERGED if failing else Verdict.SAME
    return ReplayReport(path, verdict, len(session.calls), len(steps),
                        failing[0] if failing else None, notes=notes, live=steps)


async def _step(services: Any, call: ModelCall) -> LiveStep:
    spec = services.agents.get(call.agent) if call.agent else None
    try:
        if spec is not None:
            model, target = services.model_for(spec)
        else:  # an agent that no longer exists, or a call made for no agent: the default model
            target = services.models.resolve(None)
            model = services.llm.for_target(target)
        response = await model.complete(ModelRequest(target, call.messages, call.tools, call.agent))
    except ArtifactFlowError as exc:
        return LiveStep(call.step, call.agent, "failed", None, Divergence(
            call.step, DivergenceKind.MODEL_ERROR, f"the current model failed: {exc}", call.agent,
        ))
    recorded = call.response or {}
    before = _calls(recorded.get("tool_calls") or [])
    after = _calls(response.tool_calls)
    ratio = round(similarity(recorded.get("content") or "", response.content), 3)
    if before != after:
        return LiveStep(call.step, call.agent, "tool calls changed", ratio, Divergence(
            call.step, DivergenceKind.TOOL_CALLS,
            f"the current model makes different tool calls ({_names(before)} → {_names(after)})",
            call.agent, json_diff(before, after, new="live"),
        ))
    if (recorded.get("content") or "") != response.content:
        return LiveStep(call.step, call.agent, "text changed", ratio, Divergence(
            call.step, DivergenceKind.RESPONSE,
            f"the current model answers with different text (similarity {ratio:.2f})",
            call.agent, text_diff(recorded.get("content") or "", response.content, new="live"),
        ))
    return LiveStep(call.step, call.agent, "same", 1.0)


class _Call(TypedDict):
    name: str | None
    arguments: Any  # parsed (the raw text when it is not JSON)


def _calls(tool_calls: Sequence[Mapping[str, Any]]) -> list[_Call]:
    """Name and parsed arguments of each call (ids are the provider's and always differ)."""
    out: list[_Call] = []
    for call in tool_calls:
        raw = call.get("arguments")
        try:
            arguments = json.loads(raw) if isinstance(raw, str) and raw else (raw or {})
        except json.JSONDecodeError:
            arguments = raw
        out.append({"name": call.get("name"), "arguments": arguments})
    return out


def _names(calls: list[_Call]) -> str:
    return ", ".join(str(c["name"]) for c in calls) or "none"
