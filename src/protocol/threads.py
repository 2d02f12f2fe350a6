"""Threads (conversations), their states, history and time travel."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Annotated

from fastapi import APIRouter, Body, Query, Response
from sqlalchemy.exc import IntegrityError

from ..core.store.thread_reads import message_tree
from . import thread_ids
from .body import json_response
from .convert import turns_of
from .deps import JSON, Ctx, CtxDep, ProtocolError, plain
from .history import materialised, state_at, states_to, thread_states
from .steps import parse_step_id
from .views import ROOT, thread_status, thread_view
from .wire import (
    MAX_LIMIT,
    History,
    StateCheckpoint,
    StateUpdate,
    ThreadCount,
    ThreadCreate,
    ThreadPatch,
    ThreadSearch,
)

# --- threads -----------------------------------------------------------------------------------


async def _thread(ctx: Ctx, thread_id: str, *, with_values: bool = True) -> JSON:
    conversation = await ctx.p.conversation(thread_id, ctx.user)
    row = await ctx.p.records.thread_row(thread_id)
    tip = await ctx.p.tip(conversation)
    state = await state_of(ctx, conversation) if with_values else None
    return thread_view(
        conversation, row, status=thread_status(tip, await ctx.p.busy(thread_id)), state=state
    )


async def state_of(ctx: Ctx, conversation: JSON, checkpoint_id: str | None = None) -> JSON:
    """The state at `checkpoint_id` (a message, one of its steps, or `root`), else the
    thread's head."""
    messages = await message_tree(ctx.p.client.admin.store, conversation["id"])
    at = conversation.get("active_message_id") if checkpoint_id is None else checkpoint_id
    return await state_at(ctx.p.client, conversation["id"], messages, at)


