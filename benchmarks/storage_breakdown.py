"""Storage ÷ payload of one long conversation, and where the bytes go (SQLite data folder).

The measure of `peers.py`: open a client on a fresh folder, warm it up with a one-round
conversation, close it (the folder as a user leaves it, WAL folded in or not); reopen, run a
one-round and then an N-round conversation (4 KB tool results over real HTTP from the scripted
OpenAI-compatible server, a context window large enough that compaction never starts),
close. The folder's growth ÷ the (N + 1) × 4 KB of tool results is the figure (issue 21:
≤ 1.5 at 200 rounds). It also prints what each table and file holds after the run, before
the client closes (`dbstat`), so duplication shows: the tool result in events, in the
recorded model requests, in checkpoints and their pending writes.

Asserts the outcome ("done", completed) and the number of model calls (N + 1 for the long
conversation), so a change in behaviour cannot pass for a change in size.

Run: `python benchmarks/storage_breakdown.py [--rounds 200]`
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENAI_API_KEY", "benchmark-no-network")

from pages import PAYLOAD_BYTES, page  # noqa: E402

from artifactflow import Client, load_settings, tool  # noqa: E402
from artifactflow.testing import Call, ScriptedLLM, Text, ToolCalls  # noqa: E402


@tool
def fetch_page(n: int) -> str:
    """Return one page of text.

    Args:
        n: Page number.
    """
    return page(n)


def write_config(root: Path, base_url: str) -> Path:
    config = root / "config"
    (config / "agents").mkdir(parents=True)
    (config / "agents" / "lead_agent.md").write_text(
        "---\nname: lead_agent\nrole: lead\ntools: [fetch_page]\nmax_tool_rounds: 1000\n---\n"
        "Fetch the pages you are asked for, then answer done.\n"
    )
    os.environ["STORAGE_BENCH_MODEL_URL"] = base_url
    (config / "models.yaml").write_text(
        "profiles:\n  fake:\n    model: fake\n    base_url_env: STORAGE_BENCH_MODEL_URL\n"
        "    context_window: 4000000\n"
    )
    (config / "artifactflow.yaml").write_text(
        "model: fake\nllm:\n  max_retries: 0\nrun:\n  recursion_limit: 5000\n"
    )
    return config


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def tables(path: Path) -> list[tuple[str, int]]:
    """(table or index, bytes) of an SQLite file, largest first (its WAL not included)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        try:
            rows = conn.execute(
                "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
            ).fetchall()
        except sqlite3.OperationalError:  # built without dbstat
            return []
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    return [(str(n), int(b)) for n, b in rows] + [("(free pages)", free * page_size)]


async def measure(rounds: int, root: Path) -> dict[str, Any]:
    with ScriptedLLM() as llm:

        def answer(request: dict[str, Any]) -> Any:
            done = sum(1 for m in request.get("messages") or [] if m.get("role") == "tool")
            want = (
                int(str(request["messages"][-1].get("content") or "0").split()[-1])
                if done == 0
                else None
            )
            target = want if want is not None else answer.target  # type: ignore[attr-defined]
            answer.target = target  # type: ignore[attr-defined]
            if done >= target:
                return Text("done")
            return ToolCalls([Call("fetch_page", {"n": done})])

        llm.route(answer)
        config = write_config(root, llm.base_url)
        data = root / "data"

        async def converse(client: Client, n: int) -> None:
            before = llm.request_count
            result = await client.run(f"fetch pages: {n}")
            calls = llm.request_count - before
            assert result.status == "completed", result.error
            assert result.response == "done", result.response
            assert calls == n + 1, f"{n} rounds should make {n + 1} model calls, saw {calls}"

        client = await Client.open(load_settings(config, data), extra_tools=[fetch_page])
        try:
            await converse(client, 1)
        finally:
            await client.aclose()
        before = folder_bytes(data)
        client = await Client.open(load_settings(config, data), extra_tools=[fetch_page])
        try:
            await converse(client, 1)
            await converse(client, rounds)
            files = {p.name: p.stat().st_size for p in sorted(data.iterdir()) if p.is_file()}
            open_bytes = folder_bytes(data) - before
        finally:
            await client.aclose()
        closed = {p.name: p.stat().st_size for p in sorted(data.iterdir()) if p.is_file()}
        payload = (rounds + 1) * PAYLOAD_BYTES
        return {
            "payload": payload,
            "open": open_bytes / payload,
            "closed": (folder_bytes(data) - before) / payload,
            "files_open": files,
            "files_closed": closed,
            "tables": {p.name: tables(p) for p in sorted(data.glob("*.db"))},
        }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        out = await measure(args.rounds, Path(folder))
    print(f"{args.rounds} rounds of {PAYLOAD_BYTES} B tool results (+1 warm-up round)")
    print(f"  files while open:  {out['files_open']}")
    print(f"  files once closed: {out['files_closed']}")
    for name, rows in out["tables"].items():
        print(f"  {name} (closed, by table/index):")
        for table, size in rows:
            if size > 16384:
                print(f"    {table:<40} {size:>12,}  {size / out['payload']:.2f}× payload")
    print(
        f"storage ÷ payload, {args.rounds} rounds: {out['open']:.2f} before close, "
        f"{out['closed']:.2f} closed (target ≤ 1.5)"
    )


if __name__ == "__main__":
    asyncio.run(main())
