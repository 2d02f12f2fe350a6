"""The loop guard: a model repeating the same failing tool call is told, then stopped.

Weak models (a 270M local model, measured) repeat one failing call round after round until a
round limit or a signal ends them. A call *repeats* when its tool, its arguments (as history
resends them, keys sorted) and its error text are those of the invocation's previous call;
successful calls and other errors break the streak. A malformed call (an unknown subagent
name, arguments that are not one JSON object, invalid arguments) repeats by its *kind*
whatever its arguments (`failure_kind`: 30 calls to subagents named `agent1`,
`machine_id:179304`, … were measured with a 270M model), and its note names what is valid
(the error's own list of subagents, the tool's JSON schema). With the defaults
(`run.loop_guard: {warn_after: 3, stop_after: 5}`) the third identical failing call in a row
gets a note in its result telling the model to change course, and the fifth ends the run with
outcome `loop_detected`, the lead's latest text kept as the partial answer. 0 or null disables
either step. A weak model also alternates: a failing edit, a successful read, the edit again
(measured with Gemma 3 270M: `read_artifact` between malformed `update_artifact` and
`rewrite_artifact` calls, so no streak formed). So malformed calls are also counted by their
*family* (`family`: an unknown subagent, not JSON, an empty instruction, invalid arguments;
any tool) within the invocation's last `window` calls (default 12) whatever comes between: the
`warn_after`th such call in the window is told what is valid, the `stop_after`th ends the run
the same way. In a workflow step (no chat run to end) the stop fails the step's invocation
instead: the step ends with status `failed`, outcome `loop_detected` and the reason.

Nothing is kept in state: the streak is read back from the invocation's memory (its assistant
turns' calls and their tool results, newest first, only as far as the streak goes), so it is
the same after a checkpoint, a resume in another process, or a re-run of the tool node. The
note is appended behind a fixed marker that the comparison strips, so a noted result still
counts as the same error. A compaction that summarises old rounds starts the count afresh.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
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
    window: int | None = 12  # calls within which malformed calls of one family are counted

    @classmethod
    def of(cls, settings: Any) -> LoopGuardConfig:
        """From `settings.run.loop_guard` (absent: the defaults)."""
        raw = getattr(getattr(settings, "run", None), "loop_guard", None)
        if raw is None:
            return cls()
        return cls(
            warn_after=raw.warn_after or None,
            stop_after=raw.stop_after or None,
            window=getattr(raw, "window", cls.window) or None,
        )

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


KIND = "kind:"  # the arguments part of a signature that counts a kind of failure


def failure_kind(error: str) -> str | None:
    """The kind of a failure that says the call was malformed before the tool ran (what a weak
    model repeats with ever different arguments), or None for any other error. An unknown
    subagent name, arguments that are not JSON (or not an object), and a validation error
    counted by the fields it names (`url_list.0` and `url_list.3` are one field)."""
    body = error[len(FAILED_PREFIX) :] if error.startswith(FAILED_PREFIX) else error
    if body.startswith("unknown subagent "):
        return "an unknown subagent name"
    if body.startswith(("arguments are not valid JSON", "arguments must be a JSON object")):
        return "arguments that are not one JSON object"
    if body.startswith("call_subagent needs a non-empty"):
        return "an empty instruction"
    match = _INVALID.match(body)
    if match:
        fields = sorted({_field(p) for p in match.group(1).split("; ") if ":" in p})
        return f"invalid arguments ({', '.join(fields) or 'arguments'})"
    return None


_INVALID = re.compile(r"invalid arguments for '[^']*': (.*)", re.DOTALL)


def _field(problem: str) -> str:
    """`url_list.0: String should...` → `url_list` (the top-level field a problem names)."""
    return problem.split(":", 1)[0].strip().split(".", 1)[0]


def signature(name: str, raw_arguments: str | None, text: str | None) -> Signature | None:
    """What makes two calls "the same failing call"; None for a call that did not fail.
    A malformed call (`failure_kind`) is the same as another of its kind whatever its
    arguments; any other failure is the same only with the same arguments and error."""
    if text is None or not text.startswith(FAILED_PREFIX):
        return None
    error = text.split(NOTE_MARKER, 1)[0]
    kind = failure_kind(error)
    if kind is not None:
        return name, KIND + kind, error
    return name, _arguments(raw_arguments), error


def _same(a: Signature | None, b: Signature | None) -> bool:
    """Two failures in one streak: the same tool, arguments and error, or the same kind of
    malformed call (whose error text names the varying arguments)."""
    if a is None or b is None:
        return False
    if a[1].startswith(KIND) or b[1].startswith(KIND):
        return a[:2] == b[:2]
    return a == b


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
        if not _same(sig, first) or count >= bound:
            break
        count += 1
    return first, count


def family(sig: Signature | None) -> str | None:
    """The family of a malformed call, whatever the tool and the fields it names ("invalid
    arguments" for any field): what the window counts. None for a call that did not fail
    or failed in the tool."""
    if sig is None or not sig[1].startswith(KIND):
        return None
    kind = sig[1][len(KIND) :]
    return "invalid arguments" if kind.startswith("invalid arguments") else kind


def _recent(memory: Sequence[ChatMessage], current: set[str], window: int) -> list[Signature | None]:
    """The invocation's last `window` past calls' signatures, newest first (an answer between
    rounds ends them, as it ends a streak)."""
    found: list[Signature | None] = []
    for sig in _history(memory, current):
        if len(found) >= window:
            break
        found.append(sig)
    return found


def _window_note(sig: Signature, name: str, count: int, window: int, tools: list[str],
                 shape: str | None, stop: bool) -> str:
    """What the model is told when malformed calls of one family keep coming, other calls
    between them: what is valid for the call it just made."""
    head = (
        f"{count} of your last {window} tool calls were malformed ({name}: "
        f"{', '.join(sorted(set(tools)))})"
    )
    if stop:
        return f"{head}; the run is stopped."
    valid = f" {sig[0]}'s arguments must match this JSON schema: {shape}" if shape else ""
    return (
        f"{head}. This one: {sig[2][len(FAILED_PREFIX) :][:300]}{valid} "
        "Send one valid call, use another tool, or answer with what you have."
    )


def _described(sig: Signature) -> str:
    name, arguments, error = sig
    if arguments.startswith(KIND):
        return f"{name} with {arguments[len(KIND):]} → {error[len(FAILED_PREFIX) :][:300]}"
    args = arguments if len(arguments) <= 200 else arguments[:200] + "…"
    return f"{name}({args}) → {error[len(FAILED_PREFIX) :][:300]}"


def _kind_note(sig: Signature, count: int, shape: str | None, stop: bool) -> str:
    """What the model is told about a repeated kind of malformed call: what is valid."""
    name, kind, error = sig[0], sig[1][len(KIND) :], sig[2][len(FAILED_PREFIX) :]
    head = f"{count} calls of {name} in a row failed with {kind}"
    if stop:
        return f"{head}; the run is stopped."
    valid = f" Its arguments must match this JSON schema: {shape}" if shape else ""
    return (
        f"{head}. Varying the arguments will not help: {error[:300]}{valid} "
        "Send one valid call, use another tool, or answer with what you have."
    )


Shapes = Callable[[str], "str | None"]  # tool name → its arguments' JSON schema, compact


def judge(
    config: LoopGuardConfig,
    memory: Sequence[ChatMessage],
    calls: Sequence[PendingToolCall],
    texts: Mapping[str, str],
    shapes: Shapes | None = None,
) -> Verdict:
    """The verdict on one invocation's round: `memory` before the round, `calls` its calls in
    order, `texts` call id → the result text the model will see (absent: no result yet, such
    as a started subagent, which breaks a streak); `shapes` tells the model a tool's schema
    when it keeps sending malformed calls."""
    verdict = Verdict()
    if not config.active or not calls:
        return verdict
    bound = max(config.warn_after or 0, config.stop_after or 0)
    ids = {c["id"] for c in calls}
    current, count = _streak(memory, ids, bound)
    window = config.window or 0
    recent = _recent(memory, ids, window) if window else []  # newest first
    for call in calls:
        sig = signature(call["name"], call["arguments"], texts.get(call["id"]))
        recent.insert(0, sig)
        if sig is None:
            current, count = None, 0
            continue
        count = count + 1 if _same(sig, current) else 1
        current = sig
        kind = sig[1].startswith(KIND)
        if config.stop_after and count >= config.stop_after:
            what = "malformed tool calls of one kind" if kind else "the same failing tool call"
            verdict.stop = f"the agent made {what} {count} times in a row: {_described(sig)}"
            verdict.notes[call["id"]] = (
                _kind_note(sig, count, None, stop=True) if kind
                else f"This identical call failed {count} times in a row; the run is stopped."
            )
        elif config.warn_after and count >= config.warn_after and kind:
            shape = shapes(sig[0]) if shapes is not None else None
            verdict.notes[call["id"]] = _kind_note(sig, count, shape, stop=False)
        elif config.warn_after and count >= config.warn_after:
            verdict.notes[call["id"]] = (
                f"This identical call has now failed {count} times in a row with the same error. "
                "Repeating it will fail again: change course. Fix the arguments the error names, "
                "use another tool, or answer with what you have."
            )
        if call["id"] not in verdict.notes and window:
            _judge_window(config, verdict, call["id"], sig, recent[:window], shapes)
    return verdict


def _judge_window(
    config: LoopGuardConfig, verdict: Verdict, call_id: str, sig: Signature,
    recent: list[Signature | None], shapes: Shapes | None,
) -> None:
    """The window's verdict on a malformed call no streak has judged: its family counted in
    the invocation's last calls (`recent`, newest first, this call included)."""
    name = family(sig)
    if name is None:
        return
    same = [s for s in recent if family(s) == name]
    count, tools = len(same), [s[0] for s in same if s is not None]
    if config.stop_after and count >= config.stop_after:
        verdict.stop = (
            f"the agent made {count} malformed tool calls ({name}) within its last "
            f"{len(recent)} calls: {_described(sig)}"
        )
        verdict.notes[call_id] = _window_note(sig, name, count, len(recent), tools, None, True)
    elif config.warn_after and count >= config.warn_after:
        shape = shapes(sig[0]) if shapes is not None else None
        verdict.notes[call_id] = _window_note(sig, name, count, len(recent), tools, shape, False)


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
    shapes: Shapes | None = None,
) -> Verdict:
    """`judge` for every invocation of a round (a round may hold several subagents' calls)."""
    verdict = Verdict()
    if not config.active or not any(t.startswith(FAILED_PREFIX) for t in texts.values()):
        return verdict  # nothing failed: no streak goes on (the usual round reads no memory)
    by_invocation: dict[str, list[PendingToolCall]] = {}
    for call in calls:
        by_invocation.setdefault(call["invocation"], []).append(call)
    for invocation, own in by_invocation.items():
        part = judge(config, memories.get(invocation, ()), own, texts, shapes)
        verdict.notes.update(part.notes)
        if part.stop is not None and verdict.stop is None:
            verdict.stop, verdict.stopped = part.stop, invocation
    return verdict
