"""Stored data, as the interfaces need it: conversations and their message trees, messages,
event-log positions, API tokens, artifacts, and deleting a conversation.

The public facade (`client.conversations`, `client.artifacts`, ...) reads through one
`StoredData`, so the HTTP and CLI layers never ask the store or the checkpointer. `user_id` (where taken) restricts a lookup to that user's
resources: another user's conversation answers `NotFoundError` exactly like a missing one.

`StoredReads` needs only the app store, so a caller that only reads (`artifactflow.Reader`, the
CLI's listing commands) never imports the graph, LangGraph or the model client; `StoredData`
adds deleting, which must stop runs and drop checkpoints.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import NotFoundError

if TYPE_CHECKING:
    from ...artifacts.records import ArtifactSummary, ArtifactView, VersionSummary
    from ...events.envelope import Event
    from ..conversations import ConversationManager, ConversationTree
    from ..store.repository import AppStore
    from ..store.rows import ConversationRow, LineageRow, MessageRow
    from ..store.thread_reads import BranchPage
    from .runtime import Runtime


class StoredReads:
    """Read what runs leave behind, from the app store alone."""

    def __init__(self, store: AppStore, conversations: ConversationManager) -> None:
        self.store = store
        self.conversations = conversations

    # --- conversations ---------------------------------------------------------------------

    async def get_conversation(self, conversation_id: str, *, user_id: str | None = None) -> ConversationRow:
        """The conversation record (`NotFoundError` if missing or not `user_id`'s)."""
        return await self.conversations.get(conversation_id, user_id=user_id)

    async def list_conversations(
        self, *, user_id: str | None = None, limit: int = 20, offset: int = 0, project: str | None = None
    ) -> list[ConversationRow]:
        """Conversations, most recently active first (only `user_id`'s, only `project`'s when given)."""
        return await self.conversations.list_conversations(
            user_id=user_id, limit=limit, offset=offset, project=project
        )

    async def count_conversations(self, *, user_id: str | None = None, project: str | None = None) -> int:
        return await self.store.count_conversations(user_id=user_id, project=project)

    async def conversation_tree(self, conversation_id: str, *, user_id: str | None = None) -> ConversationTree:
        """The conversation with its messages as a tree; `active` marks the current branch."""
        await self.get_conversation(conversation_id, user_id=user_id)
        return await self.conversations.tree(conversation_id)

    async def conversation_branch(
        self, conversation_id: str, *, limit: int = 20, before: str | None = None,
        user_id: str | None = None,
    ) -> BranchPage:
        """A page of the active branch, newest first, in O(page) whatever the conversation's
        length (`store/thread_reads.py`); `before`: the `before` of the previous page.
        `NotFoundError` if the conversation is missing or not `user_id`'s; `ValueError` for a
        bad `limit` or `before`."""
        from ..store.thread_reads import branch_page

        await self.get_conversation(conversation_id, user_id=user_id)
        page = await branch_page(self.store, conversation_id, limit=limit, before=before)
        if page is None:
            raise NotFoundError(f"conversation {conversation_id} not found")
        return page

    # --- messages and tokens ---------------------------------------------------------------

    async def list_messages(self, conversation_id: str, *, user_id: str | None = None) -> list[MessageRow]:
        """Every message of the conversation, oldest first."""
        await self.get_conversation(conversation_id, user_id=user_id)
        return await self.store.list_messages(conversation_id)

    async def get_message(self, message_id: str, *, user_id: str | None = None) -> MessageRow:
        """The message record (`NotFoundError` if missing or not in one of `user_id`'s
        conversations)."""
        message = await self.store.get_message(message_id)
        if message is not None and user_id is not None:
            conversation = await self.store.get_conversation(message["conversation_id"])
            if conversation is None or conversation["user_id"] != user_id:
                message = None
        if message is None:
            raise NotFoundError(f"message {message_id} not found")
        return message

    async def last_event_id(self, message_id: str) -> int:
        """The id of the message's last stored event (0 when none)."""
        return await self.store.last_event_id(message_id)

    async def events(self, message_id: str, after_event_id: int | None = None) -> list[Event]:
        """The message's stored events after `after_event_id` (`NotFoundError` if missing)."""
        from .eventlog import stored_event  # the event classes (pydantic): only for this read

        message = await self.get_message(message_id)
        return [stored_event(message, row) for row in await self.store.events(message_id, after_event_id)]

    async def lineage(self, message_id: str) -> list[LineageRow]:
        """A workflow run's node executions (`NotFoundError` for an unknown message)."""
        await self.get_message(message_id)
        return await self.store.lineage(message_id)

    async def pending(self) -> list[MessageRow]:
        """Messages paused for a permission decision."""
        return await self.store.messages_with_status(["waiting"])

    async def create_token(self, user_name: str) -> tuple[str, str]:
        """Create (or reuse) the user and a new API token; returns (user_id, token). Only the
        token's hash is stored."""
        return await self.store.create_token(user_name)

    async def user_for_token(self, token: str) -> str | None:
        """The user a token belongs to (None for an unknown or revoked token)."""
        return await self.store.user_for_token(token)

    # --- artifacts (read side) ---------------------------------------------------------------

    def _artifacts(self) -> Any:
        from ...artifacts import ArtifactService

        return ArtifactService(self.store)

    # Each first checks the conversation, so an unknown one is `NotFoundError`, never an empty
    # list (the artifact service itself serves tools, whose conversation always exists).

    async def list_artifacts(self, conversation_id: str) -> list[ArtifactSummary]:
        """Summaries (no content) of the conversation's artifacts."""
        await self.get_conversation(conversation_id)
        return await self._artifacts().list(conversation_id)

    async def get_artifact(
        self, conversation_id: str, artifact_id: str, version: int | None = None
    ) -> ArtifactView:
        """One artifact with content, at its current version or at `version`."""
        await self.get_conversation(conversation_id)
        return await self._artifacts().get(conversation_id, artifact_id, version)

    async def artifact_versions(self, conversation_id: str, artifact_id: str) -> list[VersionSummary]:
        """The artifact's version history, oldest first (no content)."""
        await self.get_conversation(conversation_id)
        return await self._artifacts().versions(conversation_id, artifact_id)

    async def artifact_diff(
        self, conversation_id: str, artifact_id: str, from_version: int, to_version: int | None = None
    ) -> str:
        """Unified diff between two versions (`to_version` default: the current one)."""
        await self.get_conversation(conversation_id)
        return await self._artifacts().diff(conversation_id, artifact_id, from_version, to_version)

    async def export_artifact(
        self, conversation_id: str, artifact_id: str, version: int | None = None
    ) -> str:
        """The artifact as a standalone Markdown document."""
        await self.get_conversation(conversation_id)
        return await self._artifacts().export_markdown(conversation_id, artifact_id, version)

    async def export_artifact_to(
        self, path: str | Path, conversation_id: str, artifact_id: str, version: int | None = None
    ) -> Path:
        """Write `export_artifact` to `path` (parent folders are created); returns the path."""
        await self.get_conversation(conversation_id)
        return await self._artifacts().export_to(path, conversation_id, artifact_id, version)


class StoredData(StoredReads):
    """Read and delete what runs leave behind (deleting stops runs and drops checkpoints)."""

    def __init__(self, rt: Runtime, conversations: ConversationManager) -> None:
        super().__init__(rt.store, conversations)
        self._rt = rt
        self.checkpoints = rt.checkpoints

    async def delete_conversation(self, conversation_id: str, *, user_id: str | None = None) -> None:
        """Delete a conversation: cancel its runs (here, or on the worker that owns them),
        drop its threads' checkpoints, then its rows (messages, events, artifacts, approvals).

        Checkpoints go first: should the row delete fail, the messages still exist and gc
        can find them; the other way round would orphan checkpoints nothing points to."""
        from . import cancel as run_cancel  # the run engine: imported only by what deletes

        await self.get_conversation(conversation_id, user_id=user_id)
        messages = await self.store.list_messages(conversation_id)
        for message in messages:
            if message["status"] == "running":  # here or on another worker: it stops first
                await run_cancel.cancel(self._rt, message["id"])
        for message in messages:
            await self.checkpoints.delete_thread(message["thread_id"])
        await self.conversations.delete(conversation_id)
