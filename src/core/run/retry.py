"""Running a failed or cancelled message again.

A retry is a new message, never a rewrite of the old one: same conversation, same parent,
same content, so it becomes a sibling on the same branch (and the active tip), while the
failed attempt keeps its error and event log for inspection. Only a final, unsuccessful
message is retried; a completed, paused or running one is a conflict with a message that says
what to do instead.
"""

from __future__ import annotations

from typing import Any

from ...errors import NotFoundError, ResumeConflictError
from ..context import Services
from ..conversations import ConversationManager
from .resume import running_detail
from .runtime import Runtime
from .start import start_message

RETRYABLE = ("failed", "cancelled")
_REFUSED = {
    "completed": "it has completed; send a new message (or branch from its parent) to ask again",
    "waiting": "it is waiting for a decision; answer it with resume, or cancel it first",
}


async def retry(
    rt: Runtime, conversations: ConversationManager, message_id: str, *, user_id: str | None,
    services: Services | None = None,
) -> dict[str, Any]:
    """Start a sibling of `message_id` with its content; returns the new ids (as `start`).
    `services`: the run's own (the original's agent configuration, `start_message`)."""
    message = await rt.message(message_id)
    try:
        await conversations.get(message["conversation_id"], user_id=user_id)
    except NotFoundError:  # another user's message: exactly like a missing one
        raise NotFoundError(f"message {message_id} not found") from None
    status = message["status"]
    if status not in RETRYABLE:
        if status == "running":
            reason = running_detail(rt, message, after="; if that process died, resume recovers it")
            if rt.lease_expired(message):
                reason += "; resume recovers it from its last checkpoint"
        else:
            reason = _REFUSED.get(status, f"its status is {status}")
        raise ResumeConflictError(
            f"message {message_id} cannot be retried (only a failed or cancelled message can "
            f"be): {reason}",
            message_id=message_id,
        )
    return await start_message(
        rt,
        conversations,
        message["content"],
        message["conversation_id"],
        message["parent_id"],
        user_id=user_id,
        services=services,
    )
