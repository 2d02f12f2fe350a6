"""Artifacts and their version history: rows only.

The rules (who may write what, fuzzy edits, limits) live in core.artifacts.ArtifactService;
this module keeps the two tables consistent. Every write adds a version row in the same
transaction as the artifact's change, and an update is optimistic: it applies only while the
artifact is still at the version the writer read, so two writers cannot both win.
"""

from __future__ import annotations

import time

import sqlalchemy as sa
import sqlalchemy.exc
from sqlalchemy.ext.asyncio import AsyncConnection

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
            conversation_id=conversation_id,
            artifact_id=artifact_id,
            title=title,
            content_type=content_type,
            content=content,
            version=1,
            created_at=now,
            updated_at=now,
        )
        first = ArtifactVersionRow(
            conversation_id=conversation_id,
            artifact_id=artifact_id,
            version=1,
            title=title,
            content=content,
            change="create",
            agent=agent,
            message_id=message_id,
            created_at=now,
        )
        try:
            await self.write(t.artifacts.insert().values(**record), _add_version(first))
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
            version = ArtifactVersionRow(
                conversation_id=conversation_id,
                artifact_id=artifact_id,
                version=new_version,
                title=await _title(conn, conversation_id, artifact_id),
                content=content,
                change=change,
                agent=agent,
                message_id=message_id,
                created_at=now,
            )
            await conn.execute(_add_version(version))
        return new_version


def _add_version(row: ArtifactVersionRow) -> sa.Insert:
    return t.artifact_versions.insert().values(**row)


async def _title(conn: AsyncConnection, conversation_id: str, artifact_id: str) -> str:
    query = sa.select(t.artifacts.c.title).where(*_is(t.artifacts, conversation_id, artifact_id))
    return (await conn.execute(query)).scalar_one()
