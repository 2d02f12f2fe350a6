"""PostgreSQL test databases: one fresh database per use, dropped afterwards.

Uses the server on 127.0.0.1:5432 (or `ARTIFACTFLOW_TEST_PG_URL`); tests skip with a clear
reason only when no server is reachable, and fail instead when `CI` is set.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

ADMIN_URL = os.environ.get("ARTIFACTFLOW_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


async def _admin():  # type: ignore[no-untyped-def]
    import asyncpg

    try:
        return await asyncpg.connect(ADMIN_URL, timeout=3)
    except (OSError, asyncpg.PostgresError) as exc:
        reason = f"PostgreSQL not reachable at {ADMIN_URL}: {exc}"
        if os.environ.get("CI"):  # in CI a skipped backend is zero coverage: fail instead
            pytest.fail(f"{reason} (CI must run the PostgreSQL tests)")
        pytest.skip(reason)


async def create_database() -> str:
    """Create a new empty database; its URL."""
    admin = await _admin()
    name = f"af_test_{uuid.uuid4().hex[:12]}"
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    return f"{ADMIN_URL.rsplit('/', 1)[0]}/{name}"


async def drop_database(url: str) -> None:
    """Drop the database at `url`, even with connections still open."""
    admin = await _admin()
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')
    finally:
        await admin.close()


@asynccontextmanager
async def fresh_database() -> AsyncIterator[str]:
    """Yield the URL of a new empty database."""
    url = await create_database()
    try:
        yield url
    finally:
        await drop_database(url)
