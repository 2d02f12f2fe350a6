"""`replay_session`: re-run a recorded session under the current config, offline.

The run is a real one (the compiled graph, the tool node, permissions, checkpoints) in a
sandbox (`sandbox.py`), with the model replaced by `ReplayModel` and every tool by the
`ToolServer` (`serve.py`). Pauses are answered with the recorded decisions. The run goes on
for as long as it asks what the recorded run asked; the first request or tool call without a
recorded twin stops it, and the report names the step and shows the diff.

When the run ends without such a stop, what is left is compared too: recorded requests never
made (the run ended early), pauses the recorded run had and the replay did not (or the other
way round), and the final status, outcome and answer.

`--live-model` (`live=True`) does something else: see `live.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.store.rows import MessageRow
from ..shapes import AskedCall, DecisionInput, RecordedDecision
from .diff import text_diff, unified
from .report import Divergence, DivergenceKind, ReplayReport, Verdict
from .sandbox import sandboxed, seed
from .serve import ReplayModel, ToolServer, Tracker
from .session import Session, read_session

if TYPE_CHECKING:
    from ..core.engine import Engine
    from ..settings import Settings


async def replay_session(
    session: Session | str | Path,
    settings: Settings | None = None,
    *,
    live_model: bool = False,
    extra_tools: list[Any] | None = None,
) -> ReplayReport:
    """Replay a session file (or a loaded `Session`) under `settings` (default: the current
    `load_settings()`); `extra_tools` are the tools a program registers with
    `Client.open(extra_tools=...)`. Never touches the configured data folder.

    Raises `SessionFileError` for a file that cannot be read; a replay that cannot run under
    the current config (e.g. a `ConfigError`) is a `failed` report."""
    path = None if isinstance(session, Session) else str(session)
    loaded = (
        session if isinstance(session, Session) else await asyncio.to_thread(read_session, session)
    )
    if live_model:
        from .live import live_replay

        return await live_replay(loaded, settings, path=path, extra_tools=extra_tools)
    notes: list[str] = []
    try:
        async with sandboxed(loaded, settings, extra_tools=extra_tools, notes=notes) as engine:
            return await _drive(engine, loaded, path, notes)
    except Exception as exc:
        return ReplayReport(path, Verdict.FAILED, len(loaded.calls), error=_reason(exc),
                            notes=notes)


def _reason(exc: BaseException) -> str:
    from ..errors import ArtifactFlowError

    text = str(exc) if isinstance(exc, ArtifactFlowError) else f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())


async def _drive(
    engine: Engine, session: Session, path: str | None, notes: list[str]
) -> ReplayReport:
    tracker = Tracker()
    model = ReplayModel(session, tracker)
    engine.services.use_model(model)
    ToolServer(session, tracker).install(engine.services.tools)
    parent = await seed(engine, session)
    ids = await engine.start(session.task, session.conversation_id, parent)
    message_id = ids["message_id"]
    asked: set[str] = set()
    recorded_asks = session.asked()
    paused_as_recorded = False
    while True:
        if not await _until_done_or_diverged(engine, message_id, tracker):
            await engine.cancel(message_id)
            break
        message = await engine.store.get_message(message_id)
        assert message is not None
        if message["status"] != "waiting":
            break
        pending = (message.get("waiting_for") or {}).get("calls") or []
        asked.update(c["tool_call_id"] for c in pending)
        decisions: dict[str, DecisionInput] = {}
        unanswered = []
        for call in pending:
            decision = session.decision_for(call["tool_call_id"])
            if decision is None:
                unanswered.append(call)
            else:
                decisions[call["tool_call_id"]] = _resume_decision(decision)
        if unanswered and session.status == "waiting" and all(
            c["tool_call_id"] in recorded_asks for c in unanswered
        ):
            paused_as_recorded = True  # the recorded run was exported while paused here
            break
        if unanswered:
            call = unanswered[0]
            tracker.report(
                Divergence(
                    _step_of_call(session, call, model), DivergenceKind.PERMISSION,
                    f"the run asked for approval of {call['tool']} (call {call['tool_call_id']}); "
                    "the recorded run did not ask",
                    call.get("agent"),
                )
            )
            break
        await engine.resume(message_id, decisions)
    final = await engine.store.get_message(message_id)
    assert final is not None
    if not tracker.divergences:
        _after_the_run(session, model, asked, final, paused_as_recorded, tracker)
    _missed_asks(session, asked, tracker)
    first = tracker.first
    verdict = Verdict.SAME if first is None else Verdict.DIVERGED
    return ReplayReport(path, verdict, len(session.calls), tracker.served, first, notes=notes)


async def _until_done_or_diverged(
    engine: Engine, message_id: str, tracker: Tracker
) -> bool:
    """Wait for the run's segment to end (True) or for a divergence (False)."""
    done = asyncio.ensure_future(engine.wait(message_id))
    diverged = asyncio.ensure_future(tracker.diverged.wait())
    try:
        await asyncio.wait({done, diverged}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (done, diverged):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
    return not tracker.diverged.is_set()


def _resume_decision(decision: RecordedDecision) -> DecisionInput:
    out: DecisionInput = {"action": decision.get("action") or "deny"}
    reason = decision.get("reason")
    if reason is not None:
        out["reason"] = reason
    if out["action"] == "edit":
        out["arguments"] = decision.get("arguments") or {}
    return out


def _step_of_call(session: Session, call: AskedCall, model: ReplayModel) -> int:
    """The recorded step whose response made `call` (by its id), else the next one."""
    call_id = call["tool_call_id"]
    for recorded in reversed(session.calls):
        for made in (recorded.response or {}).get("tool_calls") or []:
            if call_id == made.get("id") or call_id.startswith(f"{made.get('id')}_"):
                return recorded.step
    return model.pending[0].step if model.pending else len(session.calls)


def _after_the_run(
    session: Session,
    model: ReplayModel,
    asked: set[str],
    final: MessageRow,
    paused_as_recorded: bool,
    tracker: Tracker,
) -> None:
    if model.pending:
        missing = model.pending[0]
        tracker.report(
            Divergence(
                missing.step, DivergenceKind.ENDED_EARLY,
                f"the run ended ({_ending(final)}) after {tracker.served} of "
                f"{len(session.calls)} model requests; the recorded run went on with "
                f"{missing.agent or 'a model call'}",
                missing.agent,
            )
        )
        return
    if paused_as_recorded:
        return
    recorded = (session.status, session.outcome or None, session.response or "")
    replayed = (final["status"], final.get("outcome") or None, final.get("response") or "")
    if session.status == "cancelled":
        return  # the recorded run was stopped by a person: its end cannot be replayed
    if recorded != replayed:
        diff = text_diff(session.response or "", final.get("response") or "")
        if recorded[:2] != replayed[:2]:
            diff = unified([f"status: {recorded[0]}, outcome: {recorded[1]}"],
                           [f"status: {replayed[0]}, outcome: {replayed[1]}"]) + "\n" + diff
        tracker.report(
            Divergence(
                len(session.calls), DivergenceKind.OUTCOME,
                f"the run ended differently: recorded {_ending_of(session)}, replay "
                f"{_ending(final)}",
                None, diff.strip(),
            )
        )


def _missed_asks(session: Session, asked: set[str], tracker: Tracker) -> None:
    """Pauses of the recorded run that the replay did not have, before where it stopped."""
    stop = tracker.first.step if tracker.first else len(session.calls) + 1
    for call_id, step in sorted(session.asked().items(), key=lambda kv: kv[1] or 0):
        if call_id in asked or (step or 0) >= stop:
            continue
        tool = next((c["tool"] for p in session.permissions for c in p.calls
                     if c["tool_call_id"] == call_id), "?")
        tracker.report(
            Divergence(
                step or len(session.calls), DivergenceKind.PERMISSION,
                f"the recorded run asked for approval of {tool} (call {call_id}); the replay "
                "ran it without asking",
            )
        )
        return


def _ending(message: Mapping[str, Any]) -> str:
    if message["status"] == "failed":
        return f"failed: {message.get('error')}"
    outcome = message.get("outcome")
    return message["status"] + (f", {outcome}" if outcome and outcome != "completed" else "")


def _ending_of(session: Session) -> str:
    return _ending({"status": session.status, "outcome": session.outcome, "error": session.error})
