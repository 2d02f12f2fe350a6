"""`on_run_end` fires once per run end, whatever races it (issue 34).

Before: a run reaching its end called `on_run_end("completed")`, then wrote its final status
with a compare-and-set that loses to an accepted cancel; when a cancel landed in between, the
run ended `cancelled` and called `on_run_end("cancelled")` as well — a hook that bills or
notifies did it twice. Now the hooks run after the compare-and-set decided the ending.

Each trial races a cancel from a second client (another process's worth) against a run's
completion: the cancel is sent from `on_agent_end` of the lead's last step — the last moment
before the run's final write — after a delay that varies from trial to trial, so some cancels
land before the final write and some after it. What must hold in every trial: exactly one
`on_run_end`, and its status is the message's stored status.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from conftest import make_config
from scripted_llm import Text

from artifactflow import Client, load_settings
from artifactflow.hooks import Hooks

TRIALS = 100


class Racer(Hooks):
    """Records every `on_run_end`; at the lead's last step, cancels the run from elsewhere."""

    name = "racer"

    def __init__(self) -> None:
        self.ends: dict[str, list[str]] = {}
        self.other: Client | None = None
        self.delay = 0.0
        self.cancels: list[asyncio.Task[Any]] = []

    async def on_agent_end(self, run: Any, agent: Any, response: Any) -> None:
        assert self.other is not None
        self.cancels.append(asyncio.create_task(self._cancel_later(run.message_id, self.delay)))

    async def _cancel_later(self, message_id: str, delay: float) -> None:
        await asyncio.sleep(delay)
        assert self.other is not None
        await self.other.runs.cancel(message_id)

    async def on_run_end(self, run: Any, end: Any) -> None:
        self.ends.setdefault(run.message_id, []).append(end.status)


async def test_cancel_at_completion_never_fires_on_run_end_twice(tmp_path: Path, llm_env: Any) -> None:
    config = make_config(tmp_path)
    data = tmp_path / "data"
    racer = Racer()
    client = await Client.open(load_settings(config, data), hooks=[racer])
    other = await Client.open(load_settings(config, data))
    racer.other = other
    try:
        llm_env.script(*[Text(f"answer {i}") for i in range(TRIALS)])
        statuses: dict[str, str] = {}
        for trial in range(TRIALS):
            racer.delay = (trial % 10) * 0.002  # 0 to 18 ms after the lead's last step
            run = await client.runs.start(f"task {trial}")
            async for _ in run:
                pass
            await asyncio.gather(*racer.cancels, return_exceptions=True)
            racer.cancels.clear()
            statuses[run.message_id] = (await client.conversations.message(run.message_id))["status"]
        doubles = {m: e for m, e in racer.ends.items() if len(e) != 1}
        assert not doubles, f"{len(doubles)} of {TRIALS} runs fired on_run_end more than once: {doubles}"
        assert set(racer.ends) == set(statuses)
        mismatched = {m: (racer.ends[m], s) for m, s in statuses.items() if racer.ends[m] != [s]}
        assert not mismatched, mismatched
        kinds = sorted(set(statuses.values()))
        # the race is real: some cancels won, some lost to the completion
        assert "cancelled" in kinds and "completed" in kinds, kinds
    finally:
        await other.aclose()
        await client.aclose()