def add_threads(router: APIRouter) -> None:
    @router.post("/threads")
    async def create(
        body: Annotated[ThreadCreate, Body()] = ThreadCreate(), ctx: Ctx = CtxDep
    ) -> Response:
        """Thread ids are a space per user (`thread_ids.py`): an id another user holds is
        free to you (nothing says it is theirs), and `if_exists` acts on your own only."""
        key, made = await _made(ctx, body.thread_id, body.if_exists)
        if made:
            meta = dict(body.metadata or {})
            await ctx.p.records.put_thread(key, ctx.user, meta, public_id=body.thread_id)
        thread_ids.show_as(key, body.thread_id)
        return json_response(await _thread(ctx, key))

    @router.get("/threads/{thread_id}")
    async def get(thread_id: str, ctx: Ctx = CtxDep) -> Response:
        return json_response(await _thread(ctx, thread_id))

    @router.patch("/threads/{thread_id}")
    async def patch(
        thread_id: str, body: Annotated[ThreadPatch, Body()] = ThreadPatch(), ctx: Ctx = CtxDep
    ) -> Response:
        await ctx.p.conversation(thread_id, ctx.user)
        await ctx.p.records.merge_thread_metadata(thread_id, ctx.user, dict(body.metadata or {}))
        return json_response(await _thread(ctx, thread_id))

    @router.delete("/threads/{thread_id}", status_code=204)
    async def delete(thread_id: str, ctx: Ctx = CtxDep) -> Response:
        await ctx.p.conversation(thread_id, ctx.user)
        await ctx.p.client.conversations.delete(thread_id, user_id=ctx.user)
        await ctx.p.records.delete_thread(thread_id)
        return Response(status_code=204)

    @router.post("/threads/search")
    async def search(
        body: Annotated[ThreadSearch, Body()] = ThreadSearch(), ctx: Ctx = CtxDep
    ) -> Response:
        page = (await _search(ctx, body))[0]
        if body.select:
            page = [{k: v for k, v in t.items() if k in body.select} for t in page]
        return json_response(page)

    @router.post("/threads/count")
    async def count(
        body: Annotated[ThreadCount, Body()] = ThreadCount(), ctx: Ctx = CtxDep
    ) -> int:
        wanted = ThreadSearch(metadata=body.metadata, status=body.status, limit=0)
        return (await _search(ctx, wanted))[1]

    @router.get("/threads/{thread_id}/state")
    async def state(thread_id: str, ctx: Ctx = CtxDep) -> Response:
        return json_response(await state_of(ctx, await ctx.p.conversation(thread_id, ctx.user)))

    @router.get("/threads/{thread_id}/state/{checkpoint_id}")
    async def state_at_checkpoint(thread_id: str, checkpoint_id: str, ctx: Ctx = CtxDep) -> Response:
        conversation = await ctx.p.conversation(thread_id, ctx.user)
        return json_response(await state_of(ctx, conversation, checkpoint_id))

    @router.post("/threads/{thread_id}/state/checkpoint")
    async def state_by_body(
        thread_id: str, body: Annotated[StateCheckpoint, Body()], ctx: Ctx = CtxDep
    ) -> Response:
        checkpoint_id = body.checkpoint.checkpoint_id
        conversation = await ctx.p.conversation(thread_id, ctx.user)
        return json_response(await state_of(ctx, conversation, checkpoint_id))

    @router.post("/threads/{thread_id}/state")
    async def update_state(
        thread_id: str, body: Annotated[StateUpdate, Body()] = StateUpdate(), ctx: Ctx = CtxDep
    ) -> JSON:
        """`checkpoint_id` moves the thread's head there (time travel: the next run answers
        after it); `values.messages` then appends finished turns (a user message and the
        answer after it, written as a completed message; nothing runs). `as_node` is accepted
        and ignored: every turn is the lead's."""
        conversation = await ctx.p.conversation(thread_id, ctx.user)
        checkpoint_id = body.checkpoint_at
        values = body.values
        turns = turns_of(values) if values not in (None, {}, []) else []
        if not checkpoint_id and not turns:
            raise ProtocolError(
                422, "give checkpoint_id (where to move the head) or values.messages"
            )
        if await ctx.p.busy(thread_id):
            raise ProtocolError(409, f"thread {thread_ids.shown(thread_id)} is busy")
        head = conversation.get("active_message_id")
        if checkpoint_id:
            head = (await state_of(ctx, conversation, checkpoint_id))["checkpoint"]["checkpoint_id"]
            if parse_step_id(head)[1] is not None:
                raise ProtocolError(
                    422, f"checkpoint {checkpoint_id} is inside a turn: move the head to a turn's "
                    "end (the message's own checkpoint) or to root"
                )
            head = None if head == ROOT else head
            await ctx.p.move_head(thread_id, head)
        store = ctx.p.client.admin.store
        for content, response in turns:
            message = await store.add_message(
                conversation_id=thread_id, content=content, parent_id=head, status="completed"
            )
            await store.update_message(message["id"], response=response, outcome="completed")
            head = message["id"]
            await store.touch_conversation(thread_id, active_message_id=head)
        state = await state_of(ctx, await ctx.p.conversation(thread_id, ctx.user))
        return {"checkpoint": state["checkpoint"]}

    @router.post("/threads/{thread_id}/history")
    async def history(
        thread_id: str, body: Annotated[History, Body()] = History(), ctx: Ctx = CtxDep
    ) -> Response:
        return json_response(await _history(ctx, thread_id, body))

    @router.get("/threads/{thread_id}/history")
    async def history_by_query(
        thread_id: str,
        limit: int = Query(10, ge=1, le=MAX_LIMIT),
        before: str | None = Query(None, min_length=1, max_length=200),
        ctx: Ctx = CtxDep,
    ) -> Response:
        return json_response(await _history(ctx, thread_id, History(limit=limit, before=before)))


