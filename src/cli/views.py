"""Printing stored data: paused messages, conversations, a conversation tree, events, gc
results and artifacts. Lists are plain lines rather than tables so ids are never cut short
and stay copy-pasteable; `--json` output is one JSON document on stdout.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from .approvals import call_line
from .text import Text, short

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text as RichText

    from ..events.envelope import Event

STATUS_STYLES = {
    "completed": "green",
    "failed": "red",
    "cancelled": "yellow",
    "waiting": "magenta",
    "running": "cyan",
}


class PublicMessage(TypedDict):
    """A paused message as `artifactflow pending --json` prints it."""

    id: str | None
    conversation_id: str | None
    parent_id: str | None
    status: str | None
    content: str | None
    created_at: float | None
    updated_at: float | None
    waiting_for: Any  # the interrupt id and the calls to decide on (`shapes.AskedCall`)


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def ago(timestamp: float | None, now: float | None = None) -> str:
    if timestamp is None:
        return "?"
    delta = max(0.0, (now or time.time()) - timestamp)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if delta >= size:
            return f"{delta / size:.0f}{unit} ago"
    return f"{delta:.0f}s ago"


def public_message(message: Mapping[str, Any]) -> PublicMessage:
    return PublicMessage(
        id=message.get("id"),
        conversation_id=message.get("conversation_id"),
        parent_id=message.get("parent_id"),
        status=message.get("status"),
        content=message.get("content"),
        created_at=message.get("created_at"),
        updated_at=message.get("updated_at"),
        waiting_for=message.get("waiting_for"),
    )


def pending(console: Console, messages: Sequence[Mapping[str, Any]]) -> None:
    if not messages:
        console.print("No paused messages.")
        return
    for message in messages:
        calls = (message.get("waiting_for") or {}).get("calls") or []
        console.print(
            Text(message["id"], style="bold cyan")
            + Text(
                f"  conversation {message['conversation_id']} · paused {ago(message.get('updated_at'))}"
                f" · {len(calls)} call(s) · {short(message.get('content'), 50)!r}"
            )
        )
        for index, call in enumerate(calls, 1):
            console.print(Text("    " + call_line(call, index)))


def conversations(console: Console, rows: Sequence[Mapping[str, Any]], total: int, offset: int) -> None:
    if not rows:
        console.print(f"No conversations{' at this offset' if total else ''} ({total} in all).")
        return
    for row in rows:
        console.print(
            Text(row["id"], style="bold cyan")
            + Text(f"  {ago(row.get('updated_at')):>8}  ", style="dim")
            + Text(short(row.get("title") or "(untitled)", 70))
            + (Text(f"  [{row['project']}]", style="magenta") if row.get("project") else Text(""))
        )
    console.print(Text(f"{offset + 1}–{offset + len(rows)} of {total}, newest first", style="dim"))


def _node_label(node: Mapping[str, Any], active_tip: str | None) -> RichText:
    status = node.get("status") or "?"
    label = Text(
        "● " if node.get("active") else "○ ", style="green" if node.get("active") else "dim"
    )
    label += Text(node["id"], style="bold" if node.get("active") else "")
    label += Text(f" [{status}]", style=STATUS_STYLES.get(status, ""))
    if len(node.get("children") or []) > 1:
        label += Text(f" ({len(node['children'])} branches)", style="yellow")
    if node["id"] == active_tip:
        label += Text(" ◀ active", style="bold green")
    label += Text(f"\n{short(node.get('content'), 60)!r}")
    if node.get("response"):
        label += Text(f" → {short(node.get('response'), 60)!r}", style="dim")
    if node.get("tokens"):
        label += Text(f" · {usage_text(node['tokens'], node.get('cost_usd'))}", style="dim")
    return label


def usage_text(tokens: int, cost_usd: float | None) -> str:
    return f"{tokens:,} tokens" + (f" · ${cost_usd:.4f}" if cost_usd is not None else "")


def history(console: Console, tree: Mapping[str, Any]) -> None:
    from rich.tree import Tree

    nodes = {m["id"]: m for m in tree.get("messages") or []}
    root = Tree(
        Text(f"conversation {tree['id']}", style="bold")
        + Text(f"  {short(tree.get('title') or '', 60)}", style="dim")
    )
    active_tip = tree.get("active_message_id")

    def add(parent: Tree, message_id: str) -> None:
        node = nodes[message_id]
        branch = parent.add(_node_label(node, active_tip))
        for child in node.get("children") or []:
            if child in nodes:
                add(branch, child)

    for root_id in tree.get("roots") or []:
        add(root, root_id)
    if not nodes:
        root.add(Text("(no messages)", style="dim"))
    console.print(root, soft_wrap=False)  # wrap long previews inside the tree, never crop
    console.print(Text("● active branch  ○ other branches", style="dim"))
    usage = tree.get("usage") or {}
    if usage.get("messages"):
        total = usage_text(usage["tokens"]["total"], usage.get("cost_usd"))
        console.print(Text(f"conversation: {usage['messages']} messages · {total}", style="dim"))


def event_line(event: Event) -> RichText:
    from .render import summary  # knows every event payload: imported by `events` alone

    return (
        Text(f"{event.event_id:>4}  ", style="dim")
        + Text(f"{event.type:<18}", style="bold")
        + Text(f" {event.agent or '-':<14} ", style="cyan")
        + Text(summary(event))
    )


def gc_report(console: Console, result: Mapping[str, Any]) -> None:
    verb = "would remove" if result.get("dry_run") else "removed"
    finished, abandoned = result.get("finished") or [], result.get("abandoned") or []
    prefix = "(dry run) " if result.get("dry_run") else ""
    console.print(f"{prefix}{verb} the checkpoints of {len(finished)} finished message(s)")
    for message_id in finished:
        console.print(f"  {message_id}")
    console.print(
        f"{prefix}{verb} {len(abandoned)} abandoned message(s) (paused or orphaned too long; "
        f"{'to be ' if result.get('dry_run') else ''}marked failed)"
    )
    for message_id in abandoned:
        console.print(f"  {message_id}")


def artifacts(console: Console, items: Sequence[Mapping[str, Any]]) -> None:
    if not items:
        console.print("No artifacts in this conversation.")
        return
    for item in items:
        console.print(
            Text(item["artifact_id"], style="bold cyan")
            + Text(
                f"  v{item.get('version')}  {item.get('content_type')}  {item.get('size', '?')} chars  "
                f"{ago(item.get('updated_at'))}  ",
                style="dim",
            )
            + Text(short(item.get("title"), 70))
        )


def artifact(console: Console, art: Mapping[str, Any]) -> None:
    console.print(
        Text(f"{art.get('title')}", style="bold")
        + Text(
            f"  ({art['artifact_id']} · version {art['version']} of {art['current_version']} · "
            f"{art.get('content_type')})",
            style="dim",
        )
    )
    console.print(Text(art.get("content") or ""))


def diff(console: Console, text: str, from_version: int, to_version: int | str) -> None:
    if not text:
        console.print(f"No changes between v{from_version} and v{to_version}.")
    elif console.is_terminal:
        from rich.syntax import Syntax

        console.print(Syntax(text, "diff", theme="ansi_dark", background_color="default"))
    else:
        console.print(Text(text), end="")
