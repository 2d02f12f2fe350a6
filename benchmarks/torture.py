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
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from killable_serve import fleet  # noqa: E402
from scripted_llm import Call, Delay, ScriptedLLM, Text, ToolCalls  # noqa: E402
from torture_protocol import ProtocolTally, cancel_pair, memory_text, protocol_kills, resume_pair  # noqa: E402
from torture_protocol import tables as protocol_tables  # noqa: E402

from artifactflow import Client, Resume, load_settings  # noqa: E402
from artifactflow.core.store import schema as t  # noqa: E402

ARTIFACTFLOW = str(Path(sys.executable).parent / "artifactflow")
ADMIN_URL = os.environ.get("ARTIFACTFLOW_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
TOKEN = re.compile(r"(?:task|memory|slow) (T[0-9a-f]+)")

PLUGIN = '''
import os, time
from pathlib import Path
from artifactflow import tool

@tool(permission="confirm")
def append_line(text: str) -> str:
    """Append one line to the journal (the side effect that must happen once)."""
    with Path(os.environ["AF_JOURNAL"]).open("a", encoding="utf-8") as f:
        f.write(text + "\\n")
    time.sleep(0.15)  # a window to be killed in, after the effect
    return f"appended {text}"
'''

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


def route(request: dict[str, Any]) -> Any:
    """Stateless model: call the tool for the task's token, then answer."""
    messages = request.get("messages") or []
    user = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "user"), "")
    match = TOKEN.search(str(user))
    token = match.group(1) if match else "T0"
    if messages and messages[-1].get("role") == "tool":
        return Text(f"done {token}", chunk_size=4, chunk_delay=0.005)
    if str(user).startswith("memory "):  # a memory write: `memory_save` (auto), once per run
        return ToolCalls([Call("memory_save", {"text": memory_text(token)})])
    if str(user).startswith("slow "):  # a run still busy when a second one is sent
        return Delay(1.0, ToolCalls([Call("append_line", {"text": token})]))
    return ToolCalls([Call("append_line", {"text": token})])


@dataclass
class Tally:
    trials: int = 0
    resumable: int = 0
    not_started: int = 0
    duplicates: int = 0
    wrong: int = 0
    errors_5xx: int = 0
    gaps: int = 0
    # resume/cancel pairs: how each cancel was answered, and how long it took
    accepted: int = 0  # 200 {"cancelled": true}
    refused: int = 0  # 409: it lost to the resume, with the reason
    dropped: int = 0  # answered without effect or conflict, or accepted and not cancelled
    tool_after_cancel: int = 0  # accepted, ended cancelled, yet the approved tool ran
    cancel_seconds: list[float] = field(default_factory=list)
    # kills after an approval: asked again, and calls whose start is logged twice
    reasked: int = 0
    double_starts: int = 0
    double_completes: int = 0  # calls whose tool_complete is logged twice (any kill)
    # memory writes (`memory_save`) cut by a kill: saved twice, or lost from a completed run
    memory_duplicates: int = 0
    memory_lost: int = 0
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if len(self.notes) < 6:
            self.notes.append(text)


@dataclass
class World:
    backend: str
    root: Path
    config: Path
    data: Path
    journal: Path
    url: str | None
    env: dict[str, str]
    client: Client

    def journal_count(self, token: str) -> int:
        if not self.journal.exists():
            return 0
        return self.journal.read_text(encoding="utf-8").splitlines().count(token)

    async def message_for(self, token: str, prefix: str = "task") -> dict[str, Any] | None:
        async with self.client.admin.store.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(t.messages.c.id).where(t.messages.c.content == f"{prefix} {token}")
                )
            ).first()
        return await self.client.admin.store.get_message(row[0]) if row else None

    async def check_log(self, message: dict[str, Any], tally: Tally, *, one_pause: bool) -> bool:
        """Event ids 1..n, status agreeing with the last event, and with `one_pause` a single
        permission request (a recovery after a crash may rightly ask again). True if good."""
        events = await self.client.runs.events(message["id"])
        ids = [e.event_id for e in events]
        good = True
        if ids != list(range(1, len(ids) + 1)):
            tally.gaps += 1
            tally.note(f"{message['id'][:8]}: event ids {ids}")
            good = False
        asks = sum(1 for e in events if e.type == "permission_request")
        last = events[-1].type if events else None
        expected_last = {"completed": "complete", "cancelled": "cancelled", "failed": "error"}
        if asks > 1 and one_pause:
            good = False
            tally.note(f"{message['id'][:8]}: asked for approval {asks} times")
        if message["status"] in expected_last and last != expected_last[message["status"]]:
            good = False
            tally.note(f"{message['id'][:8]}: status {message['status']} but last event {last}")
        return good


