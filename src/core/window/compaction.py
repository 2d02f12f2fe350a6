"""Compaction: keep an agent's next request inside its model's context window.

Called before each model call with the request's fixed part (system prompt with the plan,
conversation history, task: never summarized) and the agent's working memory:

1. `plan_compaction` decides. Under `compact_at` × window nothing happens. Above it, the
   newest rounds are kept verbatim (at most `keep_recent_rounds`, fewer if they do not fit
   in half the threshold, so that several rounds fit before the next compaction) and
   everything older is cut, only at round boundaries (`rounds.units`). If even the newest
   round alone does not fit, its largest tool results are shortened with a visible marker.
2. `fit_request` carries the plan out: the one summary call (through a callable the caller
   provides, which picks `context.summary_model`), then the new memory: one summary message,
   then the kept rounds. A cut part holding only an earlier summary is never re-summarized.
3. `memory_writes` turns the node's update into channel writes that replace the memory in
   state: a reset then one append in the memory's DeltaChannel (`{inv: None}`, then
   `{inv: [...]}`), so a checkpoint holds the summary and the kept rounds once and no copy of
   what was cut. The originals stay in the event log.

The aggressive mode is for a provider that still says "too long" (our estimate was wrong):
keep only the newest round, aim lower, shorten its results. When nothing is left to reduce,
`ContextWindowExceeded` says which setting to change.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...errors import UserError
from ...shapes import ChatMessage
from .rounds import is_summary, rounds_in, summary_message, units
from .summary import clip_to_tokens, fallback_summary, summary_request
from .tokens import TokenCounter, messages_tokens, request_tokens, text_tokens

Message = ChatMessage
Summarize = Callable[[list[Message]], Awaitable[str]]

AFTER_SHARE = 0.5  # a compaction aims at this share of the threshold
AGGRESSIVE_SHARE = 0.35
MIN_ROUND_TOKENS = 256  # the newest round needs at least this much room
MIN_KEEP_CHARS = 400  # a shortened result keeps at least this much
SHRINK_MARK = (
    "\n\n[artifactflow: {removed:,} of {total:,} characters of this result were cut to fit the "
    "model's context window ({window:,} tokens); the full result is in the event log. Ask "
    "for a smaller part if you need more.]"
)


class ContextWindowExceeded(UserError):
    """A request cannot be made to fit the model's context window; `setting` names what to
    change."""

    def __init__(self, message: str, *, agent: str | None = None, setting: str = "") -> None:
        super().__init__(message)
        self.agent = agent
        self.setting = setting


@dataclass(frozen=True)
class CompactionConfig:
    """What compaction needs to know about one agent's model and the `context:` settings."""

    window: int
    compact_at: float = 0.8
    keep_recent_rounds: int = 4
    summary_max_tokens: int = 1024
    agent: str = "agent"
    model_label: str = "the model"  # e.g. "model profile 'local'", for error messages

    @classmethod
    def from_settings(cls, settings: Any, window: int, *, agent: str, model_label: str) -> CompactionConfig:
        """`settings` is a `ContextSettings`."""
        return cls(
            window=window,
            compact_at=settings.compact_at,
            keep_recent_rounds=settings.keep_recent_rounds,
            summary_max_tokens=settings.summary_max_tokens,
            agent=agent,
            model_label=model_label,
        )

    @property
    def threshold(self) -> int:
        return int(self.window * self.compact_at)

    @property
    def summary_tokens(self) -> int:
        """Room the summary may take: its setting, at most an eighth of the threshold."""
        return max(32, min(self.summary_max_tokens, self.threshold // 8))


@dataclass
class CompactionPlan:
    cut: int  # memory[:cut] is summarized; 0: nothing to summarize (only shortened)
    kept: list[Message]  # memory[cut:], newest results possibly shortened
    rounds_summarized: int
    tokens_before: int
    aggressive: bool = False
    shrunk: list[str] = field(default_factory=list)  # tool_call_ids of shortened results


@dataclass
class CompactionResult:
    memory: list[Message]  # the new memory: summary (if any) + kept rounds
    tokens_before: int
    tokens_after: int
    rounds_summarized: int
    aggressive: bool
    shrunk: list[str]
    summary_chars: int

    def event_data(self) -> dict[str, Any]:
        """Payload of the `context_compacted` event (the caller adds the agent)."""
        return {
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "rounds_summarized": self.rounds_summarized,
            "aggressive": self.aggressive,
            "results_shortened": len(self.shrunk),
            "summary_chars": self.summary_chars,
        }


def _fixed_too_large(config: CompactionConfig, tokens: int) -> ContextWindowExceeded:
    return ContextWindowExceeded(
        f"{config.agent}: the system prompt, task and conversation history alone need about "
        f"{tokens:,} tokens, more than {config.compact_at:g} × the {config.window:,}-token "
        f"context window of {config.model_label}. If the model's window is larger, set "
        "`context_window` for it in config/models.yaml (or context.default_window); otherwise "
        "shorten the agent's prompt or the task.",
        agent=config.agent,
        setting="context_window",
    )


def _round_too_large(config: CompactionConfig, tokens: int) -> ContextWindowExceeded:
    return ContextWindowExceeded(
        f"{config.agent}: the newest tool round needs about {tokens:,} tokens even with its "
        f"results shortened, which does not fit the {config.window:,}-token context window of "
        f"{config.model_label}. Lower tools.max_result_chars, or set a larger `context_window` "
        "for this model in config/models.yaml if it has one.",
        agent=config.agent,
        setting="tools.max_result_chars",
    )


def _shrink(
    unit: list[Message], excess: int, counter: TokenCounter, window: int
) -> tuple[list[Message], list[str]]:
    """Shorten the unit's largest tool results until about `excess` tokens are gone."""
    out = [Message(**m) for m in unit]
    shrunk: list[str] = []
    order = sorted(
        (i for i, m in enumerate(out) if m.get("role") == "tool" and isinstance(m.get("content"), str)),
        key=lambda i: len(str(out[i].get("content"))),
        reverse=True,
    )
    for index in order:
        if excess <= 0:
            break
        content = str(out[index].get("content"))
        raw = max(1, text_tokens(content))
        chars_per_token = len(content) / (raw * counter.ratio)
        mark = SHRINK_MARK.format(removed=10**9, total=10**9, window=window)
        remove = int(excess * chars_per_token) + len(mark) + 16
        keep = max(MIN_KEEP_CHARS, len(content) - remove)
        if keep >= len(content):
            continue
        new = content[:keep] + SHRINK_MARK.format(removed=len(content) - keep, total=len(content), window=window)
        excess -= counter.scale(raw) - counter.scale(text_tokens(new))
        out[index]["content"] = new
        shrunk.append(str(out[index].get("tool_call_id")))
    return out, shrunk


def plan_compaction(
    *,
    fixed: Sequence[Mapping[str, Any]],
    memory: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    counter: TokenCounter,
    config: CompactionConfig,
    aggressive: bool = False,
) -> CompactionPlan | None:
    """What to cut so the next request fits; None when nothing needs to (or can) change."""
    before = counter.estimate([*fixed, *memory], tools)
    if not aggressive and before <= config.threshold:
        return None
    base_raw = request_tokens(fixed, tools)
    if counter.calibrated(base_raw) + MIN_ROUND_TOKENS > config.threshold:
        raise _fixed_too_large(config, counter.calibrated(base_raw))
    share = AGGRESSIVE_SHARE if aggressive else AFTER_SHARE
    reserve = config.summary_tokens
    target = max(int(config.threshold * share), counter.calibrated(base_raw) + reserve + MIN_ROUND_TOKENS)
    target = min(target, config.threshold)
    limit = 1 if aggressive else config.keep_recent_rounds

    spans = units(memory)
    cut = len(memory)
    kept_raw = 0
    rounds = 0
    for start, end in reversed(spans):
        if is_summary(memory[start]):
            break  # an earlier summary and everything before it go into the new summary
        span_raw = messages_tokens(memory[start:end])
        newest = cut == len(memory)
        fits = counter.calibrated(base_raw + kept_raw + span_raw) + reserve <= target
        if not newest and (rounds >= limit or not fits):
            break
        cut, kept_raw, rounds = start, kept_raw + span_raw, rounds + 1
    if all(is_summary(m) for m in memory[:cut]):
        cut = 0  # nothing new to summarize: keep the earlier summary as it is
    kept = [Message(**m) for m in memory[cut:]]
    reserve_now = reserve if cut else 0

    shrunk: list[str] = []
    after = counter.calibrated(request_tokens([*fixed, *kept], tools)) + reserve_now
    if after > target and kept:
        newest_start = units(kept)[-1][0]
        older, newest = kept[:newest_start], kept[newest_start:]
        # Older kept rounds are there only because they fitted: the newest is the excess.
        newest, shrunk = _shrink(newest, after - target, counter, config.window)
        kept = older + newest
        after = counter.calibrated(request_tokens([*fixed, *kept], tools)) + reserve_now
        if after > config.threshold:
            raise _round_too_large(config, after)
    if cut == 0 and not shrunk:
        return None
    return CompactionPlan(
        cut=cut,
        kept=kept,
        rounds_summarized=rounds_in(memory[:cut]),
        tokens_before=before,
        aggressive=aggressive,
        shrunk=shrunk,
    )


async def fit_request(
    *,
    fixed: Sequence[Mapping[str, Any]],
    memory: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    task: str,
    summarize: Summarize,
    counter: TokenCounter,
    config: CompactionConfig,
    aggressive: bool = False,
    summary_window: int | None = None,
) -> CompactionResult | None:
    """Plan and carry out a compaction if the request needs one (what an agent node calls
    before each model call, and with `aggressive=True` after a context-overflow error)."""
    plan = plan_compaction(
        fixed=fixed, memory=memory, tools=tools, counter=counter, config=config, aggressive=aggressive
    )
    if plan is None:
        if aggressive:
            tokens = counter.estimate([*fixed, *memory], tools)
            raise ContextWindowExceeded(
                f"{config.agent}: the provider says the request is too long, but nothing is left "
                f"to compact (about {tokens:,} tokens estimated against the configured "
                f"{config.window:,}-token window of {config.model_label}). The model's real "
                "window is probably smaller: set `context_window` for it in config/models.yaml "
                "(or context.default_window).",
                agent=config.agent,
                setting="context_window",
            )
        return None
    # Carry out the plan: one summary call (if anything is cut), then the new memory.
    new_memory = list(plan.kept)
    summary_chars = 0
    if plan.cut:
        cut = memory[: plan.cut]
        # Sized with the heuristic: shrink the window by the calibration ratio, so a denser
        # tokenizer (the same model's, by default) still finds the request inside it.
        window = int((summary_window or config.window) / max(1.0, counter.ratio))
        request = summary_request(task, cut, max_tokens=config.summary_tokens, window=window)
        text = (await summarize(request) or "").strip() or fallback_summary(cut, config.summary_tokens)
        # The ratio turns our estimate into the agent's model's tokens; keep within the reserve.
        text = clip_to_tokens(text, int(config.summary_tokens / max(counter.ratio, 0.25)))
        summary_chars = len(text)
        new_memory = [summary_message(text, plan.rounds_summarized), *new_memory]
    tokens_after = counter.estimate([*fixed, *new_memory], tools)
    if tokens_after > config.threshold:
        raise _round_too_large(config, tokens_after)
    return CompactionResult(
        memory=new_memory,
        tokens_before=plan.tokens_before,
        tokens_after=tokens_after,
        rounds_summarized=plan.rounds_summarized,
        aggressive=plan.aggressive,
        shrunk=plan.shrunk,
        summary_chars=summary_chars,
    )


def memory_writes(
    update: Mapping[str, Any], memories: Mapping[str, list[Message]]
) -> list[tuple[str, Any]]:
    """A node's partial update as channel writes that replace whole memories.

    `memories` maps an invocation to its complete new memory (the compacted memory plus what
    this step appends, e.g. the new assistant turn). Return `Command(update=writes)`: the
    memory channel gets `{inv: None}` (reset) and then one append holding the new memories
    and the update's other memory entries; every other key is written as it was.
    """
    appended: dict[str, Any] = {**(update.get("agent_memories") or {}), **memories}
    writes: list[tuple[str, Any]] = [
        ("agent_memories", {invocation: None for invocation in memories}),
        ("agent_memories", appended),
    ]
    writes += [(key, value) for key, value in update.items() if key != "agent_memories"]
    return writes
