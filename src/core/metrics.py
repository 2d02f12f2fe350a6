"""Execution metrics, derived from the event log.

Every LLM call's usage and duration is in its `llm_complete` event and every tool call's
duration and outcome in its `tool_complete` event, so the figures stored on a message are a
fold over its events: correct across pauses, resumes and processes, and nothing extra in state.
A compaction's summary call is in its `context_compacted` event and counts as an LLM call
(`purpose: "summary"`): it costs tokens like any other and budgets include it. A
conversation's totals are a fold over its messages' stored metrics.

A call whose server sent no usage (llama-cpp-python while streaming) has its tokens counted
offline and marked `usage_estimated` (`tokens.estimated_calls` counts them; the CLI shows
"~"). A record without tokens (older events) has `None` tokens, not 0: the totals then count only
the reported calls and say how many were not (`tokens.unreported_calls`); when no call
reported usage, the totals are `None` (shown as "n/a"), so a missing figure never reads as a
real zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NotRequired, TypedDict


class CallRecord(TypedDict):
    """One LLM or tool call of a run, as `summarize` folds it (and `calls` lists it)."""

    kind: Literal["llm", "tool"]
    agent: str | None
    invocation: str | None
    duration_ms: float
    purpose: NotRequired[str]  # "summary": a compaction's summary call
    estimated: NotRequired[bool]  # tokens counted offline: the server sent no usage
    model: NotRequired[str | None]
    prompt_tokens: NotRequired[int | None]
    completion_tokens: NotRequired[int | None]
    attempts: NotRequired[int]
    cost_usd: NotRequired[float | None]
    tool: NotRequired[str | None]
    success: NotRequired[bool]


class ModelFigures(TypedDict):
    """One agent's calls to one model (tokens None when no call reported usage)."""

    calls: int
    prompt_tokens: int | None
    completion_tokens: int | None
    duration_ms: float
    unreported_calls: int


class TokenTotals(TypedDict):
    prompt: int | None
    completion: int | None
    total: int | None
    unreported_calls: int
    estimated_calls: NotRequired[int]  # calls whose server sent no usage: counted offline


class RunMetrics(TypedDict):
    """A message's stored metrics (`summarize`)."""

    wall_ms: float
    llm_calls: int
    llm_ms: float
    tool_calls: int
    tool_ms: float
    tool_success: int
    tool_failed: int
    tokens: TokenTotals
    cost_usd: float | None
    cost_complete: bool
    by_agent: dict[str | None, dict[str, ModelFigures]]  # agent → model → figures
    calls: list[CallRecord]
    conversation: NotRequired[ConversationUsage]  # added when a segment ends (run/maintenance.py)


class UsageTokens(TypedDict):
    prompt: int
    completion: int
    total: int


class ConversationUsage(TypedDict):
    messages: int
    tokens: UsageTokens
    cost_usd: float | None
    cost_complete: bool


class MessageUsage(TypedDict):
    tokens: int
    cost_usd: float | None


# The event types `records_from_events` reads, and the fields it reads of each (None: all):
# a run's end folds only these, not a dump of every event (a tool result is kilobytes).
METRIC_FIELDS: dict[str, set[str] | None] = {
    "llm_complete": None,
    "context_compacted": None,
    "tool_complete": {"invocation", "tool", "success", "duration_ms"},
}


def metric_view(event: Any) -> dict[str, Any]:
    """A typed event (`events.Event`) as `records_from_events` reads it: its type, agent and
    the data fields it needs."""
    fields = METRIC_FIELDS.get(str(event.type))
    return {"type": str(event.type), "agent": event.agent, "data": event.data.model_dump(mode="json", include=fields)}


def records_from_events(events: Sequence[Mapping[str, Any]]) -> list[CallRecord]:
    records: list[CallRecord] = []
    for event in events:
        data = event.get("data") or {}
        if event["type"] == "llm_complete":
            usage = data.get("usage") or {}
            record: CallRecord = {
                "kind": "llm",
                "agent": event.get("agent"),
                "invocation": data.get("invocation"),
                "model": data.get("model"),
                "prompt_tokens": usage.get("prompt_tokens"),
                "completion_tokens": usage.get("completion_tokens"),
                "duration_ms": data.get("duration_ms", 0.0),
                "attempts": data.get("attempts", 1),
                "cost_usd": data.get("cost_usd"),
            }
            if data.get("usage_estimated"):
                record["estimated"] = True
            records.append(record)
        elif event["type"] == "context_compacted" and (data.get("usage") or {}).get("prompt_tokens"):
            usage = data["usage"]
            records.append({
                "kind": "llm",
                "purpose": "summary",
                "agent": event.get("agent"),
                "invocation": data.get("invocation"),
                "model": data.get("summary_model"),
                "prompt_tokens": usage.get("prompt_tokens") or 0,
                "completion_tokens": usage.get("completion_tokens") or 0,
                "duration_ms": 0.0,
                "attempts": 1,
                "cost_usd": data.get("cost_usd"),
            })
        elif event["type"] == "tool_complete":
            records.append({
                "kind": "tool",
                "agent": event.get("agent"),
                "invocation": data.get("invocation"),
                "tool": data.get("tool"),
                "success": bool(data.get("success")),
                "duration_ms": data.get("duration_ms", 0.0),
            })
    return records


