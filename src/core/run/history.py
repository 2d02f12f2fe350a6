"""The conversation history a new message's lead sees, kept inside its context window.

`window.conversation_history` does the deciding: the path root → parent verbatim while it
fits `context.history_share` of the lead's compaction threshold; above that the older
messages are condensed with one summary call, stored (`HistorySummaries`) and reused by every
later message whose path passes through them. This module supplies the settings, the summary
model (through the Model seam) and the `context_compacted` event (scope "history") that goes
into the new message's log, so its metrics and budgets count the summary call.

A failure here never stops a message from starting: a summary call that fails leaves the
history as it was (the lead's own compaction check then reports a history that is too large).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ...events.envelope import Emitted
from ...events.payloads import ContextCompactedData
from ...shapes import ChatMessage, Role
from ..agent_window import Summarizer, compaction_config
from ..state import LEAD
from ..window import HistorySummaries, conversation_history
from ..window.history import message_turns

if TYPE_CHECKING:
    from ..context import Services
    from ..conversations import ConversationManager

log = logging.getLogger("artifactflow")

Turns = list[ChatMessage]
Compacted = Emitted


_ROLES: dict[str, Role] = {"system": "system", "user": "user", "assistant": "assistant"}


def _turn(role: str, content: str) -> ChatMessage:
    """One turn of the history as a chat message: `message_turns` gives user and assistant
    turns, `summary_turn` the system turn that stands for the folded messages."""
    return {"role": _ROLES[role], "content": content}


async def history_for(
    services: Services, conversations: ConversationManager, parent_id: str | None
) -> tuple[Turns, Compacted | None]:
    """The history turns (`{"role", "content"}`) for a message after `parent_id`, and the
    `context_compacted` event to emit when a new summary was made."""
    path = await conversations.path_to(parent_id)
    plain = [_turn(r, c) for m in path for r, c in message_turns(m)]
    settings = services.settings.context
    if not path or not settings.compaction:
        return plain, None
    lead = services.lead
    try:
        config = compaction_config(services, lead, services.resolve(lead.model))
        summarizer = Summarizer(services, lead.name, lead.model)
        summarizer.max_output_tokens = config.summary_tokens
        turns, event = await conversation_history(
            path,
            summaries=HistorySummaries(services.store),
            summarize=summarizer,
            budget=int(config.threshold * settings.history_share),
            keep_recent=settings.keep_recent_messages,
            summary_tokens=config.summary_tokens,
            window=summarizer.window,
            model=summarizer.target.model,
        )
    except Exception:  # the history as it is beats a message that cannot start
        log.exception("could not condense the conversation history; sending it in full")
        return plain, None
    history = [_turn(r, c) for r, c in turns]
    if event is None:
        return history, None
    data = ContextCompactedData(
        invocation=LEAD,
        scope="history",
        tokens_before=event["tokens_before"],
        tokens_after=event["tokens_after"],
        messages_summarized=event["covers"],
        **summarizer.event_data(),
    )
    return history, Emitted(data, lead.name)
