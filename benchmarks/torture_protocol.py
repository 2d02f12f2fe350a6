"""Torture on the Agent Protocol (issue 34): SIGKILL of `serve` at every step of a protocol run,
and racing resumes and cancels across workers. Driven by torture.py (`--protocol-kills`,
`--protocol-pairs`, `--protocol-cancels`); written against the public HTTP surface only.

A kill trial makes one thread on a random live server (the victim) and kills it (SIGKILL) at
one step: `start` (a background run in flight or just accepted), `stream` (mid-stream),
`interrupt` (paused for approval), `resume` (right after a `command` resume was sent),
`after_tool` (the approved tool has written its effect), `join` (a client joined), the
multitask strategies `enqueue` / `interrupt_strategy` / `rollback` (a second run sent while a
slow first one runs), and `memory` (around a `memory_save`). A streaming client reconnects at
once to a surviving server (or the restarted one) with `Last-Event-ID`, as a browser would;
then the thread is driven to its end there (pauses approved). Judged, per trial:

- duplicate effects: a journal line or a memory written twice (and effects lost: a completed
  `task` message whose tool never wrote its line);
- lost events: stored event ids not 1..n, a status that disagrees with the last event, a
  streaming client whose event ids have a gap or that never got the final event;
- stuck threads (still `busy` after the ceiling) and stuck runs (a run not ended).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import sqlalchemy as sa
from killable_serve import Seen, Serve, read_sse

from artifactflow.core.store import schema as t

LEAD = "lead_agent"
STEPS = (
    "start",
    "stream",
    "interrupt",
    "resume",
    "after_tool",
    "join",
    "enqueue",
    "interrupt_strategy",
    "rollback",
    "memory",
)
STRATEGY = {"enqueue": "enqueue", "interrupt_strategy": "interrupt", "rollback": "rollback"}
LAST_EVENT = {
    "completed": "complete",
    "cancelled": "cancelled",
    "failed": "error",
    "waiting": "permission_request",
}
SETTLE_SECONDS = 90.0  # a thread not settled by then is stuck (recovery needs about a lease)


def memory_text(token: str) -> str:
    return f"The torture fact {token} is remembered exactly once"


@dataclass
class ProtocolTally:
    trials: int = 0
    steps: Counter[str] = field(default_factory=Counter)
    recovered_by: Counter[str] = field(default_factory=Counter)
    duplicates: int = 0
    effects_lost: int = 0
    lost_events: int = 0
    client_lost_events: int = 0
    stuck_threads: int = 0
    stuck_runs: int = 0
    errors_5xx: int = 0
    settle_seconds: list[float] = field(default_factory=list)
    slowest: str = ""
    # racing pairs
    wrong: int = 0
    accepted: int = 0
    refused: int = 0
    tool_after_cancel: int = 0
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if len(self.notes) < 8:
            self.notes.append(text[:220])


def body(text: str | None = None, *, strategy: str | None = None) -> dict[str, Any]:
    """A run request: `text` a new input, None a resume approving the pause."""
    out: dict[str, Any] = {"assistant_id": LEAD, "stream_mode": ["values", "custom"]}
    if text is None:
        out["command"] = {"resume": {"decisions": [{"type": "approve"}]}}
    else:
        out["input"] = {"messages": [{"role": "user", "content": text}]}
    if strategy:
        out["multitask_strategy"] = strategy
    return out


class Http:
    """Requests that count 5xx answers; a connection error (a killed server) is None."""

    def __init__(self, client: httpx.AsyncClient, tally: ProtocolTally) -> None:
        self.c, self.tally = client, tally

    def judge(self, response: httpx.Response, what: str) -> httpx.Response:
        if response.status_code >= 500:
            self.tally.errors_5xx += 1
            self.tally.note(f"{what} answered {response.status_code}: {response.text[:100]}")
        return response

    async def call(self, method: str, url: str, **kw: Any) -> httpx.Response | None:
        try:
            return self.judge(await self.c.request(method, url, **kw), f"{method} {url[-40:]}")
        except httpx.HTTPError:
            return None

    async def stream(
        self,
        url: str,
        payload: dict[str, Any] | None,
        seen: Seen,
        stop: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Read an SSE stream into `seen` until its end, or until `stop(name, data)` is true;
        a cut connection ends it too."""
        method = "GET" if payload is None else "POST"
        with contextlib.suppress(httpx.HTTPError):
            async with self.c.stream(method, url, json=payload, headers=headers) as response:
                if response.status_code >= 400:
                    await response.aread()
                    self.judge(response, f"stream {url[-40:]}")
                    return
                async for name, data in read_sse(response, seen):
                    if stop is not None and stop(name, data):
                        return


