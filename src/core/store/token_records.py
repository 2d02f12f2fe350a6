"""Who may do what: API users and their bearer tokens, and per-conversation tool approvals.

Tokens are stored as SHA-256 hashes only, so a copy of the database does not hand out access.
An approval ("always allow this tool in this conversation") is one row per tool; adding one
that another writer just added is not an error.
"""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid
from collections.abc import Iterable

import sqlalchemy as sa
import sqlalchemy.exc

from . import schema as t
from .unit_of_work import UnitOfWork


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenRecords(UnitOfWork):
    """Mixed into `AppStore`: the `af_users`, `af_tokens` and `af_approvals` tables."""

    # --- users and tokens ------------------------------------------------------------------

    async def create_token(self, user_name: str) -> tuple[str, str]:
        """Create (or reuse) the user and a new bearer token; returns (user_id, token)."""
        token = "af_" + secrets.token_urlsafe(32)
        now = time.time()
        async with self.transaction() as conn:
            row = (await conn.execute(sa.select(t.users.c.id).where(t.users.c.name == user_name))).first()
            if row is None:
                user_id = uuid.uuid4().hex
                await conn.execute(t.users.insert().values(id=user_id, name=user_name, created_at=now))
            else:
                user_id = row[0]
            await conn.execute(
                t.tokens.insert().values(
                    id=uuid.uuid4().hex, user_id=user_id, token_hash=hash_token(token), created_at=now
                )
            )
        return user_id, token

    async def user_for_token(self, token: str) -> str | None:
        query = sa.select(t.tokens.c.user_id).where(t.tokens.c.token_hash == hash_token(token))
        return await self.fetch_value(query)

    # --- approvals -------------------------------------------------------------------------

    async def allow_always(self, conversation_id: str, tool_names: Iterable[str]) -> None:
        existing = await self.always_allowed(conversation_id)
        fresh = [n for n in set(tool_names) if n not in existing]
        if not fresh:
            return
        async with self.transaction() as conn:
            for name in fresh:
                try:
                    async with conn.begin_nested():
                        await conn.execute(
                            t.approvals.insert().values(
                                conversation_id=conversation_id, tool_name=name, created_at=time.time()
                            )
                        )
                except sqlalchemy.exc.IntegrityError:
                    pass

    async def always_allowed(self, conversation_id: str) -> set[str]:
        query = sa.select(t.approvals.c.tool_name).where(t.approvals.c.conversation_id == conversation_id)
        return set(await self.fetch_column(query))
