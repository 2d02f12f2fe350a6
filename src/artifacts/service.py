"""`ArtifactService`: every rule about artifacts, over a store that only persists them.

Write path. A change reads the artifact, computes the new content, and writes it with
`expected_version` set to the version it read. The store's conditional UPDATE lets exactly one
of two racing writers through; the other gets `StaleArtifactError` and nothing is written. There
is no retry: the loser's change was computed on text that no longer exists, so its author
(usually the model) must read again and redo it.

Version rules. `create` writes version 1 (change "create"). `replace` and `rewrite` write the
next version (change "update" / "rewrite"); a rewrite that changes neither content nor title
writes nothing and reports change "none". Every version is kept with its title, change, agent
and message id; the artifact row always mirrors the newest.

Read path: `list` (summaries), `get` (current or any version), `versions`, `diff` and the
Markdown export. A lookup of something missing raises `ArtifactNotFoundError` naming what does
exist.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import ArtifactConflictError
from .edit import Replacement, replace_once
from .errors import ArtifactExistsError, ArtifactNotFoundError, StaleArtifactError
from .records import ArtifactSummary, ArtifactView, VersionSummary
from .render import markdown_document, unified_diff
from .rules import DEFAULT_CONTENT_TYPE, check_id, check_title, normalize_content_type

ChangeKind = Literal["create", "update", "rewrite", "none"]
"""How a version came about, as stored with it ("none": a rewrite that changed nothing)."""


@dataclass(frozen=True)
class ArtifactChange:
    """What a write did: the artifact after it, and for `replace` where the edit landed."""

    artifact_id: str
    title: str
    content_type: str
    version: int
    previous_version: int | None  # None after a create
    change: ChangeKind
    size: int  # characters of content
    edit: Replacement | None = None


class ArtifactService:
    """Create, edit, version, diff and read a conversation's artifacts on an `AppStore`."""

    def __init__(self, store: Any) -> None:
        self.store = store

    # --- write path ------------------------------------------------------------------------

    async def create(
        self,
        conversation_id: str,
        artifact_id: str,
        *,
        title: str,
        content: str,
        content_type: str = DEFAULT_CONTENT_TYPE,
        agent: str | None = None,
        message_id: str | None = None,
    ) -> ArtifactChange:
        """Version 1 of a new artifact. `ArtifactExistsError` if the id is taken."""
        check_id(artifact_id)
        title = check_title(title)
        content_type = normalize_content_type(content_type)
        try:
            await self.store.create_artifact(
                conversation_id,
                artifact_id,
                title=title,
                content=content,
                content_type=content_type,
                agent=agent,
                message_id=message_id,
            )
        except ArtifactConflictError:
            existing = await self.store.get_artifact(conversation_id, artifact_id)
            now = (
                f" (now at version {existing['version']}, titled {existing['title']!r})"
                if existing
                else ""
            )
            raise ArtifactExistsError(
                f"an artifact with id '{artifact_id}' already exists in this conversation{now}. "
                "Use update_artifact to change part of it, rewrite_artifact to replace all of "
                "it, or choose a different id.",
                artifact_id=artifact_id,
                exists=True,
            ) from None
        return ArtifactChange(
            artifact_id=artifact_id,
            title=title,
            content_type=content_type,
            version=1,
            previous_version=None,
            change="create",
            size=len(content),
        )

    async def replace(
        self,
        conversation_id: str,
        artifact_id: str,
        old: str,
        new: str,
        *,
        agent: str | None = None,
        message_id: str | None = None,
    ) -> ArtifactChange:
        """Replace the one passage `old` stands for (exactly, else approximately; see `edit`)."""
        row = await self._current(conversation_id, check_id(artifact_id))
        edit = replace_once(
            row["content"], old, new, artifact_id=artifact_id, version=row["version"]
        )
        return await self._write(
            conversation_id,
            row,
            edit.content,
            "update",
            agent=agent,
            message_id=message_id,
            edit=edit,
        )

    async def rewrite(
        self,
        conversation_id: str,
        artifact_id: str,
        content: str,
        *,
        title: str | None = None,
        agent: str | None = None,
        message_id: str | None = None,
    ) -> ArtifactChange:
        """Replace the whole content (and the title when given)."""
        row = await self._current(conversation_id, check_id(artifact_id))
        if title is not None:
            title = check_title(title)
        if content == row["content"] and (title is None or title == row["title"]):
            return ArtifactChange(
                artifact_id=artifact_id,
                title=row["title"],
                content_type=row["content_type"],
                version=row["version"],
                previous_version=row["version"],
                change="none",
                size=len(content),
            )
        return await self._write(
            conversation_id,
            row,
            content,
            "rewrite",
            title=title,
            agent=agent,
            message_id=message_id,
        )

    async def _write(
        self,
        conversation_id: str,
        row: Mapping[str, Any],
        content: str,
        change: ChangeKind,
        *,
        title: str | None = None,
        agent: str | None,
        message_id: str | None,
        edit: Replacement | None = None,
    ) -> ArtifactChange:
        """Write `content` as the version after the one in `row` (the optimistic lock)."""
        artifact_id, seen = row["artifact_id"], row["version"]
        try:
            version = await self.store.write_artifact_version(
                conversation_id,
                artifact_id,
                expected_version=seen,
                content=content,
                change=change,
                title=title,
                agent=agent,
                message_id=message_id,
            )
        except ArtifactConflictError:
            raise StaleArtifactError(
                f"artifact '{artifact_id}' was changed by another writer while this {change} ran "
                f"(it is no longer at version {seen}); nothing was written. Read it again with "
                "read_artifact and redo the change on the current text.",
                artifact_id=artifact_id,
                conflict=True,
                expected_version=seen,
            ) from None
        return ArtifactChange(
            artifact_id=artifact_id,
            title=title if title is not None else row["title"],
            content_type=row["content_type"],
            version=version,
            previous_version=seen,
            change=change,
            size=len(content),
            edit=edit,
        )

    # --- read path -------------------------------------------------------------------------

    async def list(self, conversation_id: str) -> list[ArtifactSummary]:
        """Summaries (no content): artifact_id, title, content_type, version, size, timestamps."""
        rows = await self.store.list_artifacts(conversation_id)
        return [
            {
                "artifact_id": row["artifact_id"],
                "title": row["title"],
                "content_type": row["content_type"],
                "version": row["version"],
                "size": len(row["content"]),
                "created_at": row["created_at"],
                "updated_at": row["updated_at"],
            }
            for row in rows
        ]

    async def _current(self, conversation_id: str, artifact_id: str) -> Mapping[str, Any]:
        """The artifact's row (`ArtifactNotFoundError`, naming the ids there are, if none)."""
        row = await self.store.get_artifact(conversation_id, artifact_id)
        if row is None:
            rows = await self.store.list_artifacts(conversation_id)
            known = (
                "available ids: " + ", ".join(f"'{r['artifact_id']}'" for r in rows)
                if rows
                else "it has no artifacts yet (create one with create_artifact)"
            )
            raise ArtifactNotFoundError(
                f"no artifact '{artifact_id}' in conversation '{conversation_id}'; {known}",
                artifact_id=artifact_id,
            )
        return row

    async def get(
        self, conversation_id: str, artifact_id: str, version: int | None = None
    ) -> ArtifactView:
        """One artifact at its current version or at `version`, with content.

        Keys: artifact_id, conversation_id, title, content_type, content, version,
        current_version, size, created_at, updated_at (of that version), and for a stored
        version also change, agent and message_id.
        """
        row = await self._current(conversation_id, artifact_id)
        current = row["version"]
        result: ArtifactView = {
            "artifact_id": artifact_id,
            "conversation_id": conversation_id,
            "title": row["title"],
            "content_type": row["content_type"],
            "content": row["content"],
            "version": current,
            "current_version": current,
            "size": len(row["content"]),
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
        }
        if version is None:
            return result
        stored = await self.store.get_artifact_version(conversation_id, artifact_id, version)
        if stored is None:
            raise ArtifactNotFoundError(
                f"artifact '{artifact_id}' has no version {version}; versions 1 to {current} "
                f"exist (the current one is {current})",
                artifact_id=artifact_id,
                current_version=current,
            )
        result.update(
            title=stored["title"],
            content=stored["content"],
            version=stored["version"],
            size=len(stored["content"]),
            updated_at=stored["created_at"],
            change=stored["change"],
            agent=stored["agent"],
            message_id=stored["message_id"],
        )
        return result

    async def versions(self, conversation_id: str, artifact_id: str) -> list[VersionSummary]:
        """The version history, oldest first (no content): version, title, change, agent,
        message_id, size, created_at."""
        await self._current(conversation_id, artifact_id)
        rows = await self.store.artifact_versions(conversation_id, artifact_id)
        return [
            {
                "version": r["version"],
                "title": r["title"],
                "change": r["change"],
                "agent": r["agent"],
                "message_id": r["message_id"],
                "size": len(r["content"]),
                "created_at": r["created_at"],
            }
            for r in rows
        ]

    async def diff(
        self,
        conversation_id: str,
        artifact_id: str,
        from_version: int,
        to_version: int | None = None,
        *,
        context: int = 3,
    ) -> str:
        """Unified diff from `from_version` to `to_version` (default: current), with the file
        labels `artifact_id@vN`. Empty string when the contents are equal."""
        old = await self.get(conversation_id, artifact_id, from_version)
        new = await self.get(conversation_id, artifact_id, to_version)
        return unified_diff(
            old["content"],
            new["content"],
            context=context,
            from_label=f"{artifact_id}@v{old['version']}",
            to_label=f"{artifact_id}@v{new['version']}",
        )

    async def export_markdown(
        self, conversation_id: str, artifact_id: str, version: int | None = None
    ) -> str:
        """A standalone Markdown document: `# title`, one metadata line, then the content
        (in a code fence unless the content type is Markdown)."""
        return markdown_document(await self.get(conversation_id, artifact_id, version))

    async def export_to(
        self,
        path: str | Path,
        conversation_id: str,
        artifact_id: str,
        version: int | None = None,
    ) -> Path:
        """Write `export_markdown` to `path` (parent folders are created); returns the path."""
        text = await self.export_markdown(conversation_id, artifact_id, version)
        target = Path(path)

        def write() -> None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")

        await asyncio.to_thread(write)
        return target
