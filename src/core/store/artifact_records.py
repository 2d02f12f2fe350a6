"""Artifacts and their version history: rows only.

The rules (who may write what, fuzzy edits, limits) live in artifacts.ArtifactService;
this module keeps the two tables consistent. Every write adds a version row in the same
transaction as the artifact's change, and an update is optimistic: it applies only while the
artifact is still at the version the writer read, so two writers cannot both win.
"""

from __future__ import annotations

import time
from typing import cast

import sqlalchemy as sa
import sqlalchemy.exc

from ...errors import ArtifactConflictError
from . import schema as t
from .rows import ArtifactRow, ArtifactVersionRow
from .unit_of_work import UnitOfWork


def _is(table: sa.Table, conversation_id: str, artifact_id: str) -> list[sa.ColumnElement[bool]]:
    """The conditions that pick one artifact's rows of `table`."""
    return [table.c.conversation_id == conversation_id, table.c.artifact_id == artifact_id]


class ArtifactRecords(UnitOfWork):
    """Mixed into `AppStore`: the `af_artifacts` and `af_artifact_versions` tables."""

    async def get_artifact(self, conversation_id: str, artifact_id: str) -> ArtifactRow | None:
        query = sa.select(t.artifacts).where(*_is(t.artifacts, conversation_id, artifact_id))
        return await self.fetch_one(query, ArtifactRow)

    async def list_artifacts(self, conversation_id: str) -> list[ArtifactRow]:
        query = (
            sa.select(t.artifacts)
            .where(t.artifacts.c.conversation_id == conversation_id)
            .order_by(t.artifacts.c.created_at, t.artifacts.c.artifact_id)
        )
        return await self.fetch_all(query, ArtifactRow)

    async def artifact_versions(self, conversation_id: str, artifact_id: str) -> list[ArtifactVersionRow]:
        query = (
            sa.select(t.artifact_versions)
            .where(*_is(t.artifact_versions, conversation_id, artifact_id))
            .order_by(t.artifact_versions.c.version)
        )
        return await self.fetch_all(query, ArtifactVersionRow)

    async def get_artifact_version(
        self, conversation_id: str, artifact_id: str, version: int
    ) -> ArtifactVersionRow | None:
        query = sa.select(t.artifact_versions).where(
            *_is(t.artifact_versions, conversation_id, artifact_id),
            t.artifact_versions.c.version == version,
        )
        return await self.fetch_one(query, ArtifactVersionRow)

    async def create_artifact(
        self,
        conversation_id: str,
        artifact_id: str,
        *,
        title: str,
        content: str,
        content_type: str,
        agent: str | None = None,
        message_id: str | None = None,
    ) -> ArtifactRow:
        now = time.time()
        record = ArtifactRow(
            conversation_id=conversation_id, artifact_id=artifact_id, title=title,
            content_type=content_type, content=content, version=1, created_at=now, updated_at=now,
        )
        first = _add_version(record, change="create", agent=agent, message_id=message_id)
        try:
            await self.write(t.artifacts.insert().values(**record), first)
        except sqlalchemy.exc.IntegrityError:
            raise ArtifactConflictError(
                f"artifact '{artifact_id}' already exists in conversation '{conversation_id}'"
            ) from None
        return record

    async def write_artifact_version(
        self,
        conversation_id: str,
        artifact_id: str,
        *,
        expected_version: int,
        content: str,
        change: str,
        title: str | None = None,
        agent: str | None = None,
        message_id: str | None = None,
    ) -> int:
        """Write a new version if the artifact is still at `expected_version` (optimistic lock)."""
        now = time.time()
        new_version = expected_version + 1
        values: dict[str, str | int | float] = {"content": content, "version": new_version, "updated_at": now}
        if title is not None:
            values["title"] = title
        async with self.transaction() as conn:
            result = await conn.execute(
                t.artifacts.update()
                .where(*_is(t.artifacts, conversation_id, artifact_id))
                .where(t.artifacts.c.version == expected_version)
                .values(**values)
            )
            if result.rowcount != 1:
                raise ArtifactConflictError(
                    f"artifact '{artifact_id}' was changed by another writer (expected version "
                    f"{expected_version}); read it again and retry"
                )
            query = sa.select(t.artifacts).where(*_is(t.artifacts, conversation_id, artifact_id))
            current = cast(ArtifactRow, dict((await conn.execute(query)).mappings().one()))
            await conn.execute(
                _add_version(current, change=change, agent=agent, message_id=message_id)
            )
        return new_version


def _add_version(
    artifact: ArtifactRow, *, change: str, agent: str | None, message_id: str | None
) -> sa.Insert:
    """The INSERT of the version row for `artifact` as it now is (written in its transaction)."""
    row = ArtifactVersionRow(
        conversation_id=artifact["conversation_id"],
        artifact_id=artifact["artifact_id"],
        version=artifact["version"],
        title=artifact["title"],
        content=artifact["content"],
        change=change,
        agent=agent,
        message_id=message_id,
        created_at=artifact["updated_at"],
    )
    return t.artifact_versions.insert().values(**row)
