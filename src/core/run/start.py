"""Starting a new message: check it, store it, build its initial state, launch its run.

Nothing is stored when a check fails (empty content, missing credentials, an unknown parent,
a `before_run` hook refusing); the conversation is created after `before_run`, so a failing
hook leaves nothing behind.
"""

from __future__ import annotations

import uuid
from typing import Any

import sqlalchemy.exc

from ...errors import NotFoundError, ResumeConflictError, UserError
from ...events.envelope import Emitted
from ...events.payloads import MetadataData
from ...hooks import runs as hook_runs
from ...settings.projects import project_name_problem
from ..context import Services
from ..conversations import ConversationManager
from ..state import create_initial_state
from ..store.conversation_records import new_conversation
from .history import history_for
from .launch import launch
from .limits import preflight
from .runtime import Runtime
from .segment import FirstEvents


async def start_message(
    rt: Runtime,
    conversations: ConversationManager,
    content: str,
    conversation_id: str | None,
    parent_message_id: Any,
    *,
    user_id: str | None,
    project: str | None = None,
    services: Services | None = None,
    message_id: str | None = None,
) -> dict[str, Any]:
    """Store the user message, build the initial state, and launch its run.

    `project`: the project a new conversation belongs to (default: the `project` setting,
    `ARTIFACTFLOW_PROJECT`); an existing conversation keeps its own, and naming another one
    is a `UserError`. `services`: the run's own (an agent configuration over the process's,
    `Runtime.services_for`); None: the process's. `message_id`: the message's id (default: a
    new one); taken already, the start is refused (`ResumeConflictError`), nothing stored."""
    if project is not None and (problem := project_name_problem(project)):
        raise UserError(problem)
    if not isinstance(content, str) or not content.strip():
        raise UserError("content must be a non-empty string")
    if "\x00" in content:  # as the HTTP API: PostgreSQL cannot store it
        raise UserError("content must not contain NUL (U+0000), which cannot be stored")
    for agent in rt.services.agents.values():  # missing credentials fail before anything is stored
        rt.services.models.resolve(agent.model)
    preflight(rt.services)  # summary model credentials; prices when a cost budget is set
    if conversation_id is None and isinstance(parent_message_id, str):
        parent = await rt.store.get_message(parent_message_id)
        if parent is None:
            raise NotFoundError(f"parent message {parent_message_id} not found")
        conversation_id = parent["conversation_id"]  # a fork names its parent only
    conversation = None if conversation_id is None else await conversations.get(conversation_id, user_id=user_id)
    if conversation is not None and project is not None and conversation.get("project") != project:
        raise UserError(
            f"conversation {conversation['id']} belongs to project "
            f"{conversation.get('project') or '(none)'}, not {project}; "
            "leave the project out to continue it, or start a new conversation"
        )
    conversation_id = conversation["id"] if conversation else uuid.uuid4().hex
    if message_id is not None and await rt.store.get_message(message_id) is not None:
        raise ResumeConflictError(f"message {message_id} exists already: it was started before")
    run_token, message_id = uuid.uuid4().hex, message_id or uuid.uuid4().hex
    if rt.services.hooks.wants("before_run"):  # the original content is never stored
        stub = {"id": message_id, "conversation_id": conversation_id}
        run = hook_runs.run_info(stub, rt.services.lead.name, content=content, user_id=user_id)
        content = await rt.services.hooks.before_run(run, content)
    new = conversation is None
    if conversation is None:  # created after before_run: a failing hook leaves nothing behind
        # A new id of ours: no need to look for an existing conversation first. Stored with
        # the message, in one transaction.
        conversation = new_conversation(
            conversation_id, user_id=user_id, project=project or rt.services.settings.project
        )
    try:
        message = await conversations.add_message(
            conversation["id"],
            content,
            parent_id=parent_message_id,
            conversation=conversation,  # just read or made: not read again
            new=new,
            run_token=run_token,
            lease_expires_at=rt.lease(),
            message_id=message_id,
        )
    except sqlalchemy.exc.IntegrityError:  # the same id started at the same moment elsewhere
        if await rt.store.get_message(message_id) is None:
            raise
        raise ResumeConflictError(f"message {message_id} exists already: it was started before") from None
    history, compacted = await history_for(rt.services, conversations, message["parent_id"])
    state = create_initial_state(content, conversation_history=history)
    metadata = MetadataData(
        parent_message_id=message["parent_id"],
        content=content,
        lead_agent=rt.services.lead.name,
    )
    info = hook_runs.run_info(message, rt.services.lead.name, user_id=user_id)
    first: FirstEvents = [Emitted(metadata), *([compacted] if compacted else [])]
    launch(rt, message, run_token, state, first_events=first, info=info, fresh=True, services=services)
    return {
        "conversation_id": conversation["id"],
        "message_id": message["id"],
        "thread_id": message["thread_id"],
    }
