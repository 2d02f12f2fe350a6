"""The conversation history a new message sees: recent turns verbatim, older ones condensed
once, stored, and reused.

Without this, a branch of a few dozen messages outgrows the window and every later message
on it fails. The history (the path root → parent, as user/assistant turns) may use at most
`context.history_share` of the lead's compaction threshold. Above that, the older messages
(all but the newest `context.keep_recent_messages`, fewer if even those are too long) are
condensed with one model call into a summary that extends the previous stored one, and the
summary is stored keyed by the last message it covers (`HistorySummaries`). Later messages
on any branch through that message reuse it, so a 100-message conversation costs a summary
call every so often, not on every message. Only messages with a final status are covered:
a paused message's answer may still change.

The summary reaches the lead as a `["system", ...]` turn in front of the verbatim turns,
i.e. right after its system prompt.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...events.status import FINAL_STATUSES
from ...shapes import ChatMessage
from .summary import clip_to_tokens
from .tokens import TokenCounter, messages_tokens, text_tokens

HISTORY_HEADER = "Summary of the earlier conversation ({covers} message{s}), oldest first:"
HISTORY_SYSTEM = (
    "You condense the earlier part of a conversation between a user and an AI assistant so "
    "the assistant can continue it with less context. Keep what later messages may refer to: "
    "the user's goals, preferences and constraints, questions asked and the answers given "
    "(facts, figures, names, ids of artifacts), decisions and open points. Never invent "
    "anything. Answer with the summary only."
)
KEEP_SHARE = 0.5  # the verbatim turns kept after condensing may use half the history budget
REQUEST_SHARE = 0.75

Summarize = Callable[[list[ChatMessage]], Awaitable[str]]


def message_turns(message: Mapping[str, Any]) -> list[list[str]]:
    """A stored message as the lead sees it: the user's text and the final answer."""
    answer = message.get("response") or f"(no answer: the run ended {message.get('status')})"
    return [["user", str(message.get("content") or "")], ["assistant", str(answer)]]


def summary_turn(text: str, covers: int) -> list[str]:
    header = HISTORY_HEADER.format(covers=covers, s="" if covers == 1 else "s")
    return ["system", f"{header}\n{text.strip()}"]


def turns_tokens(turns: Sequence[Sequence[str]], counter: TokenCounter | None = None) -> int:
    raw = messages_tokens({"role": r, "content": c} for r, c in turns)
    return counter.scale(raw) if counter is not None else raw


@dataclass
class HistoryPlan:
    """What the lead's history will be. `fold` is empty when no new summary is needed."""

    turns: list[list[str]]  # the history as it stands (stored summary + verbatim turns)
    fold: list[Mapping[str, Any]] = field(default_factory=list)  # messages to condense now
    previous: str | None = None  # the stored summary text the new one extends
    keep_from: int = 0  # path index of the first message kept verbatim after condensing
    tokens: int = 0


def plan_history(
    path: Sequence[Mapping[str, Any]],
    stored: Mapping[str, Any] | None,
    *,
    budget: int,
    keep_recent: int,
    summary_tokens: int,
    counter: TokenCounter | None = None,
) -> HistoryPlan:
    """Decide from the path (root → parent messages) and the deepest stored summary on it."""
    ids = [m["id"] for m in path]
    start, previous = 0, None
    if stored is not None and stored.get("message_id") in ids:
        start, previous = ids.index(stored["message_id"]) + 1, str(stored["summary"])
    turns = [summary_turn(previous, start)] if previous is not None else []
    for message in path[start:]:
        turns += message_turns(message)
    tokens = turns_tokens(turns, counter)
    if tokens <= budget:
        return HistoryPlan(turns=turns, previous=previous, keep_from=start, tokens=tokens)
    final = next((i for i, m in enumerate(path) if m.get("status") not in FINAL_STATUSES), len(path))
    keep_from = max(start, len(path) - keep_recent)
    while keep_from < len(path):
        kept = [t for m in path[keep_from:] for t in message_turns(m)]
        if turns_tokens(kept, counter) + summary_tokens <= budget * KEEP_SHARE:
            break
        keep_from += 1
    keep_from = min(keep_from, final)
    if keep_from <= start:
        return HistoryPlan(turns=turns, previous=previous, keep_from=start, tokens=tokens)
    return HistoryPlan(
        turns=turns, fold=list(path[start:keep_from]), previous=previous, keep_from=keep_from, tokens=tokens
    )


def history_request(
    previous: str | None, fold: Sequence[Mapping[str, Any]], *, max_tokens: int, window: int
) -> list[ChatMessage]:
    """The one summary call: the previous summary and the messages to fold in, sized to fit."""
    available = int(window * REQUEST_SHARE) - max_tokens - text_tokens(HISTORY_SYSTEM) - 64
    parts = []
    if previous:
        parts.append(f"Summary so far:\n{clip_to_tokens(previous, max(64, available // 3))}")
    lines = []
    for message in fold:
        (_, question), (_, answer) = message_turns(message)
        lines.append(f"User: {question}\n\nAssistant: {answer}")
    per_message = max(64, (available - sum(text_tokens(p) for p in parts)) // max(1, len(lines)))
    parts.append("Messages to add, oldest first:\n\n" + "\n\n".join(clip_to_tokens(x, per_message) for x in lines))
    words = max(50, int(max_tokens * 0.7))
    return [
        {"role": "system", "content": HISTORY_SYSTEM},
        {"role": "user", "content": "\n\n".join(parts) + f"\n\nWrite the summary now, at most about {words} words."},
    ]


async def conversation_history(
    path: Sequence[Mapping[str, Any]],
    *,
    summaries: Any,
    summarize: Summarize,
    budget: int,
    keep_recent: int,
    summary_tokens: int,
    window: int,
    model: str | None = None,
    counter: TokenCounter | None = None,
) -> tuple[list[list[str]], dict[str, Any] | None]:
    """The history turns for a new message whose parent path is `path`, condensing (one
    model call, stored) when it is over `budget`. Returns the turns and, when a summary was
    made, the data of a `history_compacted` event. `summaries` is a `HistorySummaries`."""
    if not path:
        return [], None
    stored = await summaries.latest_on_path([m["id"] for m in path])
    plan = plan_history(
        path, stored, budget=budget, keep_recent=keep_recent, summary_tokens=summary_tokens, counter=counter
    )
    if not plan.fold:
        return plan.turns, None
    request = history_request(plan.previous, plan.fold, max_tokens=summary_tokens, window=window)
    text = (await summarize(request) or "").strip()
    if not text:
        return plan.turns, None  # nothing usable came back: send the history as it is
    text = clip_to_tokens(text, summary_tokens)
    covered = path[plan.keep_from - 1]
    await summaries.put(
        conversation_id=str(covered["conversation_id"]),
        message_id=str(covered["id"]),
        covers=plan.keep_from,
        summary=text,
        model=model,
    )
    turns = [summary_turn(text, plan.keep_from)]
    for message in path[plan.keep_from :]:
        turns += message_turns(message)
    event = {
        "covers": plan.keep_from,
        "message_id": covered["id"],
        "tokens_before": plan.tokens,
        "tokens_after": turns_tokens(turns, counter),
    }
    return turns, event
