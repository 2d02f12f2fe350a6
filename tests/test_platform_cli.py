"""The agent platform from our own surfaces (issue 35): `artifactflow run --assistant`,
`artifactflow assistants`, `artifactflow crons list|delete`, and `assistant` in
`POST /api/v1/chat`; the scripted OpenAI-compatible server shows the model each run asked for."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser_helpers import serving
from cli_helpers import CLI, make_cli
from scripted_llm import ScriptedLLM, Text

from artifactflow import Client, load_settings
from artifactflow.api.app import create_app
from artifactflow.client import assistant_rows
from artifactflow.protocol.crons import Crons
from artifactflow.protocol.service import Protocol


@pytest.fixture
def cli(tmp_path: Path, llm_env: ScriptedLLM, capsys: pytest.CaptureFixture[str]) -> CLI:
    return make_cli(tmp_path, capsys)


def _seed(cli: CLI) -> tuple[str, str]:
    """An assistant on model-cli and a cron, stored in the CLI's data folder."""

    async def seed() -> tuple[str, str]:
        client = await Client.open(load_settings(cli.config, cli.data))
        try:
            lead = client.admin.services.lead.name
            row = await assistant_rows.create(
                client.admin.store, graph_id=lead, config={"configurable": {"model": "model-cli"}},
                context={}, metadata={}, name="cli helper", description=None,
            )
            cron = await Crons(Protocol(client)).create(
                assistant_id=row.assistant_id, thread_id=None, user_id=None, schedule="0 9 * * *",
                timezone="UTC", end_time=None, enabled=True, payload={"input": "report"}, metadata={},
            )
            return row.assistant_id, cron["cron_id"]
        finally:
            await client.aclose()

    return asyncio.run(seed())


def test_run_with_assistant_and_crons_commands(cli: CLI, llm: ScriptedLLM) -> None:
    assistant_id, cron_id = _seed(cli)
    llm.script(Text("Done as configured."), Text("Done plainly."))
    result = cli.fork("run", "hi", "--assistant", assistant_id)
    assert result.code == 0, result.err
    assert llm.requests[0]["model"] == "model-cli"
    result = cli.fork("run", "hi")  # without it: the agent file's model
    assert result.code == 0, result.err
    assert llm.requests[1]["model"] != "model-cli"
    missing = cli.fork("run", "hi", "--assistant", "nobody")
    assert missing.code == 2 and "assistant nobody not found" in missing.err

    listed = json.loads(cli.call("assistants", "--json").out)
    assert assistant_id in {a["assistant_id"] for a in listed}
    crons = json.loads(cli.call("crons", "list", "--json").out)
    assert [c["cron_id"] for c in crons] == [cron_id]
    assert crons[0]["schedule"] == "0 9 * * *"
    assert cli.call("crons", "delete", cron_id).code == 0
    assert json.loads(cli.call("crons", "list", "--json").out) == []
    gone = cli.call("crons", "delete", cron_id)
    assert gone.code == 2 and "not found" in gone.err


async def test_chat_api_takes_an_assistant(llm_env: ScriptedLLM, tmp_path: Path) -> None:
    from conftest import make_config

    llm_env.script(Text("From the assistant."))
    af = await Client.open(load_settings(make_config(tmp_path), tmp_path / "data"))
    try:
        row = await assistant_rows.create(
            af.admin.store, graph_id=af.admin.services.lead.name,
            config={}, context={"model": "model-chat", "system_prompt": "Answer in French."},
            metadata={}, name="french", description=None,
        )
        async with serving(create_app(client=af)) as url, httpx.AsyncClient(base_url=url) as http:
            response = await http.post("/api/v1/chat", json={"content": "hi", "assistant": row.assistant_id})
            assert response.status_code == 202, response.text
            run = await af.runs.get(response.json()["message_id"])
            assert (await run.result()).status == "completed"
            request: dict[str, Any] = llm_env.requests[0]
            assert request["model"] == "model-chat"
            assert "Answer in French." in request["messages"][0]["content"]
            response = await http.post("/api/v1/chat", json={"content": "hi", "assistant": "nobody"})
            assert response.status_code == 404
            response = await http.post("/api/v1/chat", json={"content": "hi", "assistant": 5})
            assert response.status_code == 422
    finally:
        await af.aclose()


async def test_retry_keeps_the_agent_configuration(llm_env: ScriptedLLM, tmp_path: Path) -> None:
    from conftest import make_config
    from scripted_llm import Error

    from artifactflow import Retry, Task

    llm_env.script(Error(400, "refused"), Text("Second time lucky."))
    af = await Client.open(load_settings(make_config(tmp_path), tmp_path / "data"))
    try:
        first = await af.run(Task("hi", config={"model": "model-retry"}))
        assert first.status == "failed"
        again = await af.run(Retry(first.message_id))
        assert again.status == "completed"
        assert [r["model"] for r in llm_env.requests] == ["model-retry", "model-retry"]
    finally:
        await af.aclose()