@contextlib.asynccontextmanager
async def world(backend: str, llm: ScriptedLLM) -> AsyncIterator[World]:
    root = Path(tempfile.mkdtemp(prefix=f"af-torture-{backend}-"))
    config = root / "config"
    (config / "agents").mkdir(parents=True)
    (config / "agents" / "lead_agent.md").write_text(
        "---\nname: lead_agent\ndescription: lead\nrole: lead\ntools: [append_line, memory_save]\n"
        "max_tool_rounds: 5\n---\nYou are the lead agent.\n",
        encoding="utf-8",
    )
    (config / "artifactflow.yaml").write_text(
        "plugins: [torture_tools]\nllm:\n  max_retries: 2\n  backoff_base: 0.01\n"
        "  backoff_max: 0.05\nrun:\n  max_concurrent_runs: 16\n",
        encoding="utf-8",
    )
    (config / "torture_tools.py").write_text(textwrap.dedent(PLUGIN), encoding="utf-8")
    journal = root / "journal.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARTIFACTFLOW_")}
    env.update(
        OPENAI_BASE_URL=llm.base_url,
        OPENAI_API_KEY="torture",
        AF_JOURNAL=str(journal),
        NO_COLOR="1",
        PYTHONUNBUFFERED="1",
    )
    os.environ.update(
        OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="torture", AF_JOURNAL=str(journal)
    )
    url = None
    admin = None
    if backend == "postgres":
        import asyncpg

        admin = await asyncpg.connect(ADMIN_URL, timeout=5)
        name = f"af_torture_{uuid.uuid4().hex[:10]}"
        await admin.execute(f'CREATE DATABASE "{name}"')
        url = ADMIN_URL.rsplit("/", 1)[0] + "/" + name
        env["ARTIFACTFLOW_DATABASE_URL"] = url
    settings = load_settings(config, root / "data", database_url=url)
    client = await Client.open(settings)
    try:
        yield World(backend, root, config, root / "data", journal, url, env, client)
    finally:
        await client.aclose()
        if admin is not None:
            await admin.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')
            await admin.close()


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


# --- racing pairs ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def servers(w: World, count: int = 2) -> Any:
    procs, urls = [], []
    for _ in range(count):
        port = free_port()
        procs.append(
            subprocess.Popen(
                [
                    ARTIFACTFLOW,
                    "--config-dir",
                    str(w.config),
                    "--data-dir",
                    str(w.data),
                    "serve",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                ],
                env=w.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        urls.append(f"http://127.0.0.1:{port}/api/v1")
    try:
        for url in urls:
            for _ in range(600):
                try:
                    if httpx.get(url + "/conversations", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)
        yield urls
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def wait_status(
    client: httpx.Client, url: str, mid: str, statuses: set[str], timeout: float = 15
) -> str:
    status = "?"
    for _ in range(int(timeout / 0.05)):
        status = client.get(f"{url}/messages/{mid}").json().get("status", "?")
        if status in statuses:
            return status
        time.sleep(0.05)
    return status


def pair_trial(
    w: World, urls: list[str], rng: random.Random, tally: Tally
) -> tuple[str, dict[str, Any]]:
    token = "T" + uuid.uuid4().hex[:10]
    with httpx.Client(timeout=30) as client:
        chat = client.post(f"{urls[0]}/chat", json={"content": f"task {token}"})
        if chat.status_code >= 500:
            tally.errors_5xx += 1
        mid = chat.json()["message_id"]
        if wait_status(client, urls[0], mid, {"waiting", "failed", "completed"}) != "waiting":
            tally.note(f"{mid[:8]}: never paused")
            return mid, {}
        barrier = threading.Barrier(2)
        answers: dict[str, httpx.Response | Exception] = {}
        latency: list[float] = []
        resume_url, cancel_url = rng.choice(urls), rng.choice(urls)

        def send(kind: str) -> None:
            with httpx.Client(timeout=30) as own:
                barrier.wait()
                try:
                    if kind == "resume":
                        answers[kind] = own.post(
                            f"{resume_url}/chat/{mid}/resume", json={"decisions": "approve"}
                        )
                    else:
                        began = time.perf_counter()
                        answers[kind] = own.post(f"{cancel_url}/chat/{mid}/cancel")
                        latency.append(time.perf_counter() - began)
                except Exception as exc:  # noqa: BLE001 - counted below
                    answers[kind] = exc

        threads = [threading.Thread(target=send, args=(k,)) for k in ("resume", "cancel")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        final = wait_status(client, urls[0], mid, {"completed", "failed", "cancelled", "waiting"})
        info = {"token": token, "final": final, "same_server": resume_url == cancel_url}
        if latency:
            tally.cancel_seconds.append(latency[0])
        for kind, answer in answers.items():
            if isinstance(answer, Exception):
                info[kind] = repr(answer)
                continue
            info[kind] = answer.status_code
            if answer.status_code >= 500:
                tally.errors_5xx += 1
                tally.note(f"{mid[:8]}: {kind} answered {answer.status_code}: {answer.text[:120]}")
            if kind == "cancel" and answer.status_code == 200:
                info["cancelled"] = answer.json().get("cancelled")
                info["cancel_status"] = answer.json().get("status")
        return mid, info


async def judge_pair(w: World, mid: str, info: dict[str, Any], tally: Tally) -> None:
    tally.trials += 1
    message = await w.client.admin.store.get_message(mid)
    if message is None or not info:
        tally.wrong += 1
        return
    good = await w.check_log(message, tally, one_pause=True)
    status = message["status"]
    ran = w.journal_count(info["token"]) > 0
    if info.get("cancel") == 409:
        tally.refused += 1
    elif info.get("cancelled") is True:
        tally.accepted += 1
        if status != "cancelled":
            tally.dropped += 1
        elif ran:
            tally.tool_after_cancel += 1
    elif info.get("cancel") == 200 and info.get("resume") == 202:
        tally.dropped += 1  # the run was live, the cancel neither took effect nor said why not
        tally.note(
            f"{mid[:8]}: cancel answered {info.get('cancel_status')!r}, not cancelled, no conflict"
        )
    if info.get("cancelled") is True and status != "cancelled":
        good = False
        tally.note(f"{mid[:8]}: cancel said cancelled, message ended {status} ({info})")
    elif info.get("cancelled") is not True and info.get("resume") == 202 and status != "completed":
        good = False
        tally.note(f"{mid[:8]}: resumed, message ended {status} ({info})")
    elif info.get("cancelled") is not True and info.get("resume") != 202:
        good = False
        tally.note(f"{mid[:8]}: neither resume nor cancel won ({info})")
    if w.journal_count(info["token"]) > 1:
        tally.duplicates += 1
    if not good:
        tally.wrong += 1


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
