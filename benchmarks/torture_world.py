"""The torture scripts' world (benchmarks/torture.py): a config folder with a journaling tool
(the side effect that must happen once), the stateless scripted model's route, the tallies,
and a fresh SQLite folder or PostgreSQL database with an admin client on it."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import textwrap
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from scripted_llm import Call, Delay, ScriptedLLM, Text, ToolCalls  # noqa: E402
from torture_protocol import memory_text  # noqa: E402

from artifactflow import Client, load_settings  # noqa: E402
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
