"""The loop guard: a model repeating the same failing tool call is told, then stopped.

Weak models (a 270M local model, measured) repeat one failing call round after round until a
round limit or a signal ends them. A call *repeats* when its tool, its arguments (as history
resends them, keys sorted) and its error text are those of the invocation's previous call;
successful calls and other errors break the streak. With the defaults
(`run.loop_guard: {warn_after: 3, stop_after: 5}`) the third identical failing call in a row
gets a note in its result telling the model to change course, and the fifth ends the run with
outcome `loop_detected`, the lead's latest text kept as the partial answer. 0 or null disables
either step. In a workflow step (no chat run to end) the stop fails the step's invocation
instead: the step ends with status `failed`, outcome `loop_detected` and the reason.

Nothing is kept in state: the streak is read back from the invocation's memory (its assistant
turns' calls and their tool results, newest first, only as far as the streak goes), so it is
the same after a checkpoint, a resume in another process, or a re-run of the tool node. The
note is appended behind a fixed marker that the comparison strips, so a noted result still
counts as the same error. A compaction that summarises old rounds starts the count afresh.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..shapes import ChatMessage, PendingToolCall
from ..tools.arguments import canonical_arguments

FAILED_PREFIX = "ERROR: "  # `ToolResult.model_text` of a failed call
NOTE_MARKER = "\n\n[loop guard] "

SETTING_HINT = " (loop guard: run.loop_guard in config/artifactflow.yaml; 0 turns a step off)"

Signature = tuple[str, str, str]  # tool, arguments (canonical), error text


@dataclass(frozen=True)
class LoopGuardConfig:
    warn_after: int | None = 3
    stop_after: int | None = 5

    @classmethod
    def of(cls, settings: Any) -> LoopGuardConfig:
        """From `settings.run.loop_guard` (absent: the defaults)."""
        raw = getattr(getattr(settings, "run", None), "loop_guard", None)
        if raw is None:
            return cls()
        return cls(warn_after=raw.warn_after or None, stop_after=raw.stop_after or None)

    @property
    def active(self) -> bool:
        return bool(self.warn_after or self.stop_after)


@dataclass
class Verdict:
    """Notes to append to call results (call id → text) and, when the run must end, why."""

    notes: dict[str, str] = field(default_factory=dict)
    stop: str | None = None
    stopped: str | None = None  # the invocation whose call ended the run (with `stop`)


def _arguments(raw: str | None) -> str:
    text = canonical_arguments(raw) or "{}"
    try:
        return json.dumps(json.loads(text), sort_keys=True, ensure_ascii=False)
    except ValueError:  # canonical_arguments only answers JSON objects
        return text


def signature(name: str, raw_arguments: str | None, text: str | None) -> Signature | None:
    """What makes two calls "the same failing call"; None for a call that did not fail."""
    if text is None or not text.startswith(FAILED_PREFIX):
        return None
    return name, _arguments(raw_arguments), text.split(NOTE_MARKER, 1)[0]


def _history(memory: Sequence[ChatMessage], current: set[str]) -> Iterator[Signature | None]:
    """The signatures of an invocation's past calls, newest first (the turn that made the
    `current` calls, already in memory, is skipped)."""
    results: dict[str, str] = {}
    for message in reversed(memory):
        role = message.get("role")
        if role == "tool":
            content = message.get("content")
            results[str(message.get("tool_call_id"))] = content if isinstance(content, str) else ""
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            if any(call["id"] in current for call in calls):
                results = {}
                continue
            if not calls:
                yield None  # an answer between rounds ends any streak
                return
            for call in reversed(calls):
                function = call.get("function") or {}
                yield signature(
                    str(function.get("name")), function.get("arguments"), results.get(call["id"])
                )
            results = {}


def _streak(
    memory: Sequence[ChatMessage], current: set[str], bound: int
) -> tuple[Signature | None, int]:
    """The signature repeated at the end of `memory` and how often (counted up to `bound`)."""
    history = _history(memory, current)
    first = next(history, None)
    if first is None:
        return None, 0
    count = 1
    for sig in history:
        if sig != first or count >= bound:
            break
        count += 1
    return first, count


def _described(sig: Signature) -> str:
    name, arguments, error = sig
    args = arguments if len(arguments) <= 200 else arguments[:200] + "…"
    return f"{name}({args}) → {error[len(FAILED_PREFIX) :][:300]}"


def judge(
    config: LoopGuardConfig,
    memory: Sequence[ChatMessage],
    calls: Sequence[PendingToolCall],
    texts: Mapping[str, str],
) -> Verdict:
    """The verdict on one invocation's round: `memory` before the round, `calls` its calls in
    order, `texts` call id → the result text the model will see (absent: no result yet, such
    as a started subagent, which breaks a streak)."""
    verdict = Verdict()
    if not config.active or not calls:
        return verdict
    bound = max(config.warn_after or 0, config.stop_after or 0)
    current, count = _streak(memory, {c["id"] for c in calls}, bound)
    for call in calls:
        sig = signature(call["name"], call["arguments"], texts.get(call["id"]))
        if sig is None:
            current, count = None, 0
            continue
        count = count + 1 if sig == current else 1
        current = sig
        if config.stop_after and count >= config.stop_after:
            verdict.stop = f"the agent made the same failing tool call {count} times in a row: {_described(sig)}"
            verdict.notes[call["id"]] = (
                f"This identical call failed {count} times in a row; the run is stopped."
            )
        elif config.warn_after and count >= config.warn_after:
            verdict.notes[call["id"]] = (
                f"This identical call has now failed {count} times in a row with the same error. "
                "Repeating it will fail again: change course. Fix the arguments the error names, "
                "use another tool, or answer with what you have."
            )
    return verdict


def with_note(text: str, note: str | None) -> str:
    return text if note is None else text + NOTE_MARKER + note


def partial_answer(lead_memory: Sequence[ChatMessage], reason: str) -> str:
    """The run's answer when the guard stops it: the lead's latest text, or why it stopped."""
    for message in reversed(lead_memory):
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, str) and content.strip():
            return content
    return f"(stopped before an answer: {reason})"


def judge_round(
    config: LoopGuardConfig,
    memories: Mapping[str, Sequence[ChatMessage]],
    calls: Sequence[PendingToolCall],
    texts: Mapping[str, str],
) -> Verdict:
    """`judge` for every invocation of a round (a round may hold several subagents' calls)."""
    verdict = Verdict()
    if not config.active or not any(t.startswith(FAILED_PREFIX) for t in texts.values()):
        return verdict  # nothing failed: no streak goes on (the usual round reads no memory)
    by_invocation: dict[str, list[PendingToolCall]] = {}
    for call in calls:
        by_invocation.setdefault(call["invocation"], []).append(call)
    for invocation, own in by_invocation.items():
        part = judge(config, memories.get(invocation, ()), own, texts)
        verdict.notes.update(part.notes)
        if part.stop is not None and verdict.stop is None:
            verdict.stop, verdict.stopped = part.stop, invocation
    return verdict
