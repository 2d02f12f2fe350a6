"""Workflow orchestration overhead: a split over N items, each an agent step, with a
zero-latency in-process model.

Prints, per N: wall time, ms per node execution (start, split, N item steps, merge, exit),
checkpoint-store bytes left by the run (kept for measuring) and app-store bytes (events and
lineage) per node execution. Each item step is a nested graph with its own checkpoints, the
price of pausing and resuming items independently.

Run: `python benchmarks/workflow_overhead.py [--items 10,50,200]`
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from artifactflow import Client, WorkflowTask, load_settings
from artifactflow.agents.model import ModelRequest, ModelResponse, Usage

WORKFLOW = """
name: fan
input: {type: object, properties: {items: {type: array}}}
nodes:
  - {id: start, role: start}
  - {id: fan, role: split, over: "{{ input.items }}"}
  - {id: work, role: linear, kind: agent, agent: worker, instruction: "Do {{ item }}"}
  - {id: join, role: merge, strategy: list}
  - {id: done, role: exit}
edges:
  - {from: start, to: fan}
  - {from: fan, to: work}
  - {from: work, to: join}
  - {from: join, to: done}
"""


class InstantModel:
    """A `Model` that answers at once (no stream, no socket), counting its calls."""

    calls = 0

    async def complete(self, request: ModelRequest, on_delta: Any = None) -> ModelResponse:
        self.calls += 1
        return ModelResponse(
            "result " + request.messages[-1]["content"][-8:], [], "instant", Usage(10, 2)
        )

    async def aclose(self) -> None:
        return None


def write_config(root: Path) -> Path:
    config = root / "config"
    (config / "agents").mkdir(parents=True)
    (config / "workflows").mkdir()
    (config / "agents" / "lead_agent.md").write_text(
        "---\nname: lead_agent\nrole: lead\n---\nLead.\n"
    )
    (config / "agents" / "worker.md").write_text("---\nname: worker\n---\nYou are worker.\n")
    (config / "workflows" / "fan.yaml").write_text(WORKFLOW)
    # one short agent step per item: the default-sized window, stated (the model declares none)
    (config / "artifactflow.yaml").write_text(
        "run:\n  recursion_limit: 5000\ncontext:\n  default_window: 32768\n"
    )
    return config


def size_of(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


async def measure(items: int, root: Path) -> dict[str, float]:
    settings = load_settings(write_config(root), root / "data")
    client = await Client.open(settings)
    model = InstantModel()
    client.admin.services.use_model(model)  # the Model seam; no API key needed
    try:
        async with await client.runs.start(WorkflowTask("fan", {"items": [1, 2]})) as run:
            warm = [e async for e in run]
        assert warm[-1].type == "complete", warm[-1].data
        settings.checkpoints.keep_completed = True
        data = root / "data"
        await client.admin.checkpoints.wal_checkpoint()
        async with client.admin.store.engine.connect() as conn:
            await conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        before_cp, before_app = size_of(data / "checkpoints.db"), size_of(data / "artifactflow.db")
        calls = model.calls
        started = time.perf_counter()
        async with await client.runs.start(
            WorkflowTask("fan", {"items": list(range(items))})
        ) as run:
            events = [e async for e in run]
        elapsed = time.perf_counter() - started
        calls = model.calls - calls
        if events[-1].type != "complete" or calls != items:
            raise AssertionError(
                f"{items} items: ended {events[-1].type} {events[-1].data}, {calls} model calls"
            )
        await client.admin.checkpoints.wal_checkpoint()
        async with client.admin.store.engine.connect() as conn:
            await conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        executions = items + 4
        return {
            "wall_s": elapsed,
            "ms_per_node": elapsed * 1000 / executions,
            "checkpoint_kb": (size_of(data / "checkpoints.db") - before_cp) / 1024,
            "app_bytes_per_node": (size_of(data / "artifactflow.db") - before_app) / executions,
        }
    finally:
        await client.aclose()


async def main(sizes: list[int]) -> None:
    print(f"{'items':>6} {'wall s':>8} {'ms/node':>8} {'checkpoint KB':>14} {'app B/node':>11}")
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            r = await measure(n, Path(tmp))
        print(
            f"{n:>6} {r['wall_s']:>8.2f} {r['ms_per_node']:>8.2f} {r['checkpoint_kb']:>14.0f} "
            f"{r['app_bytes_per_node']:>11.0f}"
        )
        sys.stdout.flush()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", default="10,50,200")
    args = parser.parse_args()
    asyncio.run(main([int(x) for x in args.items.split(",")]))
