"""Permission decisions for a paused run: parsed from flags, or asked at the terminal.

Every path produces the CLI's resume format (`{"decisions": ...}`, unwrapped by the session
with `decisions_from_body`); validation of call ids and edited arguments stays in the engine,
which refuses bad data while the run stays paused, so a prompt can simply ask again. Prompts read stdin with `input()`: the caller
suspends its signal handlers first, so Ctrl-C or SIGTERM at a prompt raises `PromptAborted` and
the message stays paused for a later `artifactflow resume`.

Tool-call ids from some servers are long (llama.cpp's are 30+ characters), so every listing of
pending calls numbers them `#1`, `#2`, … in the order shown (the order of the pause), and
`--decision` takes `#1` or `1` as well as the full id (`resolve_call`).
"""

from __future__ import annotations

import json
import os
import select
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypedDict

from ..errors import UserError
from ..shapes import AskedCall, DecisionInput, JsonObject
from .text import Text, short

if TYPE_CHECKING:
    from rich.console import Console

PROMPT = "Decision: [a]pprove, [d]eny, [e]dit arguments, a[l]ways allow this tool: "
CHOICES = {
    "a": "approve",
    "approve": "approve",
    "y": "approve",
    "yes": "approve",
    "d": "deny",
    "deny": "deny",
    "n": "deny",
    "no": "deny",
    "e": "edit",
    "edit": "edit",
    "l": "always",
    "always": "always",
}
FLAG_ACTIONS = ("approve", "deny", "always")


class ResumeData(TypedDict):
    """The CLI's resume format: one word for every call, or a decision per call id."""

    decisions: str | dict[str, DecisionInput]


class PromptAborted(Exception):
    """Ctrl-C or end of input at a prompt: nothing was decided."""


def decisions_from_flags(
    *,
    approve: bool,
    deny: bool,
    always: bool,
    reason: str | None,
    decision: list[str],
    calls: list[AskedCall],
) -> ResumeData | None:
    """Resume data from `resume` flags, or None when no decision flag was given.

    `--decision CALL_ID=ACTION` may repeat and is combined into the mapping form; `--reason`
    goes to every denied call (it needs the pending `calls` for `--deny`).
    """
    given = [
        f"--{name}" for name, on in (("approve", approve), ("deny", deny), ("always", always)) if on
    ]
    if decision:
        given.append("--decision")
    if len(given) > 1:
        raise UserError(
            f"use one of --approve, --deny, --always or --decision (got {', '.join(given)})"
        )
    mapping: dict[str, DecisionInput] = {}
    for spec in decision:
        call_id, sep, action = (part.strip() for part in spec.partition("="))
        if not sep or not call_id or action not in FLAG_ACTIONS:
            raise UserError(f"--decision {spec!r}: expected CALL_ID=approve|deny|always")
        if calls:  # empty when only the flags are checked, before the message is read
            call_id = resolve_call(call_id, calls)
        if call_id in mapping:
            raise UserError(f"--decision: call {call_id} is given twice")
        mapping[call_id] = {"action": action}
        if action == "deny" and reason:
            mapping[call_id]["reason"] = reason
    if reason and not (deny or any(d["action"] == "deny" for d in mapping.values())):
        raise UserError("--reason goes with --deny (or a --decision CALL_ID=deny)")
    if approve:
        return {"decisions": "approve"}
    if always:
        return {"decisions": "always"}
    if deny:
        if not reason:
            return {"decisions": "deny"}
        return {
            "decisions": {c["tool_call_id"]: {"action": "deny", "reason": reason} for c in calls}
        }
    return {"decisions": mapping} if mapping else None


def handle(index: int) -> str:
    """The short name of the `index`-th (from 1) pending call, as listings show it."""
    return f"#{index}"


def resolve_call(given: str, calls: list[AskedCall]) -> str:
    """The tool-call id that `given` names: a full id, or a handle `#N` / `N` (N from 1, in the
    order the calls are shown). Anything else is a `UserError` listing the valid names."""
    ids = [c["tool_call_id"] for c in calls]
    if given in ids:  # a full id wins, even one that looks like a number
        return given
    number = given.removeprefix("#")
    if number.isdigit() and 1 <= int(number) <= len(ids):
        return ids[int(number) - 1]
    valid = ", ".join(f"{handle(i)} ({call_id})" for i, call_id in enumerate(ids, 1))
    raise UserError(f"--decision: no pending tool call {given!r}; pending: {valid or 'none'}")


