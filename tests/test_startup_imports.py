"""Start-up stays cheap: the command line imports the heavy libraries only in the commands
that need them, and the commands that read stored data never import the run engine.

Each check runs a fresh interpreter (a module imported by an earlier test would hide a
regression) and reads its `sys.modules`; no timing is asserted. `Reader`, the store-only
facade the listing commands use, must answer exactly as the `Client` does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sample_tools import guarded
from scripted_llm import Call, Text, ToolCalls
from waiting import ceiling

import artifactflow
from artifactflow import Client, NotFoundError, Reader, RunResult, Task
from artifactflow.cli import views
from artifactflow.client import quick

# What `--help` must not pay for; listing commands may import SQLAlchemy (a store to create or
# upgrade). Help is click's plain text: typer's rich help would import markdown-it and pygments.
HEAVY = ("langgraph", "langchain_core", "openai", "fastapi", "uvicorn", "sqlalchemy")
HELP_HEAVY = ("pydantic", "yaml", "markdown_it", "pygments")
ENGINE = ("langgraph", "langchain_core", "openai", "fastapi", "uvicorn", "httpx")
TIMEOUT = ceiling(300)

PROBE = """
import json, sys
from artifactflow.cli.main import main
codes = [main(args) for args in json.loads(sys.argv[1])]
sys.stdout.flush()
print(json.dumps({"codes": codes, "modules": sorted({m.split(".")[0] for m in sys.modules})}),
      file=sys.stderr)
"""


def _probe(*commands: list[str]) -> tuple[list[int], set[str], str]:
    """Run `main(args)` for each command in a fresh interpreter: exit codes, top-level
    modules imported by the end, and what the commands printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARTIFACTFLOW_")}
    env.update(NO_COLOR="1", COLUMNS="200")
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(list(commands))],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    return report["codes"], set(report["modules"]), proc.stdout


def test_importing_the_cli_imports_no_heavy_library() -> None:
    code = "import sys, artifactflow.cli.main; print(' '.join(sorted(sys.modules)))"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert proc.returncode == 0, proc.stderr
    top = {name.split(".")[0] for name in proc.stdout.split()}
    assert "artifactflow" in top
    assert sorted(top & {*HEAVY, "pydantic", "yaml"}) == []


def test_help_lists_the_commands_without_heavy_imports() -> None:
    codes, modules, out = _probe(["--help"], ["workflow", "--help"])
    assert codes == [0, 0]
    for command in ("run", "resume", "conversations", "history", "events", "workflow", "serve"):
        assert command in out
    assert "validate" in out  # the workflow group's own help
    assert sorted(modules & {*HEAVY, *HELP_HEAVY}) == []


REGISTERED = """
import importlib, json
from artifactflow.cli import app as cli_app
from artifactflow.cli.main import COMMAND_MODULES
homes = {}
for module in COMMAND_MODULES:
    before = {c.name or c.callback.__name__ for c in cli_app.app.registered_commands}
    before |= {g.name for g in cli_app.app.registered_groups}
    importlib.import_module("artifactflow.cli." + module)
    after = {c.name or c.callback.__name__ for c in cli_app.app.registered_commands}
    after |= {g.name for g in cli_app.app.registered_groups}
    homes.update(dict.fromkeys(after - before, module))
print(json.dumps(homes))
"""