def at_event(*types: str) -> Any:
    return lambda name, data: (
        name == "custom" and isinstance(data, dict) and data.get("type") in types
    )


async def drive(http: Http, base: str, tid: str) -> str:
    """The thread brought to its end through `base`: pauses approved; its last status."""
    status, approvals, deadline = "?", 0, time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        r = await http.call("GET", f"{base}/threads/{tid}")
        status = r.json().get("status", "?") if r is not None and r.status_code == 200 else "?"
        if status == "interrupted" and approvals < 4:
            approvals += 1
            answer = await http.call("POST", f"{base}/threads/{tid}/runs", json=body())
            if answer is not None and answer.status_code == 409:
                return status  # the head was cancelled, not paused: nothing to approve
            continue
        if status in ("idle", "error", "interrupted"):
            return status
        await asyncio.sleep(0.1)
    return status


async def act(
    step: str, http: Http, v: str, token: str, token2: str, seen: Seen, w: Any, rng: random.Random
) -> list[asyncio.Task[Any]]:
    """Take the run to `step` on the victim (thread URL `v`); requests left in flight."""
    pending: list[asyncio.Task[Any]] = []
    if step == "start":
        pending.append(
            asyncio.create_task(http.call("POST", f"{v}/runs", json=body(f"task {token}")))
        )
        await asyncio.sleep(rng.uniform(0, 0.4))
    elif step in ("stream", "memory"):
        prefix = "memory" if step == "memory" else "task"
        stops = (
            ["llm_complete", "tool_start", "tool_complete"]
            if step == "memory"
            else ["agent_start", "llm_complete", "tool_start"]
        )
        await http.stream(
            f"{v}/runs/stream", body(f"{prefix} {token}"), seen, at_event(rng.choice(stops))
        )
        await asyncio.sleep(rng.uniform(0, 0.05))
    elif step in ("interrupt", "resume", "after_tool"):
        await http.stream(f"{v}/runs/stream", body(f"task {token}"), Seen())  # to the pause
        if step == "resume":
            pending.append(asyncio.create_task(http.call("POST", f"{v}/runs", json=body())))
            await asyncio.sleep(rng.uniform(0, 0.05))
        elif step == "after_tool":
            reader = asyncio.create_task(http.stream(f"{v}/runs/stream", body(), seen))
            pending.append(reader)
            for _ in range(1000):
                if w.journal_count(token) or reader.done():
                    break
                await asyncio.sleep(0.005)
            await asyncio.sleep(rng.uniform(0, 0.25))  # mid-tool, after it, or the next model call
    elif step == "join":
        r = await http.call("POST", f"{v}/runs", json=body(f"task {token}"))
        if r is not None and r.status_code == 200:
            pending.append(
                asyncio.create_task(http.call("GET", f"{v}/runs/{r.json()['run_id']}/join"))
            )
        await asyncio.sleep(rng.uniform(0.05, 0.6))
    else:
        await http.call("POST", f"{v}/runs", json=body(f"slow {token}"))
        await asyncio.sleep(rng.uniform(0.1, 0.4))  # inside the slow first model call
        second = body(f"task {token2}", strategy=STRATEGY[step])
        pending.append(asyncio.create_task(http.call("POST", f"{v}/runs", json=second)))
        await asyncio.sleep(rng.uniform(0, 0.3))
    return pending


