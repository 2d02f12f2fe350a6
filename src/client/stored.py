"""`Reader`: the stored data without the run engine, and the read halves of the facade's nouns.

`Client.open` builds the whole engine (agents, tools, models, the compiled graph, the
checkpoint saver, workers), which costs seconds of imports before the first row is read.
`Reader.open` opens the app store alone, so a process that only reads (a listing command, a
dashboard) never imports LangGraph or the model client. The nouns here are the ones `Client`
extends (`nouns.py`), so a reader and a client answer a read the same way.
"""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.conversations import ConversationManager
from ..core.run.data import StoredReads
from ..settings import Settings, load_settings

if TYPE_CHECKING:
    from ..artifacts.records import ArtifactSummary, ArtifactView, VersionSummary
    from ..core.conversations import ConversationTree
    from ..core.store.repository import AppStore
    from ..core.store.rows import ConversationRow, LineageRow, MessageRow, WorkflowRunSummary
    from ..core.store.thread_reads import BranchPage
    from ..events.envelope import Event


class StoredView:
    def __init__(self, data: StoredReads) -> None:
        self._data = data


class StoredRuns(StoredView):
    """Runs as stored: their events and the paused ones."""

    async def events(self, message_id: str, after_event_id: int | None = None) -> list[Event]:
        """The message's stored events after `after_event_id` (no waiting)."""
        return await self._data.events(message_id, after_event_id)

    async def last_event_id(self, message_id: str) -> int:
        """The id of the message's last stored event (0 when none)."""
        return await self._data.last_event_id(message_id)

    async def pending(self) -> list[MessageRow]:
        """Messages paused for a permission decision."""
        return await self._data.pending()


class StoredConversations(StoredView):
    """Conversations and their message trees."""

    async def list(
        self, *, user_id: str | None = None, limit: int = 20, offset: int = 0, project: str | None = None
    ) -> builtins.list[ConversationRow]:
        """Conversations, most recently active first (only `project`'s when given)."""
        return await self._data.list_conversations(user_id=user_id, limit=limit, offset=offset, project=project)

    async def count(self, *, user_id: str | None = None, project: str | None = None) -> int:
        return await self._data.count_conversations(user_id=user_id, project=project)

    async def get(self, conversation_id: str, *, user_id: str | None = None) -> ConversationRow:
        """The conversation record (`NotFoundError` if missing)."""
        return await self._data.get_conversation(conversation_id, user_id=user_id)

    async def tree(self, conversation_id: str, *, user_id: str | None = None) -> ConversationTree:
        """The conversation with its messages as a tree; `active` marks the current branch."""
        return await self._data.conversation_tree(conversation_id, user_id=user_id)

    async def branch(
        self, conversation_id: str, *, limit: int = 20, before: str | None = None,
        user_id: str | None = None,
    ) -> BranchPage:
        """A page of the active branch, newest first (`page.messages`), read in O(page) however
        long the conversation is; pass `page.before` for the next, older page (None at the
        root). `NotFoundError` if missing; `ValueError` for a bad `limit` or `before`."""
        return await self._data.conversation_branch(
            conversation_id, limit=limit, before=before, user_id=user_id
        )

    async def messages(
        self, conversation_id: str, *, user_id: str | None = None
    ) -> builtins.list[MessageRow]:
        """Every message of the conversation, oldest first."""
        return await self._data.list_messages(conversation_id, user_id=user_id)

    async def message(self, message_id: str, *, user_id: str | None = None) -> MessageRow:
        """One message record (`NotFoundError` if missing)."""
        return await self._data.get_message(message_id, user_id=user_id)


class Artifacts(StoredView):
    """A conversation's versioned artifacts (read side)."""

    async def list(self, conversation_id: str) -> builtins.list[ArtifactSummary]:
        return await self._data.list_artifacts(conversation_id)

    async def get(
        self, conversation_id: str, artifact_id: str, version: int | None = None
    ) -> ArtifactView:
        return await self._data.get_artifact(conversation_id, artifact_id, version)

    async def versions(
        self, conversation_id: str, artifact_id: str
    ) -> builtins.list[VersionSummary]:
        return await self._data.artifact_versions(conversation_id, artifact_id)

    async def diff(
        self,
        conversation_id: str,
        artifact_id: str,
        from_version: int,
        to_version: int | None = None,
    ) -> str:
        return await self._data.artifact_diff(
            conversation_id, artifact_id, from_version, to_version
        )

    async def export(
        self, conversation_id: str, artifact_id: str, version: int | None = None
    ) -> str:
        """The artifact as a standalone Markdown document."""
        return await self._data.export_artifact(conversation_id, artifact_id, version)

    async def export_to(
        self, path: str | Path, conversation_id: str, artifact_id: str, version: int | None = None
    ) -> Path:
        return await self._data.export_artifact_to(path, conversation_id, artifact_id, version)


class StoredWorkflows(StoredView):
    """Workflow runs as stored (listing and starting workflows needs a `Client`)."""

    async def runs(
        self,
        name: str | None = None,
        *,
        user_id: str | None = None,
        limit: int = 20,
        offset: int = 0,
    ) -> builtins.list[WorkflowRunSummary]:
        """Workflow runs, newest first, with their message's status."""
        return await self._data.store.list_workflow_runs(
            name, user_id=user_id, limit=limit, offset=offset
        )

    async def lineage(self, message_id: str) -> builtins.list[LineageRow]:
        """A workflow run's node executions with their parents, inputs and outputs."""
        return await self._data.lineage(message_id)


class Reader:
    """Read-only access to stored conversations, messages, events, artifacts and workflow runs.

    ```python
    async with await Reader.open() as reader:
        rows = await reader.conversations.list()
    ```
    Opens the app store only (no agents, tools, models, checkpoints or workers): nothing runs,
    nothing is recovered. Use `Client.open` to start, resume or cancel runs.
    """

    def __init__(self, store: AppStore, settings: Settings) -> None:
        self._store = store
        self.settings = settings
        data = StoredReads(store, ConversationManager(store))
        self.runs = StoredRuns(data)
        self.conversations = StoredConversations(data)
        self.artifacts = Artifacts(data)
        self.workflows = StoredWorkflows(data)

    @classmethod
    async def open(cls, settings: Settings | None = None, **overrides: Any) -> Reader:
        """Open the app store that `settings` (default: `load_settings(**overrides)`) name."""
        from ..core.store.repository import AppStore  # SQLAlchemy: only once a store opens

        settings = settings or load_settings(**overrides)
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        store = await AppStore.open(
            settings.database_url,
            sqlite_path=settings.app_db_path,
            pool_size=settings.database_pool_size,
            synchronous_commit=settings.database_synchronous_commit,
        )
        return cls(store, settings)

    async def aclose(self) -> None:
        await self._store.close()

    async def __aenter__(self) -> Reader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
