"""Long-term memories of the calling user (docs/memory.md): add, list, search, get, delete.

Per user like every other resource: another user's memory id answers 404 exactly like a
missing one. Empty or over-long text (`memory.max_chars`) answers 422 with nothing stored.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from .auth import Caller, caller
from .deps import MAX_INT, error_docs

router = APIRouter(prefix="/memories", tags=["memories"])
CallerDep = Depends(caller)


# Text with something besides (ASCII) white space and no NUL; a label without "." or NUL.
TEXT = r"^[^\x00]*[^\x00 \t\n\r\f\v][^\x00]*$"
LABEL = r"^[^.\x00]+$"


class _NewMemory(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(pattern=TEXT, description="The memory (at most `memory.max_chars` characters)")


class _GlobalScope(BaseModel):
    scope: Literal["global"] = "global"


class _ProjectScope(BaseModel):
    scope: Literal["project"]
    project: str = Field(pattern=LABEL, max_length=200)


class _ConversationScope(BaseModel):
    scope: Literal["conversation"]
    conversation_id: str = Field(pattern=LABEL, max_length=64, description="One of your conversations")


class GlobalMemory(_NewMemory, _GlobalScope):
    pass


class ProjectMemory(_NewMemory, _ProjectScope):
    pass


class ConversationMemory(_NewMemory, _ConversationScope):
    pass


MemoryCreate = GlobalMemory | ProjectMemory | ConversationMemory


class MemorySaved(BaseModel):
    id: str
    namespace: list[str]
    deduped: bool = Field(description="A near-duplicate in the same scope was updated instead")


class Memory(BaseModel):
    id: str
    namespace: list[str] = Field(description="[user, scope, project or conversation id]")
    text: str
    score: float = Field(description="Search score (0 in lists)")
    created_at: float
    updated_at: float


class MemoryPage(BaseModel):
    items: list[Memory]
    limit: int
    offset: int


class MemorySearch(BaseModel):
    mode: str = Field(description="The mode that ran: recency, semantic, hybrid, or lexical (no embedder)")
    hits: list[Memory]
    warning: str | None = Field(default=None, description="Why another mode ran than the one asked for")


@router.post("", status_code=201, response_model=MemorySaved, responses=error_docs(400, 404))
async def add_memory(body: MemoryCreate, caller: Caller = CallerDep) -> MemorySaved:
    """Save a memory; a near-duplicate in the same scope is updated and the answer says `deduped`."""
    saved = await caller.client.memories.add(
        body.text, scope=body.scope, project=getattr(body, "project", None),
        conversation_id=getattr(body, "conversation_id", None), user_id=caller.user,
    )
    return MemorySaved.model_validate(saved.to_dict())


class _Batch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    texts: list[Annotated[str, Field(pattern=TEXT)]] = Field(
        min_length=1, max_length=10_000, description="The memories, in order (each at most `memory.max_chars`)"
    )


class GlobalBatch(_Batch, _GlobalScope):
    pass


class ProjectBatch(_Batch, _ProjectScope):
    pass


class ConversationBatch(_Batch, _ConversationScope):
    pass


MemoryBatch = GlobalBatch | ProjectBatch | ConversationBatch


class MemoryBatchSaved(BaseModel):
    ids: list[str] = Field(description="The new memories' ids, in the order of `texts`")


@router.post(":batch", status_code=201, response_model=MemoryBatchSaved, responses=error_docs(400, 404))
async def add_memories(body: MemoryBatch, caller: Caller = CallerDep) -> MemoryBatchSaved:
    """Import many memories into one scope (up to 10,000 per request); nothing is merged.
    A bad text answers 422 naming its position, and nothing is stored."""
    for number, text in enumerate(body.texts, start=1):
        if "\x00" in text:
            raise HTTPException(422, f"memory {number} of {len(body.texts)} contains NUL")
    ids = await caller.client.memories.add_many(
        body.texts, scope=body.scope, project=getattr(body, "project", None),
        conversation_id=getattr(body, "conversation_id", None), user_id=caller.user,
    )
    return MemoryBatchSaved(ids=ids)


@router.get("", response_model=MemoryPage, responses=error_docs())
async def list_memories(
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=MAX_INT),
    caller: Caller = CallerDep,
) -> MemoryPage:
    """Your memories, newest first."""
    hits = await caller.client.memories.list(user_id=caller.user, limit=limit, offset=offset)
    return MemoryPage(items=[Memory.model_validate(h.to_dict()) for h in hits], limit=limit, offset=offset)


@router.get("/search", response_model=MemorySearch, responses=error_docs())
async def search_memories(
    # the pattern, not `StorableText`'s validator, which a `Query(...)` default does not run
    q: str = Query(..., max_length=4000, pattern=r"^[^\x00]*$", description="What to look for"),
    mode: Literal["hybrid", "semantic", "recency"] = Query("hybrid"),
    limit: int = Query(10, ge=1, le=200),
    caller: Caller = CallerDep,
) -> MemorySearch:
    """Your best memories for `q`; `mode` in the answer is the one that ran."""
    found = await caller.client.memories.search(q, mode=mode, limit=limit, user_id=caller.user)
    return MemorySearch.model_validate(found.to_dict())


@router.get("/{memory_id}", response_model=Memory, responses=error_docs(404))
async def get_memory(memory_id: str, caller: Caller = CallerDep) -> Memory:
    return Memory.model_validate((await caller.client.memories.get(memory_id, user_id=caller.user)).to_dict())


@router.delete("/{memory_id}", status_code=204, responses=error_docs(404))
async def delete_memory(memory_id: str, caller: Caller = CallerDep) -> Response:
    """Forget a memory."""
    if memory_id == "search":  # the search path, not an id (ids are hex): no DELETE there
        raise HTTPException(405)
    await caller.client.memories.forget(memory_id, user_id=caller.user)
    return Response(status_code=204)