async def kill_trial(
    w: Any, servers: list[Serve], step: str, rng: random.Random, tally: ProtocolTally
) -> None:
    tally.trials += 1
    tally.steps[step] += 1
    victim = rng.choice([s for s in servers if s.alive])
    token, token2 = "T" + uuid.uuid4().hex[:10], "T" + uuid.uuid4().hex[:10]
    seen = Seen()
    async with httpx.AsyncClient(timeout=120) as client:
        http = Http(client, tally)
        made = await http.call("POST", f"{victim.base}/threads", json={})
        assert made is not None and made.status_code == 200, made
        tid = made.json()["thread_id"]
        pending = await act(step, http, f"{victim.base}/threads/{tid}", token, token2, seen, w, rng)
        victim.kill()
        killed = time.monotonic()
        await asyncio.gather(*pending, return_exceptions=True)
        survivors = [s for s in servers if s.alive]
        if not survivors:  # one worker: the restarted server recovers
            victim.start()
            survivors = [victim]
        tally.recovered_by["survivor" if victim not in survivors else "restart"] += 1
        base = survivors[0].base
        if seen.run_id and seen.last_id:  # the streaming client reconnects where it was
            await http.stream(
                f"{base}/threads/{tid}/runs/{seen.run_id}/stream",
                None,
                seen,
                headers={"Last-Event-ID": seen.last_id},
            )
        status = await drive(http, base, tid)
        tally.settle_seconds.append(time.monotonic() - killed)
        if tally.settle_seconds[-1] == max(tally.settle_seconds):
            tally.slowest = f"{step} ({status})"
        if status == "busy" or status == "?":
            tally.stuck_threads += 1
            tally.note(f"{step}: thread stuck {status}")
        runs = await http.call("GET", f"{base}/threads/{tid}/runs", params={"limit": 100})
        for run in runs.json() if runs is not None and runs.status_code == 200 else []:
            if run["status"] in ("pending", "running"):
                tally.stuck_runs += 1
                tally.note(f"{step}: run {run['run_id'][:8]} stuck {run['status']}")
        if not victim.alive:
            victim.start()
        await judge(w, step, tid, seen, (token, token2), tally)


async def judge(
    w: Any, step: str, tid: str, seen: Seen, tokens: tuple[str, ...], tally: ProtocolTally
) -> None:
    messages = [dict(m) for m in await w.client.conversations.messages(tid)]
    lost = False
    for message in messages:
        events = await w.client.runs.events(message["id"])
        ids = [e.event_id for e in events]
        last = events[-1].type if events else None
        if ids != list(range(1, len(ids) + 1)) or (
            message["status"] in LAST_EVENT and last != LAST_EVENT[message["status"]]
        ):
            lost = True
            tally.note(f"{step}: message {message['status']}, event ids {ids[-4:]}, last {last}")
        if message["status"] == "completed" and str(message["content"]).startswith("task "):
            token = str(message["content"]).split()[1]
            if w.journal_count(token) == 0:
                tally.effects_lost += 1
                tally.note(f"{step}: {token} completed without its effect")
        if seen.run_id and message["id"] == await run_message(w, seen.run_id):
            cursor = await run_cursor(w, seen.run_id)
            end = next(
                (
                    e.event_id
                    for e in events
                    if e.event_id > cursor and e.type in LAST_EVENT.values()
                ),
                ids[-1] if ids else 0,
            )
            expected = [
                e.event_id for e in events if cursor < e.event_id <= end and e.type != "metadata"
            ]
            problems = seen.problems(expected)
            if problems:
                tally.client_lost_events += 1
                tally.note(f"{step}: streaming client: {'; '.join(problems)}")
    tally.lost_events += int(lost)
    twice = [tok for tok in tokens if w.journal_count(tok) > 1]
    if step == "memory":
        async with w.client.admin.store.engine.connect() as conn:
            saved = (
                await conn.execute(
                    sa.select(sa.func.count())
                    .select_from(t.memories)
                    .where(t.memories.c.text == memory_text(tokens[0]))
                )
            ).scalar_one()
        if saved > 1:
            twice.append(f"memory x{saved}")
    if twice:
        tally.duplicates += 1
        tally.note(f"{step}: effect twice: {twice}")


