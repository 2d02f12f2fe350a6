"""Torture: random SIGKILLs and racing resume/cancel pairs, on SQLite and PostgreSQL.

Two scenarios per backend, each message writing one journal line per executed side effect:

- **kills**: `artifactflow run "task T" --yes --json` (the real console script) is SIGKILLed at
  a random point: at an event (the first model answer, the pause, the approval, mid-tool
  after the side effect, after the tool, the second model call) or after a random delay.
  This process then recovers the message (an expired lease is simulated by clearing it; a
  pause is approved) until it ends.
- **pairs**: two `artifactflow serve` processes on the same data; a message is paused, then a
  resume and a cancel are sent at the same instant (threads released by a barrier), each to a
  random one of the two servers.

Counted: resumable % (killed messages that could be brought to `completed`), duplicate side
effects (a journal line written twice), wrong final states (stuck `running`, `failed`, a cancel
that answered `cancelled: true` for a message that did not end cancelled, a pause asked twice,
a status that disagrees with the last event), 5xx answers, and event-id gaps (ids not 1..n).
All 0 is the target.

Also reported: for the pairs, how each cancel was answered (accepted, refused with 409, dropped:
answered without effect or conflict, or accepted and not ended cancelled) and the slowest cancel;
with `--approval-kills N`, N more kills right after an approval, counting approvals asked again
and calls whose `tool_start` was logged twice; with `--memory-kills N`, N kills around a memory
write (`memory_save`), counting memories saved twice or lost from a completed run; with
`--protocol-pairs N`, N paused threads each resumed twice at once through the Agent Protocol
across the `--workers` servers: one accepted, one 409, the effect once; with
`--protocol-cancels N`, a resume racing a cancel of the run it starts (one winner); with
`--protocol-kills N`, N SIGKILLs of `serve` at every step of a protocol run (torture_protocol.py:
start, stream, interrupt, resume, after the tool, join, the multitask strategies, a memory
write), counting duplicate effects, lost events and stuck threads. Every kill scenario also
counts calls whose `tool_complete` was logged twice.

Run: `python benchmarks/torture.py [--kills 50] [--pairs 100] [--approval-kills 30] [--backends sqlite,postgres]`
Protocol only: `python benchmarks/torture.py --kills 0 --pairs 0 --protocol-kills 50 --protocol-pairs 50
--protocol-cancels 50 --backends sqlite,pg --workers 2`
(PostgreSQL: `ARTIFACTFLOW_TEST_PG_URL`, default postgresql://postgres@127.0.0.1:5432/test;
a fresh database is created and dropped).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import signal
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from killable_serve import fleet  # noqa: E402
from scripted_llm import ScriptedLLM  # noqa: E402
from torture_pairs import judge_pair, pair_trial, servers  # noqa: E402
from torture_protocol import ProtocolTally, cancel_pair, memory_text, protocol_kills, resume_pair  # noqa: E402
from torture_protocol import tables as protocol_tables  # noqa: E402
from torture_world import ARTIFACTFLOW, Tally, World, route, world  # noqa: E402

from artifactflow import Resume  # noqa: E402
from artifactflow.core.store import schema as t  # noqa: E402

KILL_POINTS = [
    ("llm_complete", 0.0),
    ("permission_request", 0.0),
    ("permission_result", 0.0),
    ("tool_start", 0.08),  # mid-tool, after the effect
    ("tool_complete", 0.0),
    ("agent_start#2", 0.0),
    ("timed", None),
]
# Right after an approval (issue 22, D5): the decision must survive, and the log stay single.
AFTER_APPROVAL = [
    ("permission_result", 0.0),
    ("permission_result", 0.01),
    ("permission_result", 0.03),
    ("tool_start", 0.0),
    ("tool_start", 0.08),
    ("tool_complete", 0.0),
]


# --- kills -------------------------------------------------------------------------------------


async def kill_trial(
    w: World, rng: random.Random, tally: Tally, points: list[Any] = KILL_POINTS, prefix: str = "task"
) -> None:
    """`prefix` "memory": the run's side effect is a `memory_save` (judged by `judge_memory`)."""
    token = "T" + uuid.uuid4().hex[:10]
    point, delay = rng.choice(points)
    proc = await asyncio.create_subprocess_exec(
        ARTIFACTFLOW,
        "--config-dir",
        str(w.config),
        "--data-dir",
        str(w.data),
        "run",
        f"{prefix} {token}",
        "--yes",
        "--json",
        env=w.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    seen: Counter[str] = Counter()

    async def until_point() -> None:
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            try:
                kind = json.loads(line).get("type")
            except ValueError:
                continue
            seen[kind] += 1
            name, _, nth = point.partition("#")
            if kind == name and seen[kind] == int(nth or 1):
                if delay:
                    await asyncio.sleep(delay)
                return
        raise EOFError

    try:
        if point == "timed":
            await asyncio.wait_for(until_point(), rng.uniform(0.5, 4.0))
        else:
            await asyncio.wait_for(until_point(), 60)
    except (TimeoutError, EOFError):
        pass
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGKILL)
    await proc.wait()
    tally.trials += 1
    message = await w.message_for(token, prefix)
    if message is None:
        tally.not_started += 1
        return
    for _ in range(6):
        message = await w.client.admin.store.get_message(message["id"])
        assert message is not None
        if message["status"] in ("completed", "failed", "cancelled"):
            break
        if message["status"] == "running":
            await w.client.admin.store.update_message(message["id"], lease_expires_at=0.0)
        try:
            await w.client.run(Resume(message["id"], "approve"))
        except Exception as exc:
            tally.note(f"{point}: recovery raised {type(exc).__name__}: {exc}"[:200])
            break
    message = await w.client.admin.store.get_message(message["id"])
    assert message is not None
    if message["status"] == "completed":
        tally.resumable += 1
    good = await w.check_log(message, tally, one_pause=False) and message["status"] == "completed"
    events = await w.client.runs.events(message["id"])
    approved = "permission_result" in seen
    if approved and sum(1 for e in events if e.type == "permission_request") > 1:
        tally.reasked += 1
        tally.note(f"{point}+{delay}: approval asked again after the kill")
    starts = Counter(e.data.tool_call_id for e in events if e.type == "tool_start")  # type: ignore[union-attr]
    if any(n > 1 for n in starts.values()):
        tally.double_starts += 1
        tally.note(f"{point}+{delay}: tool_start logged {max(starts.values())} times for one call")
    completes = Counter(e.data.tool_call_id for e in events if e.type == "tool_complete")  # type: ignore[union-attr]
    if any(n > 1 for n in completes.values()):
        tally.double_completes += 1
        tally.note(f"{point}+{delay}: tool_complete logged {max(completes.values())} times for one call")
    if message["status"] != "completed":
        tally.note(f"{point}: ended {message['status']}: {message.get('error')}"[:200])
    if prefix == "memory":
        await judge_memory(w, token, message["status"], point, tally)
    if w.journal_count(token) > 1:
        tally.duplicates += 1
        tally.note(f"{point}: side effect ran {w.journal_count(token)} times")
    if not good:
        tally.wrong += 1


