"""Workflow runs and their lineage.

A workflow run is a message whose run executes a workflow definition; its row keeps the
definition's text and input, so a resume in any process runs exactly what was started even if
the file has changed since. Lineage is one row per node execution (its parents, input, output
and status), written as the run goes and read by `artifactflow workflows lineage` and the API.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
import sqlalchemy.exc
from sqlalchemy.engine import RowMapping

from . import schema as t
from .codec import dumps, loads
from .rows import LineageRow, NewWorkflowRun, WorkflowRunRow, WorkflowRunSummary
from .unit_of_work import UnitOfWork

_LINEAGE_JSON = ("parents", "input", "output")


class WorkflowRecords(UnitOfWork):
    """Mixed into `AppStore`: the `af_workflow_runs` and `af_workflow_nodes` tables."""

    async def add_workflow_run(self, record: NewWorkflowRun) -> None:
        values = {**record, "input": dumps(record["input"]), "created_at": time.time()}
        await self.write(t.workflow_runs.insert().values(**values))

    async def get_workflow_run(self, message_id: str) -> WorkflowRunRow | None:
        query = sa.select(t.workflow_runs).where(t.workflow_runs.c.message_id == message_id)
        rows = await self.fetch_rows(query)
        return _decoded(rows[0], ("input",)) if rows else None

    async def list_workflow_runs(
        self, workflow: str | None = None, *, user_id: str | None = None, limit: int = 20,
        offset: int = 0,
    ) -> list[WorkflowRunSummary]:
        """Newest first, joined with their message's status; only `user_id`'s when given."""
        query = (
            sa.select(
                t.workflow_runs.c.message_id, t.workflow_runs.c.conversation_id,
                t.workflow_runs.c.workflow, t.workflow_runs.c.input,
                t.workflow_runs.c.created_at, t.messages.c.status, t.messages.c.outcome,
            )
            .join(t.messages, t.messages.c.id == t.workflow_runs.c.message_id)
            .order_by(t.workflow_runs.c.created_at.desc(), t.workflow_runs.c.message_id)
            .limit(limit)
            .offset(offset)
        )
        if workflow is not None:
            query = query.where(t.workflow_runs.c.workflow == workflow)
        if user_id is not None:
            query = query.join(
                t.conversations, t.conversations.c.id == t.workflow_runs.c.conversation_id
            ).where(t.conversations.c.user_id == user_id)
        return [_decoded(r, ("input",)) for r in await self.fetch_rows(query)]

    async def put_lineage(self, record: LineageRow) -> None:
        """Insert or replace one node execution (keyed by message and execution id)."""
        values: dict[str, object] = dict(record)
        values["parents"] = dumps(record.get("parents") or [])
        for key in ("input", "output"):
            values[key] = dumps(values.get(key))
        keys = (t.workflow_nodes.c.message_id == record["message_id"],
                t.workflow_nodes.c.execution_id == record["execution_id"])
        async with self.transaction() as conn:
            existing = (await conn.execute(sa.select(t.workflow_nodes.c.started_at).where(*keys))).first()
            if existing is None:
                try:
                    async with conn.begin_nested():
                        await conn.execute(t.workflow_nodes.insert().values(**values))
                    return
                except sqlalchemy.exc.IntegrityError:
                    pass
            values.pop("started_at", None)  # the first write's start time stays
            await conn.execute(t.workflow_nodes.update().where(*keys).values(**values))

    async def lineage(self, message_id: str, *, group_id: str | None = None) -> list[LineageRow]:
        """A workflow run's node executions in the order they started."""
        query = sa.select(t.workflow_nodes).where(t.workflow_nodes.c.message_id == message_id)
        if group_id is not None:
            query = query.where(t.workflow_nodes.c.group_id == group_id)
        query = query.order_by(t.workflow_nodes.c.started_at, t.workflow_nodes.c.execution_id)
        return [_decoded(r, _LINEAGE_JSON) for r in await self.fetch_rows(query)]


def _decoded(row: RowMapping, json_columns: tuple[str, ...]) -> Any:
    """`row` as a dict with its JSON columns decoded (the caller names the row type)."""
    record = dict(row)
    for key in json_columns:
        record[key] = loads(record[key])
    return record