def test_a_command_line_loads_the_module_of_its_command_alone() -> None:
    """`COMMAND_HOMES` says where each command is registered (checked against the modules
    themselves); `run` loads `commands_run` and no other command module."""
    from artifactflow.cli.main import COMMAND_HOMES, _command_name

    proc = subprocess.run([sys.executable, "-c", REGISTERED], capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == COMMAND_HOMES
    assert _command_name(["--data-dir", "run", "--model", "m", "resume", "x"]) == "resume"
    assert _command_name(["--debug", "--help", "run"]) is None
    probe = ("import contextlib, io, sys\nfrom artifactflow.cli.main import main\n"
             "with contextlib.redirect_stdout(io.StringIO()): code = main(['run', '--help'])\n"
             "print(code, sorted(m for m in sys.modules if m.startswith('artifactflow.cli.commands_')))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.stdout.split() == ["0", "['artifactflow.cli.commands_run']"], proc.stderr


def test_console_script_help_works() -> None:
    script = Path(sys.executable).parent / "artifactflow"
    proc = subprocess.run(
        [str(script), "--help"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "Usage: artifactflow" in proc.stdout and "conversations" in proc.stdout


async def _written_then_paused(make_client, llm) -> tuple[Client, RunResult, RunResult]:
    """A conversation with a finished run that wrote an artifact, then a paused one."""
    client = await make_client(lead_tools=["guarded", "create_artifact"], extra_tools=[guarded])
    llm.script(
        ToolCalls([Call("create_artifact", {"id": "notes", "title": "Notes", "content": "a\n"})]),
        Text("written"),
        ToolCalls([Call("guarded", {"text": "x"})]),
    )
    done = await client.run("write notes")
    paused = await client.run(Task("guard it", done.conversation_id))
    assert (done.status, paused.status) == ("completed", "waiting")
    return client, done, paused


async def test_listing_commands_read_without_the_engine(make_client, llm, tmp_path: Path) -> None:
    _, done, paused = await _written_then_paused(make_client, llm)
    where = ["--config-dir", str(tmp_path / "config"), "--data-dir", str(tmp_path / "data")]
    cid, mid = done.conversation_id, done.message_id

    codes, modules, out = _probe(
        ["conversations", *where],
        ["history", cid, *where],
        ["events", mid, *where],
        ["artifacts", cid, *where],
        ["artifact", cid, "notes", *where],
        ["pending", *where],
    )

    assert codes == [0] * 6
    assert cid in out and "1–1 of 1" in out  # conversations
    assert mid in out and paused.message_id in out  # history, pending
    assert "tool_complete" in out and "complete" in out  # events
    assert "notes" in out and "Notes" in out  # artifacts, artifact
    assert sorted(modules & set(ENGINE)) == []


async def test_reader_answers_as_the_client_does(make_client, llm, tmp_path: Path) -> None:
    client, done, paused = await _written_then_paused(make_client, llm)
    cid, mid = done.conversation_id, done.message_id

    async with await Reader.open(client.settings) as reader:
        assert await reader.conversations.list() == await client.conversations.list()
        assert await reader.conversations.count() == await client.conversations.count() == 1
        assert await reader.conversations.tree(cid) == await client.conversations.tree(cid)
        assert await reader.conversations.messages(cid) == await client.conversations.messages(cid)
        assert [m["id"] for m in await reader.runs.pending()] == [paused.message_id]
        stored = [e.model_dump() for e in await reader.runs.events(mid)]
        assert stored == [e.model_dump() for e in await client.runs.events(mid)]
        assert stored[-1]["type"] == "complete"
        assert await reader.runs.events(mid, 2) == await client.runs.events(mid, 2)
        assert await reader.runs.last_event_id(mid) == stored[-1]["event_id"]
        assert await reader.artifacts.list(cid) == await client.artifacts.list(cid)
        assert await reader.artifacts.get(cid, "notes") == await client.artifacts.get(cid, "notes")
        assert await reader.workflows.lineage(mid) == await client.workflows.lineage(mid) == []
        assert await reader.workflows.runs() == await client.workflows.runs() == []
        for read in (reader.runs.events, reader.workflows.lineage, reader.conversations.message):
            with pytest.raises(NotFoundError, match="not found"):
                await read("no-such-message")
        with pytest.raises(NotFoundError):
            await reader.conversations.get("no-such-conversation")


async def test_conversations_on_sqlite_read_without_sqlalchemy_and_answer_as_the_reader(
    make_client, llm, tmp_path: Path
) -> None:
    client = await make_client()
    llm.script(*[Text(f"answer {i}") for i in range(3)])
    for i in range(3):
        await client.run(f"question {i}")
    where = ["--config-dir", str(tmp_path / "config"), "--data-dir", str(tmp_path / "data")]

    codes, modules, out = _probe(["conversations", "--json", "--limit", "2", "--offset", "1", *where])

    assert codes == [0]
    assert sorted(modules & {"sqlalchemy", "aiosqlite", *ENGINE}) == []
    async with await Reader.open(client.settings) as reader:
        expected = {
            "items": await reader.conversations.list(limit=2, offset=1),
            "total": await reader.conversations.count(),
            "limit": 2,
            "offset": 1,
        }
    assert json.loads(out) == expected and expected["total"] == 3


async def test_pending_on_sqlite_reads_without_sqlalchemy_and_answers_as_the_reader(
    make_client, llm, tmp_path: Path
) -> None:
    client, _, paused = await _written_then_paused(make_client, llm)
    where = ["--config-dir", str(tmp_path / "config"), "--data-dir", str(tmp_path / "data")]

    codes, modules, out = _probe(["pending", "--json", *where])

    assert codes == [0]
    assert sorted(modules & {"sqlalchemy", "aiosqlite", *ENGINE}) == []
    async with await Reader.open(client.settings) as reader:
        expected = await reader.runs.pending()
    assert quick.pending(client.settings) == expected  # every column, decoded alike
    assert json.loads(out) == [views.public_message(m) for m in expected]
    assert [m["id"] for m in expected] == [paused.message_id]


def test_conversations_without_a_store_yet_answer_none_and_create_nothing(tmp_path: Path) -> None:
    codes, modules, out = _probe(["conversations", "--data-dir", str(tmp_path / "new")])
    assert codes == [0] and "No conversations (0 in all)." in out
    assert "sqlalchemy" not in modules and not (tmp_path / "new").exists()


def test_package_root_resolves_every_public_name() -> None:
    namespace: dict[str, object] = {}
    exec("from artifactflow import *", namespace)  # noqa: S102 - the star import is the test
    assert [name for name in artifactflow.__all__ if name not in namespace] == []
    assert set(artifactflow.__all__) <= set(dir(artifactflow))
    assert artifactflow.Client.__module__ == "artifactflow.client.client"
    assert artifactflow.Reader is Reader
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = artifactflow.Nope  # type: ignore[attr-defined]


def test_run_and_resume_refuse_before_the_engine_is_imported(tmp_path: Path) -> None:
    """A missing key and an unknown id are reported with pydantic and YAML alone: not the
    engine, the stores or the model SDK (tests/test_cli_first_hour.py checks the messages)."""
    config = tmp_path / "config"
    config.mkdir()
    (config / "models.yaml").write_text(  # a key no environment has, whatever the shell sets
        "profiles:\n  p:\n    model: m\n    api_key_env: AF_NO_SUCH_KEY_FOR_THIS_TEST\n"
    )
    where = ["--config-dir", str(config), "--data-dir", str(tmp_path / "data"), "--model", "p"]
    codes, modules, _ = _probe(["run", "hello", *where], ["resume", "0" * 32, "--approve", *where])
    assert codes == [2, 2]
    assert sorted(modules & {*ENGINE, "sqlalchemy", "aiosqlite", "numpy", "jsonschema_rs"}) == []
    assert "rich" not in modules  # the checks run before the interrupt guard; the error is plain
    assert not (tmp_path / "data").exists()


def test_version_imports_nothing_but_the_command_line() -> None:
    codes, modules, out = _probe(["--version"])
    assert codes == [0] and out.startswith("artifactflow ")
    assert sorted(modules & {*HEAVY, "pydantic", "yaml", "asyncio"}) == []
