"""A scripted research run, offline: the lead plans, two subagents research in parallel, the
lead writes a report artifact.

The "model" is `artifactflow.testing.ScriptedLLM`, a scripted OpenAI-compatible server started
on 127.0.0.1, so this runs anywhere without a key. Usage:

    .venv/bin/python examples/research_demo.py --data-dir /tmp/af-demo

It prints the conversation id and the commands to inspect the artifacts and their versions.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import threading

from artifactflow import Client, load_settings
from artifactflow.testing import Call, Delay, ScriptedLLM, Text, ToolCalls

PLAN = "# Plan\n- [ ] Survey SQLite WAL mode\n- [ ] Survey PostgreSQL MVCC\n- [ ] Write the report\n"
REPORT = "# Concurrency report\n\n## SQLite\nWAL lets readers run beside one writer.\n\n## PostgreSQL\nMVCC gives every transaction a snapshot.\n"


def script(llm: ScriptedLLM) -> None:
    lead = [
        ToolCalls([Call("create_artifact", {"id": "task_plan", "title": "Plan", "content": PLAN})]),
        ToolCalls([
            Call("call_subagent", {"agent_name": "search_agent", "instruction": "How does SQLite WAL handle concurrency? Cite sources."}),
            Call("call_subagent", {"agent_name": "crawl_agent", "instruction": "Summarise PostgreSQL MVCC from its docs."}),
        ]),
        ToolCalls([Call("create_artifact", {"id": "report", "title": "Concurrency report", "content": REPORT})]),
        ToolCalls([Call("update_artifact", {"id": "task_plan", "old_str": "- [ ] Survey SQLite WAL mode\n- [ ] Survey PostgreSQL MVCC\n- [ ] Write the report", "new_str": "- [x] Survey SQLite WAL mode\n- [x] Survey PostgreSQL MVCC\n- [x] Write the report"})]),
        Text("Done: the findings are in the `report` artifact; `task_plan` shows the finished plan."),
    ]
    subs = {
        "search_agent": Delay(0.5, Text("**Findings**: WAL allows concurrent readers with one writer [https://sqlite.org/wal.html]")),
        "crawl_agent": Delay(0.5, Text("**Findings**: PostgreSQL uses MVCC snapshots [https://www.postgresql.org/docs/current/mvcc.html]")),
    }
    lock = threading.Lock()

    def route(request: dict):
        who = _who(request["messages"][0]["content"])
        if who in subs:
            return subs[who]
        with lock:
            return lead.pop(0) if lead else None

    llm.route(route)


def _who(system: str) -> str:
    if "web research specialist" in system:
        return "search_agent"
    if "careful reader of web pages" in system:
        return "crawl_agent"
    return "lead"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default="data")
    args = parser.parse_args()
    with ScriptedLLM() as llm:
        os.environ["OPENAI_BASE_URL"] = llm.base_url
        os.environ.setdefault("OPENAI_API_KEY", "demo")
        script(llm)
        settings = load_settings(data_dir=args.data_dir)
        async with await Client.open(settings) as client:
            async with await client.runs.start("Compare how SQLite and PostgreSQL handle concurrent writers") as run:
                async for event in run:
                    if event.type in ("subagent_start", "subagent_complete", "artifact_created", "artifact_updated", "complete"):
                        detail = {k: v for k, v in event.data.to_dict().items() if k in ("artifact_id", "version", "change", "status", "response")}
                        print(f"{event.event_id:>3} {event.type:<18} {event.agent or '':<13} {detail}")
            conversation = run.conversation_id
    print(f"\nconversation: {conversation}")
    print(f"  artifactflow --data-dir {args.data_dir} artifacts {conversation}")
    print(f"  artifactflow --data-dir {args.data_dir} artifact {conversation} task_plan --diff 1")
    print(f"  artifactflow --data-dir {args.data_dir} artifact {conversation} report --export report.md")


if __name__ == "__main__":
    asyncio.run(main())
