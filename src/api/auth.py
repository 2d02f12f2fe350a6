"""Bearer-token auth and resource ownership.

Tokens come from `AppStore.create_token(name)` (`artifactflow token create NAME`); the store
keeps only their hashes. Every conversation belongs to the user whose token created it, and
every endpoint that names a conversation, message or artifact checks that: another user's
resources answer 404 exactly like missing ones, so ids cannot be probed.

Auth is on when `auth.enabled` is true, off when false, and when unset (None) on unless the
server binds to a loopback address. With auth off the user is `None` and sees everything.
`EventSource` cannot send headers, so the stream endpoint also takes `?access_token=`.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from dataclasses import dataclass

from fastapi import Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ..client import Client
from ..client.records import ConversationRow, MessageRow
from .deps import get_client
from .errors import ApiError

bearer = HTTPBearer(auto_error=False, description="A token from `artifactflow token create NAME`")


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def auth_enabled(setting: bool | None, host: str) -> bool:
    return setting if setting is not None else not is_loopback(host)


async def _user_for(request: Request, token: str | None) -> str | None:
    get_client(request)  # 503 until the lifespan has opened the client
    if not request.app.state.auth_enabled:
        return None
    if not token:
        raise ApiError(
            401,
            "unauthorized",
            "missing bearer token: send 'Authorization: Bearer <token>' "
            "(create one with `artifactflow token create NAME`)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    user_id = await get_client(request).admin.user_for_token(token)
    if user_id is None:
        raise ApiError(
            401, "unauthorized", "invalid or revoked token", headers={"WWW-Authenticate": "Bearer"}
        )
    return user_id


async def current_user(
    request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)
) -> str | None:
    """The caller's user id (None when auth is off)."""
    return await _user_for(request, credentials.credentials if credentials else None)


async def stream_user(
    request: Request,
    credentials: HTTPAuthorizationCredentials | None = Depends(bearer),
    access_token: str | None = Query(
        None, description="The bearer token, for clients that cannot send headers (EventSource)"
    ),
) -> str | None:
    token = credentials.credentials if credentials else access_token
    return await _user_for(request, token)


class RedactTokens(logging.Filter):
    """Keep `?access_token=` values out of the access log (uvicorn logs the query string)."""

    PATTERN = re.compile(r"(access_token=)[^&\s]*")

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                self.PATTERN.sub(r"\1[redacted]", a) if isinstance(a, str) else a
                for a in record.args
            )
        return True


# --- ownership ---------------------------------------------------------------------------------


async def owned_conversation(
    client: Client, conversation_id: str, user_id: str | None
) -> ConversationRow:
    return await client.conversations.get(conversation_id, user_id=user_id)


async def owned_message(client: Client, message_id: str, user_id: str | None) -> MessageRow:
    return await client.conversations.message(message_id, user_id=user_id)


@dataclass(frozen=True)
class Caller:
    """Who is calling (None when auth is off) with the client, and the ownership checks."""

    user: str | None
    client: Client

    async def conversation(self, conversation_id: str) -> ConversationRow:
        return await owned_conversation(self.client, conversation_id, self.user)

    async def message(self, message_id: str) -> MessageRow:
        return await owned_message(self.client, message_id, self.user)


async def caller(
    user: str | None = Depends(current_user), client: Client = Depends(get_client)
) -> Caller:
    """The `Caller` of a request authenticated by its bearer header."""
    return Caller(user, client)
