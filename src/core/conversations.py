"""Conversations as message trees.

Each message has a `parent_id`; a conversation's `active_message_id` is the tip of the branch
the user is on. A new message without a parent continues the active branch; with an explicit
parent it forks (the old branch stays intact); with `parent_id=None` explicitly it starts a new
root. The lead sees only the path root → parent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from ..errors import NotFoundError, UserError
from .metrics import ConversationUsage, conversation_usage, message_usage
from .store.rows import ConversationRow, MessageRow
from .titles import title_from

if TYPE_CHECKING:  # importing `ACTIVE_BRANCH` (the facade's requests) needs no SQLAlchemy
    from .store.repository import AppStore


class _Active:
    def __repr__(self) -> str:
        return "ACTIVE_BRANCH"


ACTIVE_BRANCH: Any = _Active()  # default parent: continue the active branch


class ChatTurn(TypedDict):
    role: Literal["user", "assistant"]
    content: str


class TreeNode(TypedDict):
    """One message of a conversation tree."""

    id: str
    parent_id: str | None
    content: str
    response: str | None
    status: str
    created_at: float
    children: list[str]  # ids of the messages that answer this one
    active: bool  # on the branch the user is on
    tokens: int
    cost_usd: float | None


class ConversationTree(ConversationRow):
    messages: list[TreeNode]
    roots: list[str]  # ids of the messages without a parent
    usage: ConversationUsage


class ConversationManager:
    def __init__(self, store: AppStore) -> None:
        self.store = store

    async def start_conversation(
        self, conversation_id: str | None = None, *, user_id: str | None = None, title: str | None = None
    ) -> ConversationRow:
        if conversation_id and await self.store.get_conversation(conversation_id):
            raise UserError(f"conversation {conversation_id} already exists")
        return await self.store.create_conversation(conversation_id, user_id=user_id, title=title)

    async def get(self, conversation_id: str, *, user_id: str | None = None) -> ConversationRow:
        conversation = await self.store.get_conversation(conversation_id)
        if conversation is None or (user_id is not None and conversation["user_id"] != user_id):
            raise NotFoundError(f"conversation {conversation_id} not found")
        return conversation

    async def resolve_parent(self, conversation: ConversationRow, parent_id: Any) -> str | None:
        if parent_id is ACTIVE_BRANCH:
            return conversation["active_message_id"]
        if parent_id is None:
            return None
        parent = await self.store.get_message(parent_id)
        if parent is None or parent["conversation_id"] != conversation["id"]:
            raise NotFoundError(
                f"parent message {parent_id} is not in conversation {conversation['id']}"
            )
        return parent_id

    async def add_message(
        self, conversation_id: str, content: str, *, parent_id: Any = ACTIVE_BRANCH,
        conversation: ConversationRow | None = None, new: bool = False, **fields: Any,
    ) -> MessageRow:
        """Store a message under `parent_id` (the active branch by default) and make it the
        active one, in one transaction; `conversation`: its row, when the caller has just
        read or made it (`new`: made, not stored yet: stored with the message)."""
        if conversation is None or conversation["id"] != conversation_id:
            conversation, new = await self.get(conversation_id), False
        parent = await self.resolve_parent(conversation, parent_id)
        return await self.store.add_message(
            conversation_id=conversation_id, content=content, parent_id=parent,
            new_conversation=conversation if new else None, activate=title_from(content), **fields,
        )

    async def path_to(
        self, message_id: str | None, messages: Sequence[MessageRow] | None = None
    ) -> list[MessageRow]:
        """Messages from the root to `message_id`, inclusive (one query for the whole tree,
        or none when the conversation's `messages` are passed in)."""
        if message_id is None:
            return []
        if messages is None:
            message = await self.store.get_message(message_id)
            if message is None:
                return []
            messages = await self.store.list_messages(message["conversation_id"])
        by_id = {m["id"]: m for m in messages}
        path: list[MessageRow] = []
        current: str | None = message_id
        while current is not None and current in by_id and len(path) <= len(by_id):
            path.append(by_id[current])
            current = by_id[current]["parent_id"]
        return list(reversed(path))

    async def format_conversation_history(self, message_id: str | None) -> list[ChatTurn]:
        """Chat turns for the path root → `message_id` (user text and the final answers)."""
        turns: list[ChatTurn] = []
        for message in await self.path_to(message_id):
            turns.append({"role": "user", "content": message["content"]})
            if message["response"]:
                turns.append({"role": "assistant", "content": message["response"]})
            else:
                turns.append(
                    {"role": "assistant", "content": f"(no answer: the run ended {message['status']})"}
                )
        return turns

    async def get_active_branch(self, conversation_id: str) -> list[MessageRow]:
        conversation = await self.get(conversation_id)
        return await self.path_to(conversation["active_message_id"])

    async def list_conversations(
        self, *, user_id: str | None = None, limit: int = 20, offset: int = 0, project: str | None = None
    ) -> list[ConversationRow]:
        return await self.store.list_conversations(user_id=user_id, limit=limit, offset=offset, project=project)

    async def tree(self, conversation_id: str) -> ConversationTree:
        """The conversation with its messages, children lists and the active path marked."""
        conversation = await self.get(conversation_id)
        messages = await self.store.list_messages(conversation_id)
        active = {m["id"] for m in await self.path_to(conversation["active_message_id"], messages)}
        children: dict[str | None, list[str]] = {}
        for message in messages:
            children.setdefault(message["parent_id"], []).append(message["id"])
        nodes: list[TreeNode] = []
        for m in messages:
            usage = message_usage(m)
            nodes.append(TreeNode(
                id=m["id"],
                parent_id=m["parent_id"],
                content=m["content"],
                response=m["response"],
                status=m["status"],
                created_at=m["created_at"],
                children=children.get(m["id"], []),
                active=m["id"] in active,
                tokens=usage["tokens"],
                cost_usd=usage["cost_usd"],
            ))
        return ConversationTree(
            **conversation,
            messages=nodes,
            roots=children.get(None, []),
            usage=conversation_usage(messages),
        )

    async def delete(self, conversation_id: str) -> list[str]:
        await self.get(conversation_id)
        return await self.store.delete_conversation(conversation_id)