async def run_message(w: Any, run_id: str) -> str | None:
    row = await w.client.admin.store.fetch_rows(
        sa.select(t.ap_runs.c.message_id).where(t.ap_runs.c.run_id == run_id)
    )
    return row[0]["message_id"] if row else None


async def run_cursor(w: Any, run_id: str) -> int:
    row = await w.client.admin.store.fetch_rows(
        sa.select(t.ap_runs.c.cursor).where(t.ap_runs.c.run_id == run_id)
    )
    return int(row[0]["cursor"] or 0) if row else 0


async def protocol_kills(
    w: Any, servers: list[Serve], count: int, rng: random.Random, label: str
) -> ProtocolTally:
    """`count` kills, the steps taken in turn (every step as often as the count allows)."""
    tally = ProtocolTally()
    for i in range(count):
        await kill_trial(w, servers, STEPS[i % len(STEPS)], rng, tally)
        print(f"\r{label}: protocol kills {i + 1}/{count}   ", end="", flush=True, file=sys.stderr)
    return tally


# --- racing pairs ------------------------------------------------------------------------------


async def paused_thread(base: str, token: str, http: Http) -> str | None:
    made = await http.call("POST", f"{base}/threads", json={})
    if made is None or made.status_code != 200:
        return None
    tid = made.json()["thread_id"]
    await http.call("POST", f"{base}/threads/{tid}/runs/wait", json=body(f"task {token}"))
    state = await http.call("GET", f"{base}/threads/{tid}")
    return tid if state is not None and state.json().get("status") == "interrupted" else None


async def settled(http: Http, base: str, tid: str, tally: ProtocolTally, token: str) -> str:
    status = "?"
    for _ in range(int(SETTLE_SECONDS / 0.05)):
        r = await http.call("GET", f"{base}/threads/{tid}")
        status = r.json().get("status", "?") if r is not None else "?"
        if status != "busy":
            break
        await asyncio.sleep(0.05)
    else:
        tally.stuck_threads += 1
        tally.note(f"{token}: thread stuck {status}")
    return status


@contextlib.asynccontextmanager
async def paused_trial(
    bases: list[str], rng: random.Random, tally: ProtocolTally
) -> AsyncIterator[tuple[str, Http, str | None]]:
    """One racing trial: its token, an HTTP client that counts 5xx, and a thread paused for
    approval on a random server (None, counted wrong, when it did not pause)."""
    token = "T" + uuid.uuid4().hex[:10]
    tally.trials += 1
    async with httpx.AsyncClient(timeout=120) as client:
        http = Http(client, tally)
        tid = await paused_thread(rng.choice(bases), token, http)
        if tid is None:
            tally.wrong += 1
            tally.note(f"{token}: the thread did not pause")
        yield token, http, tid


async def resume_pair(w: Any, bases: list[str], rng: random.Random, tally: ProtocolTally) -> None:
    """Two resumes of one paused thread at the same instant, each to a random server: one
    accepted, one 409; the approved effect once; the thread ends idle."""
    async with paused_trial(bases, rng, tally) as (token, http, tid):
        if tid is None:
            return
        answers = await asyncio.gather(
            *(
                http.call("POST", f"{rng.choice(bases)}/threads/{tid}/runs", json=body())
                for _ in range(2)
            )
        )
        codes = sorted(a.status_code if a is not None else 0 for a in answers)
        if codes == [200, 409]:
            tally.accepted += 1
            tally.refused += 1
        else:
            tally.wrong += 1
            tally.note(f"{token}: resumes answered {codes}")
        status = await settled(http, bases[0], tid, tally, token)
        if status != "idle" or w.journal_count(token) != 1:
            tally.wrong += 1
            tally.duplicates += int(w.journal_count(token) > 1)
            tally.note(f"{token}: ended {status}, effect x{w.journal_count(token)}")