async def judge_memory(w: World, token: str, status: str, point: str, tally: Tally) -> None:
    """A memory write cut by a kill is stored once: never twice, never lost from a completed run."""
    async with w.client.admin.store.engine.connect() as conn:
        saved = (
            await conn.execute(
                sa.select(sa.func.count()).select_from(t.memories).where(t.memories.c.text == memory_text(token))
            )
        ).scalar_one()
    if saved > 1:
        tally.memory_duplicates += 1
        tally.note(f"{point}: memory saved {saved} times")
    if saved == 0 and status == "completed":
        tally.memory_lost += 1
        tally.note(f"{point}: the run completed but its memory is not stored")


# Around the memory write: as the tool starts, after its result, as the next model call starts.
MEMORY_POINTS = [
    ("llm_complete", 0.0),
    ("tool_start", 0.0),
    ("tool_start", 0.02),
    ("tool_complete", 0.0),
    ("tool_complete", 0.01),
    ("agent_start#2", 0.0),
    ("timed", None),
]



# --- main --------------------------------------------------------------------------------------


async def run_backend(
    backend: str, kills: int, pairs: int, seed: int, llm: ScriptedLLM, approval_kills: int = 0,
    memory_kills: int = 0, protocol_pairs: int = 0, protocol_kills: int = 0, protocol_cancels: int = 0,
    workers: int = 2,
) -> list[tuple[str, Any]]:
    rng = random.Random(seed)
    rows: list[tuple[str, Any]] = []
    async with world(backend, llm) as w:
        tally = Tally()
        for i in range(kills):
            await kill_trial(w, rng, tally)
            print(f"\r{backend}: kills {i + 1}/{kills}", end="", file=sys.stderr, flush=True)
        rows.append((f"{backend} kills", tally))
        if approval_kills:
            tally = Tally()
            for i in range(approval_kills):
                await kill_trial(w, rng, tally, AFTER_APPROVAL)
                print(
                    f"\r{backend}: kills after approval {i + 1}/{approval_kills}",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
            rows.append((f"{backend} kills after approval", tally))
        if memory_kills:
            tally = Tally()
            for i in range(memory_kills):
                await kill_trial(w, rng, tally, MEMORY_POINTS, prefix="memory")
                print(f"\r{backend}: memory kills {i + 1}/{memory_kills}", end="", file=sys.stderr, flush=True)
            rows.append((f"{backend} memory-write kills", tally))
        if pairs:
            tally = Tally()
            with servers(w) as urls:
                for i in range(pairs):
                    mid, info = await asyncio.to_thread(pair_trial, w, urls, rng, tally)
                    await judge_pair(w, mid, info, tally)
                    print(
                        f"\r{backend}: pairs {i + 1}/{pairs}   ",
                        end="",
                        file=sys.stderr,
                        flush=True,
                    )
            rows.append((f"{backend} resume/cancel pairs", tally))
        if protocol_pairs or protocol_kills or protocol_cancels:
            protocol_rows = await run_protocol(w, rng, workers, protocol_kills, protocol_pairs, protocol_cancels)
            rows += [(f"{backend} {name}", tally) for name, tally in protocol_rows]
        print(file=sys.stderr)
    return rows


async def run_protocol(
    w: World, rng: random.Random, workers: int, kills: int, pairs: int, cancels: int
) -> list[tuple[str, ProtocolTally]]:
    """The Agent Protocol scenarios (torture_protocol.py) on `workers` `serve` processes."""
    rows = []
    with fleet(ARTIFACTFLOW, w.config, w.data, w.env, workers) as fleet_servers:
        if kills:
            label = f"{w.backend} x{workers}"
            rows.append((f"protocol kills ({workers} workers)", await protocol_kills(w, fleet_servers, kills, rng, label)))
        bases = [s.base for s in fleet_servers]
        for count, trial, name in ((pairs, resume_pair, "resume/resume"), (cancels, cancel_pair, "resume/cancel")):
            if not count:
                continue
            tally = ProtocolTally()
            for i in range(count):
                await trial(w, bases, rng, tally)
                print(f"\r{w.backend}: protocol {name} pairs {i + 1}/{count}   ", end="", file=sys.stderr, flush=True)
            rows.append((f"protocol {name} pairs ({workers} workers)", tally))
    return rows


def table(all_rows: list[tuple[str, Any]]) -> str:
    rows: list[tuple[str, Tally]] = [(n, x) for n, x in all_rows if isinstance(x, Tally)]
    head = (
        "| scenario | trials | resumable % | duplicate side effects | wrong final states "
        "| 5xx | event-id gaps |\n|---|---:|---:|---:|---:|---:|---:|"
    )
    lines = [head]
    for name, tally in rows:
        started = tally.trials - tally.not_started
        if "kills" in name:
            pct = f"{100 * tally.resumable / started:.0f}" if started else "—"
            if tally.not_started:
                pct += f" (of {started}; {tally.not_started} killed before the message existed)"
            fivexx = "—"
        else:
            pct, fivexx = "—", str(tally.errors_5xx)
        lines.append(
            f"| {name} | {tally.trials} | {pct} | {tally.duplicates} | {tally.wrong} "
            f"| {fivexx} | {tally.gaps} |"
        )
    approvals = [(name, tally) for name, tally in rows if "after approval" in name]
    if approvals:
        lines += [
            "",
            "| kills right after an approval | kills | approval asked again "
            "| calls with two tool_start |",
            "|---|---:|---:|---:|",
        ]
        for name, tally in approvals:
            lines.append(f"| {name} | {tally.trials} | {tally.reasked} | {tally.double_starts} |")
    killed = [(name, tally) for name, tally in rows if "kills" in name]
    if killed:
        lines += [
            "",
            "| kills | trials | calls with two tool_complete | memories saved twice "
            "| memories lost from a completed run |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, tally in killed:
            memory = "memory" in name
            lines.append(
                f"| {name} | {tally.trials} | {tally.double_completes} "
                f"| {tally.memory_duplicates if memory else '—'} | {tally.memory_lost if memory else '—'} |"
            )
    races = [(name, tally) for name, tally in rows if "pairs" in name]
    if races:
        lines += [
            "",
            "| resume-vs-cancel races | pairs | cancel accepted | refused (409) | dropped "
            "| accepted, tool ran anyway | max cancel latency s |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for name, tally in races:
            worst = f"{max(tally.cancel_seconds):.2f}" if tally.cancel_seconds else "—"
            lines.append(
                f"| {name} | {tally.trials} | {tally.accepted} | {tally.refused} | {tally.dropped} "
                f"| {tally.tool_after_cancel} | {worst} |"
            )
    lines += protocol_tables([(n, x) for n, x in all_rows if isinstance(x, ProtocolTally)])
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument(
        "--approval-kills",
        type=int,
        default=0,
        help="extra kills right after an approval (asked again? tool_start twice?)",
    )
    parser.add_argument(
        "--memory-kills",
        type=int,
        default=0,
        help="kills around a memory write (memory_save): saved twice? lost?",
    )
    parser.add_argument(
        "--protocol-pairs",
        type=int,
        default=0,
        help="two Agent Protocol resumes of one paused thread at once, across the servers",
    )
    parser.add_argument(
        "--protocol-cancels",
        type=int,
        default=0,
        help="an Agent Protocol resume racing a cancel of the run it starts, across the servers",
    )
    parser.add_argument(
        "--protocol-kills",
        type=int,
        default=0,
        help="SIGKILL of `serve` at every step of a protocol run (torture_protocol.STEPS)",
    )
    parser.add_argument("--workers", type=int, default=2, help="serve processes for the protocol scenarios")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args()
    rows: list[tuple[str, Any]] = []
    with ScriptedLLM() as llm:
        llm.route(route)
        for backend in args.backends.split(","):
            rows += await run_backend(
                {"pg": "postgres"}.get(backend.strip(), backend.strip()), args.kills, args.pairs,
                args.seed, llm, args.approval_kills, args.memory_kills, args.protocol_pairs,
                args.protocol_kills, args.protocol_cancels, args.workers,
            )
    print(table(rows))
    for name, tally in rows:
        for note in tally.notes:
            print(f"  {name}: {note}")


if __name__ == "__main__":
    asyncio.run(main())