def _known(value: Any) -> int | None:
    return value if isinstance(value, int) else None


def summarize(records: list[CallRecord], wall_ms: float) -> RunMetrics:
    by_agent: dict[str | None, dict[str, ModelFigures]] = {}
    llm_ms = tool_ms = cost = 0.0
    prompt = completion = 0
    tool_ok = tool_failed = llm_calls = unreported = unpriced = estimated = 0
    for rec in records:
        if rec.get("kind") == "llm":
            llm_calls += 1
            estimated += int(bool(rec.get("estimated")))
            price = rec.get("cost_usd")
            if price is None:
                unpriced += 1
            else:
                cost += price
            llm_ms += rec.get("duration_ms", 0.0)
            p, c = _known(rec.get("prompt_tokens")), _known(rec.get("completion_tokens"))
            if p is None and c is None:
                unreported += 1
            prompt += p or 0
            completion += c or 0
            agent = by_agent.setdefault(rec["agent"], {})
            model = agent.setdefault(
                rec.get("model") or "?",
                {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "duration_ms": 0.0,
                 "unreported_calls": 0},
            )
            model["calls"] += 1
            model["prompt_tokens"] = (model["prompt_tokens"] or 0) + (p or 0)
            model["completion_tokens"] = (model["completion_tokens"] or 0) + (c or 0)
            model["unreported_calls"] += int(p is None and c is None)
            model["duration_ms"] = round(model["duration_ms"] + rec.get("duration_ms", 0.0), 2)
        elif rec.get("kind") == "tool":
            tool_ms += rec.get("duration_ms", 0.0)
            if rec.get("success"):
                tool_ok += 1
            else:
                tool_failed += 1
    for agent in by_agent.values():
        for model in agent.values():
            if model["unreported_calls"] == model["calls"]:
                model["prompt_tokens"] = model["completion_tokens"] = None
    known = llm_calls == 0 or unreported < llm_calls
    tokens: TokenTotals = {
        "prompt": prompt if known else None,
        "completion": completion if known else None,
        "total": prompt + completion if known else None,
        "unreported_calls": unreported,
    }
    if estimated:
        tokens["estimated_calls"] = estimated
    return {
        "wall_ms": round(wall_ms, 2),
        "llm_calls": llm_calls,
        "llm_ms": round(llm_ms, 2),
        "tool_calls": tool_ok + tool_failed,
        "tool_ms": round(tool_ms, 2),
        "tool_success": tool_ok,
        "tool_failed": tool_failed,
        "tokens": tokens,
        # None when no call was priced; `cost_complete` says whether every call was.
        "cost_usd": round(cost, 6) if llm_calls > unpriced else None,
        "cost_complete": unpriced == 0,
        "by_agent": by_agent,
        "calls": records,
    }


def conversation_usage(messages: Sequence[Mapping[str, Any]]) -> ConversationUsage:
    """Tokens and cost over a conversation's messages (from their stored metrics)."""
    tokens = prompt = completion = 0
    cost = 0.0
    priced = unpriced = 0
    for message in messages:
        metrics = message.get("metrics") or {}
        figures = metrics.get("tokens") or {}
        tokens += int(figures.get("total") or 0)
        prompt += int(figures.get("prompt") or 0)
        completion += int(figures.get("completion") or 0)
        if metrics.get("cost_usd") is not None:
            cost += float(metrics["cost_usd"])
            priced += 1
        if metrics.get("cost_complete", not metrics.get("llm_calls")) is False:
            unpriced += 1
    return {
        "messages": len(messages),
        "tokens": {"prompt": prompt, "completion": completion, "total": tokens},
        "cost_usd": round(cost, 6) if priced else None,
        "cost_complete": unpriced == 0,
    }


def message_usage(message: Mapping[str, Any]) -> MessageUsage:
    """One message's tokens and cost (from its stored metrics) for trees and listings."""
    metrics = message.get("metrics") or {}
    return {"tokens": int((metrics.get("tokens") or {}).get("total") or 0), "cost_usd": metrics.get("cost_usd")}
