"""Thread ids, one space per user: two users may each hold a thread `X`, and neither learns of
the other's (issue 34: `POST /threads {"thread_id": X}` answered 409 for another user's `X`).

A thread is a conversation, and a conversation's id is the key of everything stored under it
(messages, runs, crons, `/api/v1`). So the public id a client chose is mapped to that key at
the protocol's boundary, per caller:

- `X` itself, when `X` is free or already the caller's (every thread made before this change,
  every id the server picked, every thread with auth off: key and public id are the same);
- else a key derived from (caller, `X`) (`_derived`), at most `CHAIN` times: the first of the
  chain that is the caller's is their thread `X`, else the first free one is where theirs
  would be made. A derived key is a UUID no one else asked for; someone who takes one on
  purpose only moves the caller one step on.

The public id of a derived key is kept in `ap_threads.public_id` (NULL: the key itself), so
lists show it. Within one request, `show_as` records the pairs met and `shown` gives the public
id back for a key: the views (threads, runs, checkpoints, stream frames, `Location` headers)
show only public ids. The mapping is a context variable because the views sit below the route
layer and must not each take the request; `deps.context` starts a fresh one per request.
"""

from __future__ import annotations

import uuid
from contextvars import ContextVar
from typing import TYPE_CHECKING

import sqlalchemy as sa

from ..core.store.schema import conversations

if TYPE_CHECKING:
    from ..core.store.repository import AppStore

CHAIN = 3  # X, then two derived keys: enough unless someone takes two on purpose
_SPACE = uuid.UUID("5d2c7f0e-1b8a-4c55-9a53-34a1d0c0f134")

_shown: ContextVar[dict[str, str] | None] = ContextVar("protocol_thread_ids", default=None)


class TakenError(Exception):
    """No key of the chain is free for this caller (every one held by someone else)."""


def _derived(user: str, key: str) -> str:
    return uuid.uuid5(_SPACE, f"{user}\n{key}").hex


def chain(public_id: str, user: str) -> list[str]:
    keys = [public_id]
    while len(keys) < CHAIN:
        keys.append(_derived(user, keys[-1]))
    return keys


async def resolve(store: AppStore, public_id: str, user: str | None) -> str:
    """The key of `user`'s thread `public_id`: where it is, or where it would be made (free).
    Auth off (`user` None): one space, the id is the key. `TakenError` if the whole chain is
    held by others."""
    if user is None:
        return public_id
    keys = chain(public_id, user)
    rows = await store.fetch_rows(
        sa.select(conversations.c.id, conversations.c.user_id).where(conversations.c.id.in_(keys))
    )
    owners = {r["id"]: r["user_id"] for r in rows}
    for key in keys:
        if key in owners and owners[key] == user:
            return key
    for key in keys:
        if key not in owners:
            return key
    raise TakenError(public_id)


def new_context() -> None:
    """A fresh mapping for this request (`deps.context`)."""
    _shown.set({})


def show_as(key: str, public_id: str | None) -> None:
    """Within this request, show thread `key` as `public_id` (None or equal: as itself)."""
    mapping = _shown.get()
    if mapping is not None and public_id and public_id != key:
        mapping[key] = public_id


def shown(key: str) -> str:
    """The public id of thread `key` in this request (the key itself when not mapped)."""
    return (_shown.get() or {}).get(key, key)
