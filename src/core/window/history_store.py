"""Stored conversation-history summaries (table `af_history_summaries`), both backends.

A row condenses the path root → `message_id`. Messages do not change once they have a final
status, so the row stays valid for every later message whose path passes through
`message_id`, on any branch: the lookup takes the deepest summarized message on the path.
Rows go with their conversation (foreign key, ON DELETE CASCADE). Two runs that condense the
same path at once both succeed: the second insert is ignored.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict, cast

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from ..store import schema as t

if TYPE_CHECKING:
    from ..store.repository import AppStore


class HistorySummaryRow(TypedDict):
    message_id: str  # the last message of the path it condenses
    conversation_id: str
    covers: int  # messages on the path it replaces
    summary: str
    model: str | None
    created_at: float


class HistorySummaries:
    """Read and write history summaries through an `AppStore`'s engine."""

    def __init__(self, store: AppStore) -> None:
        self.engine = store.engine

    async def latest_on_path(self, message_ids: Sequence[str]) -> HistorySummaryRow | None:
        """The summary covering the longest prefix of this path, if any."""
        if not message_ids:
            return None
        table = t.history_summaries
        query = (
            sa.select(table)
            .where(table.c.message_id.in_(list(message_ids)))
            .order_by(table.c.covers.desc())
            .limit(1)
        )
        async with self.engine.connect() as conn:
            row = (await conn.execute(query)).mappings().first()
        return cast(HistorySummaryRow, dict(row)) if row else None

    async def put(
        self,
        *,
        conversation_id: str,
        message_id: str,
        covers: int,
        summary: str,
        model: str | None = None,
    ) -> None:
        values = {
            "message_id": message_id,
            "conversation_id": conversation_id,
            "covers": covers,
            "summary": summary,
            "model": model,
            "created_at": time.time(),
        }
        async with self.engine.begin() as conn:
            try:
                async with conn.begin_nested():
                    await conn.execute(t.history_summaries.insert().values(**values))
            except IntegrityError:
                pass  # another run stored the same path first; either summary will do

    async def for_conversation(self, conversation_id: str) -> list[HistorySummaryRow]:
        table = t.history_summaries
        query = sa.select(table).where(table.c.conversation_id == conversation_id).order_by(table.c.covers)
        async with self.engine.connect() as conn:
            return [cast(HistorySummaryRow, dict(r)) for r in (await conn.execute(query)).mappings()]