async def cancel_pair(w: Any, bases: list[str], rng: random.Random, tally: ProtocolTally) -> None:
    """A resume sent to one server while a client on another cancels the run it starts, as
    soon as that run is listed: one winner. Cancel accepted (202): the run ends `interrupted`
    and its message `cancelled`; cancel refused (404, the run had ended): the run succeeded and
    the effect happened once. Never both, never neither; the effect never twice."""
    async with paused_trial(bases, rng, tally) as (token, http, tid):
        if tid is None:
            return
        before = await http.call("GET", f"{bases[0]}/threads/{tid}/runs")
        old = {r["run_id"] for r in (before.json() if before is not None else [])}
        resume_at, cancel_at = rng.sample(bases, 2) if len(bases) > 1 else (bases[0], bases[0])

        async def cancel() -> tuple[str | None, int]:
            for _ in range(4000):
                listed = await http.call("GET", f"{cancel_at}/threads/{tid}/runs")
                new = [
                    r
                    for r in (listed.json() if listed is not None else [])
                    if r["run_id"] not in old
                ]
                if new:
                    answer = await http.call(
                        "POST", f"{cancel_at}/threads/{tid}/runs/{new[0]['run_id']}/cancel"
                    )
                    return new[0]["run_id"], answer.status_code if answer is not None else 0
                await asyncio.sleep(0.002)
            return None, 0

        resumed, (run_id, code) = await asyncio.gather(
            http.call("POST", f"{resume_at}/threads/{tid}/runs", json=body()), cancel()
        )
        await settled(http, bases[0], tid, tally, token)
        run = await http.call("GET", f"{bases[0]}/threads/{tid}/runs/{run_id}") if run_id else None
        final = run.json().get("status") if run is not None and run.status_code == 200 else None
        effect = w.journal_count(token)
        if resumed is None or resumed.status_code != 200 or final is None:
            tally.wrong += 1
            tally.note(f"{token}: resume {resumed and resumed.status_code}, run {final}")
        elif code == 202 and final == "interrupted":
            tally.accepted += 1
            tally.tool_after_cancel += int(effect > 0)
        elif code == 404 and final == "success" and effect == 1:
            tally.refused += 1
        else:
            tally.wrong += 1
            tally.note(f"{token}: cancel {code}, run ended {final}, effect x{effect}")
        if effect > 1:
            tally.duplicates += 1


def tables(rows: list[tuple[str, ProtocolTally]]) -> list[str]:
    lines: list[str] = []
    kills = [(n, x) for n, x in rows if "kills" in n]
    if kills:
        lines += [
            "",
            "| protocol kills | kills | by step | recovered by | duplicate effects | effects lost "
            "| lost events (stored) | lost events (client) | stuck threads | stuck runs | 5xx | max settle s |",
            "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name, x in kills:
            steps = " ".join(f"{s}:{x.steps[s]}" for s in STEPS if x.steps[s])
            by = " ".join(f"{k}:{v}" for k, v in x.recovered_by.items())
            worst = f"{max(x.settle_seconds):.1f} {x.slowest}" if x.settle_seconds else "—"
            lines.append(
                f"| {name} | {x.trials} | {steps} | {by} | {x.duplicates} | {x.effects_lost} | {x.lost_events} "
                f"| {x.client_lost_events} | {x.stuck_threads} | {x.stuck_runs} | {x.errors_5xx} | {worst} |"
            )
    pairs = [(n, x) for n, x in rows if "kills" not in n]
    if pairs:
        lines += [
            "",
            "| protocol races | pairs | first won (resume 200 / cancel 202) | second won (409 / 404) "
            "| wrong | duplicate effects | cancel accepted, tool ran | stuck threads | 5xx |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name, x in pairs:
            lines.append(
                f"| {name} | {x.trials} | {x.accepted} | {x.refused} | {x.wrong} | {x.duplicates} "
                f"| {x.tool_after_cancel} | {x.stuck_threads} | {x.errors_5xx} |"
            )
    return lines