async def _made(ctx: Ctx, public: str | None, if_exists: str | None) -> tuple[str, bool]:
    """The key of the caller's thread `public` (a new id when None) and whether it was made
    now; 409 when it exists and `if_exists` is not `do_nothing`."""
    store = ctx.p.client.admin.store
    if not public:
        return (await store.create_conversation(None, user_id=ctx.user))["id"], True
    for _ in range(3):  # another request may take a free key between our read and our write
        try:
            key = await thread_ids.resolve(store, public, ctx.user)
        except thread_ids.TakenError:
            break
        existing = await store.get_conversation(key)
        if existing is not None and (ctx.user is None or existing["user_id"] == ctx.user):
            if if_exists == "do_nothing":
                return key, False
            raise ProtocolError(409, f"thread {public} already exists")
        if existing is None:
            with contextlib.suppress(IntegrityError):
                await store.create_conversation(key, user_id=ctx.user)
                return key, True
    raise ProtocolError(409, f"thread id {public} cannot be made now; retry or choose another")


async def _history(ctx: Ctx, thread_id: str, body: History) -> list[JSON]:
    """A state per super-step (`history.py`), newest first: of every branch of the thread
    (as LangGraph lists them), or with `checkpoint` of the branch that ends there."""
    await ctx.p.conversation(thread_id, ctx.user)
    messages = await message_tree(ctx.p.client.admin.store, thread_id)
    if not messages:
        return []
    start = body.checkpoint.checkpoint_id if body.checkpoint else None
    if start:
        states = await states_to(ctx.p.client, thread_id, messages, start)
    else:
        states = await thread_states(ctx.p.client, thread_id, messages)
    return materialised(_page(states, body.metadata or {}, body.before_id, body.limit))


def _page(
    states: Callable[[], Iterator[JSON]], metadata: JSON, before: str | None, limit: int
) -> list[JSON]:
    """The first `limit` states whose metadata has `metadata`'s values, after the one named
    `before` (from the newest when none is); only those are built (`history.py`)."""

    def wanted() -> Iterator[JSON]:
        items = metadata.items()
        return (s for s in states() if all(s["metadata"].get(k) == v for k, v in items))

    found = wanted()
    if before:
        for state in found:
            if state["checkpoint"]["checkpoint_id"] == before:
                break
        else:  # not among them: from the newest
            found = wanted()
    return list(islice(found, limit))


async def _search(ctx: Ctx, body: ThreadSearch) -> tuple[list[JSON], int]:
    p = ctx.p
    await p.records.purge_orphans()  # threads whose conversation was deleted elsewhere
    conversations = plain(await p.client.conversations.list(user_id=ctx.user, limit=10_000))
    rows = await p.records.thread_rows([c["id"] for c in conversations])
    if body.ids:  # the ids the caller knows: a derived key's public id
        wanted_ids = set(body.ids)
        conversations = [
            c for c in conversations
            if ((rows.get(c["id"]) or {}).get("public_id") or c["id"]) in wanted_ids
        ]
    wanted = body.metadata or {}
    conversations = [
        c
        for c in conversations
        if _metadata_matches(ctx, (rows.get(c["id"]) or {}).get("metadata", {}), wanted)
    ]
    out, keys = [], {}
    for c in conversations:
        tip = await p.tip(c)
        out.append(
            thread_view(c, rows.get(c["id"]), status=thread_status(tip, await p.busy(c["id"])))
        )
        keys[out[-1]["thread_id"]] = c["id"]
    if body.status:
        out = [t for t in out if t["status"] == body.status]
    key = body.sort_by or "updated_at"
    out.sort(key=lambda t: t[key] or "", reverse=(body.sort_order or "desc") == "desc")
    total = len(out)
    page = out[body.offset : body.offset + body.limit]
    for t in page:  # values only for the page
        conversation = await p.conversation(keys[t["thread_id"]], ctx.user)
        t["values"] = (await state_of(ctx, conversation))["values"]
    return page, total


def _metadata_matches(ctx: Ctx, metadata: JSON, wanted: JSON) -> bool:
    """`wanted`'s keys equal in `metadata`; a `graph_id`/`assistant_id` matches any alias of
    the same graph (agent-chat-ui searches by the name it was configured with: "agent")."""
    for key, value in wanted.items():
        have = metadata.get(key)
        if key in ("graph_id", "assistant_id") and isinstance(value, str):
            if have not in ctx.p.graph_ids(value):
                return False
        elif have != value:
            return False
    return True