def call_line(call: Mapping[str, Any], index: int | None = None) -> str:
    number = f"{handle(index)}  " if index is not None else ""
    return (
        f"{number}{call.get('tool_call_id')}  {call.get('tool')}  {short(call.get('arguments'), 120)}"
        f"  (agent {call.get('agent')})"
    )


def print_paused(
    console: Console, message_id: str, calls: list[AskedCall], continue_cmd: str
) -> None:
    """What a non-interactive caller needs to continue later."""
    console.print(
        Text(
            f"⏸ paused: message {message_id} waits for approval of {len(calls)} tool call(s):",
            style="yellow",
        )
    )
    for index, call in enumerate(calls, 1):
        console.print(Text("  " + call_line(call, index)))
    console.print("Continue with:")
    console.print(Text(f"  {continue_cmd}"))
    console.print(
        Text(
            "  (or --deny [--reason TEXT], --always, or --decision #N=approve|deny|always)",
            style="dim",
        )
    )


def show_call(console: Console, call: AskedCall, index: int, total: int) -> None:
    console.print(
        Text(f"{handle(index)} ", style="bold")
        + Text(f"[{index}/{total}] ", style="dim")
        + Text(str(call.get("tool")), style="bold")
        + Text(f"  call {call.get('tool_call_id')} · agent {call.get('agent')}", style="dim")
    )
    arguments = call.get("arguments")
    if isinstance(arguments, dict | list):
        from rich.json import JSON

        console.print(JSON.from_data(arguments, ensure_ascii=False))
    else:
        console.print(Text(str(arguments)))


def ask(console: Console, calls: list[AskedCall]) -> ResumeData:
    """Ask for a decision on each pending call; returns resume data in the mapping form."""
    console.print(Text(f"⏸ {len(calls)} tool call(s) need your approval:", style="yellow"))
    decisions: dict[str, DecisionInput] = {}
    for index, call in enumerate(calls, 1):
        show_call(console, call, index, len(calls))
        decisions[call["tool_call_id"]] = _ask_one(console, call)
    return {"decisions": decisions}


def _input(console: Console, prompt: str) -> str:
    try:
        console.print(Text(prompt, style="bold"), end="")
        _wait_for_line()
        return console.input()
    except (KeyboardInterrupt, EOFError):
        console.print()
        raise PromptAborted() from None


def _wait_for_line() -> None:
    """Return once the terminal has a line for `input()`.

    `input()` blocks in C: a Ctrl-C or SIGTERM that lands just before it would only be acted
    on after the next Enter. Waiting here in short `select` slices lets the pending signal
    raise between them. A terminal in canonical mode hands `input()` one line per read, so
    nothing typed ahead sits in a buffer that `select` cannot see.
    """
    if os.name != "posix":  # select() takes sockets only on Windows
        return
    try:
        fd = sys.stdin.fileno()
        if not os.isatty(fd):
            return
    except (AttributeError, ValueError, OSError):
        return
    while not select.select([fd], [], [], 0.1)[0]:
        pass


def _ask_one(console: Console, call: AskedCall) -> DecisionInput:
    while True:
        action = CHOICES.get(_input(console, PROMPT).strip().lower())
        if action is None:
            console.print("Please answer a, d, e or l.")
        elif action == "deny":
            reason = _input(console, "Reason, passed to the model (Enter for none): ").strip()
            return {"action": "deny", "reason": reason or None}
        elif action == "edit":
            return {"action": "edit", "arguments": _ask_arguments(console, call)}
        else:
            return {"action": action}


def _ask_arguments(console: Console, call: AskedCall) -> JsonObject:
    while True:
        raw = _input(console, "New arguments as one line of JSON (Enter keeps them): ").strip()
        if not raw and isinstance(call.get("arguments"), dict):
            return dict(call["arguments"])
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            console.print(
                Text(f"Not valid JSON ({exc.msg} at column {exc.colno}); try again.", style="red")
            )
            continue
        if isinstance(value, dict):
            return value
        console.print(
            Text('The arguments must be a JSON object, e.g. {"text": "hi"}.', style="red")
        )
