"""The first hour at the command line (issue 38): mistakes are named before the engine loads.

A missing key, an unknown id, a misspelled setting or profile, a wrong flag and a busy port
each get their own message and exit code, and none of them creates a file or imports the run
engine. Each check runs the real console code in a fresh interpreter (`_probe`) so the
modules it imported can be read; no timing is asserted here (benchmarks/cli_startup.py does).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from cli_fork import fork_cli
from conftest import make_config
from scripted_llm import Text

from artifactflow import Client
from artifactflow.settings import load_settings

ENGINE = ("langgraph", "langchain_core", "openai", "sqlalchemy", "aiosqlite", "fastapi", "uvicorn")
TIMEOUT = 120

PROBE = """
import json, sys
from artifactflow.cli.main import main
code = main(json.loads(sys.argv[1]))
sys.stdout.flush()
print(json.dumps({"code": code, "modules": sorted({m.split(".")[0] for m in sys.modules})}),
      file=sys.stderr)
"""


def _env(**changes: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARTIFACTFLOW_", "OPENAI_"))}
    env.update(NO_COLOR="1", COLUMNS="200")
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _probe(args: list[str], **env: str | None) -> tuple[int, set[str], str, str]:
    """`main(args)` in a fresh interpreter: exit code, top-level modules imported, stdout and
    what the command wrote on stderr."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        env=_env(**env), stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=TIMEOUT,
    )
    *said, last = proc.stderr.strip().splitlines()
    report = json.loads(last)
    return report["code"], set(report["modules"]), proc.stdout, "\n".join(said)


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*")) if folder.exists() else []


def test_run_without_a_key_exits_2_before_the_engine_and_creates_nothing(tmp_path: Path) -> None:
    config, data = make_config(tmp_path), tmp_path / "data"
    code, modules, _, err = _probe(
        ["run", "hello", "--config-dir", str(config), "--data-dir", str(data)]
    )
    assert code == 2
    assert "OPENAI_API_KEY" in err and "no model endpoint configured" in err
    assert sorted(modules & set(ENGINE)) == []
    assert _files(data) == []


def test_run_with_a_misspelled_profile_names_the_profiles(tmp_path: Path) -> None:
    config, data = make_config(tmp_path), tmp_path / "data"
    (config / "models.yaml").write_text(
        "profiles:\n  local:\n    base_url: http://127.0.0.1:9/v1\n    model: tiny\n"
        "  fast:\n    model: gpt-4o-mini\n"
    )
    code, modules, _, err = _probe(
        ["run", "hi", "--config-dir", str(config), "--data-dir", str(data)],
        ARTIFACTFLOW_MODEL="locl",
    )
    assert code == 2
    assert "model 'locl' is not a profile" in err and "did you mean 'local'?" in err
    assert "profiles: fast, local" in err
    assert sorted(modules & set(ENGINE)) == [] and _files(data) == []


async def test_unknown_ids_are_refused_before_the_engine(
    tmp_path: Path, make_client, llm
) -> None:
    config, data = make_config(tmp_path), tmp_path / "data"
    llm.script(Text("stored"))
    client = await make_client(config_dir=config, data_dir=data)
    done = await client.run("store something")
    assert done.status == "completed"
    before = _files(data)
    key = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": llm.base_url}
    where = ["--config-dir", str(config), "--data-dir", str(data)]

    for args, said in (
        (["resume", "feedbeef" * 4, "--approve"], f"message {'feedbeef' * 4} not found"),
        (["retry", "no-such-message"], "message no-such-message not found"),
        (["run", "more", "--conversation", "nope"], "conversation nope not found"),
    ):
        code, modules, _, err = _probe([*args, *where], **key)
        assert (code, said in err) == (2, True), err
        assert sorted(modules & set(ENGINE)) == [], args
    assert _files(data) == before

    fresh = tmp_path / "fresh"  # no store at all: every id is unknown, and none is created
    code, modules, _, err = _probe(["resume", "abc", "--approve", *where[:2], "--data-dir", str(fresh)], **key)
    assert code == 2 and "message abc not found" in err and not fresh.exists()


def test_version_prints_the_version() -> None:
    from artifactflow import __version__

    code, modules, out, _ = _probe(["--version"])
    assert code == 0 and out.strip() == f"artifactflow {__version__}"
    assert sorted(modules & {*ENGINE, "pydantic"}) == []


def test_a_missing_config_dir_names_the_flag(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    code, _, _, err = _probe(["conversations", "--config-dir", str(missing)])
    assert code == 2 and f"--config-dir {missing}: no such folder" in err
    assert "ARTIFACTFLOW_CONFIG_DIR" not in err


def test_every_problem_in_the_settings_file_is_listed_with_the_nearest_key(tmp_path: Path) -> None:
    config, data = make_config(tmp_path), tmp_path / "data"
    (config / "artifactflow.yaml").write_text(
        "modle: gpt-4o\nllm:\n  timout: 5\n  max_retries: -1\ntools:\n  timeout: 0\n"
        "web:\n  search:\n    provder: brave\n"
    )
    code, modules, _, err = _probe(["conversations", "--config-dir", str(config), "--data-dir", str(data)])
    assert code == 2
    assert "5 problems" in err
    for line in (
        "field 'modle': unknown key (did you mean 'model'?)",
        "field 'llm.timout': unknown key (did you mean 'timeout'?)",
        "field 'web.search.provder': unknown key (did you mean 'provider'?)",
        "field 'llm.max_retries': Input should be greater than or equal to 0",
        "field 'tools.timeout': Input should be greater than 0",
    ):
        assert line in err, err
    assert _files(data) == []


def test_strict_false_warns_about_unknown_keys_and_goes_on(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    (config / "artifactflow.yaml").write_text("strict: false\nllm:\n  timout: 5\n  timeout: 7\n")
    settings = load_settings(config, tmp_path / "data")
    assert settings.llm.timeout == 7 and settings.strict is False
    code, _, out, err = _probe(
        ["conversations", "--config-dir", str(config), "--data-dir", str(tmp_path / "data")]
    )
    assert code == 0 and "No conversations" in out
    assert "field 'llm.timout': unknown key (did you mean 'timeout'?)" in err
    assert "ignored: strict is false" in err


def test_an_unknown_key_of_a_model_profile_is_named(tmp_path: Path) -> None:
    config, data = make_config(tmp_path), tmp_path / "data"
    (config / "models.yaml").write_text(
        "profiles:\n  local:\n    modle: tiny\n    tool_choise: auto\n"
    )
    code, _, _, err = _probe(
        ["run", "hi", "--config-dir", str(config), "--data-dir", str(data)], OPENAI_API_KEY="k"
    )
    assert code == 2 and "3 problems" in err, err
    assert "profile 'local', field 'modle': unknown key (did you mean 'model'?)" in err
    assert "profile 'local', field 'tool_choise': unknown key (did you mean 'tool_choice'?)" in err
    assert "profile 'local', field 'model': Field required" in err


def test_serve_on_a_busy_port_exits_7_before_starting(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, modules, out, err = _probe(
            ["serve", "--port", str(port), "--data-dir", str(tmp_path / "data")]
        )
    assert code == 7
    assert f"127.0.0.1:{port} is in use" in err and "--port" in err
    assert "startup" not in (out + err).lower()
    assert sorted(modules & {"fastapi", "uvicorn", "langgraph"}) == []
    assert not (tmp_path / "data").exists()


def test_the_default_memory_embedder_falls_back_without_the_memory_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from artifactflow.errors import ConfigError
    from artifactflow.memory import embedders
    from artifactflow.settings.memory import MemorySettings

    monkeypatch.setattr(embedders, "_STATIC", [])
    monkeypatch.setattr(embedders, "wordllama_installed", lambda: False)
    monkeypatch.setattr(embedders, "model_folder", lambda path: None)  # no MiniLM wheel either
    assert embedders.make_embedder(MemorySettings()) is None  # default: words and recency
    monkeypatch.setattr(embedders.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match="wordllama package is not installed"):
        embedders.make_embedder(MemorySettings(embedder="static"))  # asked for by name


async def test_a_stored_run_still_works_after_the_checks(tmp_path: Path, llm_env) -> None:
    """The checks refuse only what the engine would refuse: a run with a key goes through."""
    config, data = make_config(tmp_path), tmp_path / "data"
    llm_env.script(Text("an answer"))
    code, modules, out, err = _probe(
        ["run", "question", "--json", "--config-dir", str(config), "--data-dir", str(data)],
        OPENAI_API_KEY="k", OPENAI_BASE_URL=llm_env.base_url,
    )
    assert code == 0, err
    async with await Client.open(load_settings(config, data)) as client:
        assert [c["title"] for c in await client.conversations.list()] == ["question"]


def test_the_reaper_ends_an_orphan_the_tests_left_behind(tmp_path: Path) -> None:
    """A process whose parent exited (handed to init, no longer our descendant) still carries
    the session's marker, and is ended; a process without the marker is left alone."""
    import signal
    import time
    import uuid

    import reaper

    token = uuid.uuid4().hex
    pids = tmp_path / "pids"
    spawn = (
        "import subprocess, sys; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], "
        "start_new_session=True); open(sys.argv[1], 'a').write(f'{p.pid}\\n')"
    )
    subprocess.run([sys.executable, "-c", spawn, str(pids)], env={**os.environ, reaper.MARKER: token},
                   check=True, timeout=TIMEOUT)
    unmarked = {k: v for k, v in os.environ.items() if k != reaper.MARKER}
    subprocess.run([sys.executable, "-c", spawn, str(pids)], env=unmarked, check=True, timeout=TIMEOUT)
    orphan, stranger = (int(line) for line in pids.read_text().split())
    try:
        assert reaper._alive(orphan) and reaper._alive(stranger)
        assert reaper.reap(token, descendants=False) == [orphan]
        deadline = time.monotonic() + TIMEOUT
        while reaper._alive(orphan) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not reaper._alive(orphan) and reaper._alive(stranger)
    finally:
        for pid in (orphan, stranger):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_the_research_path_says_once_which_search_provider_to_configure(
    tmp_path: Path, llm
) -> None:
    import shutil

    config = tmp_path / "config"
    shutil.copytree(Path(__file__).resolve().parent.parent / "config", config)
    data = tmp_path / "data"
    llm.script(Text("first answer"), Text("second answer"))
    where = ["--config-dir", str(config), "--data-dir", str(data)]
    key = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": llm.base_url}
    said = []
    # full runs, not start-up: forked from the CLI fork server (tests/cli_fork.py), not probed
    for question in ("first", "second"):
        code, out, err = fork_cli(["run", question, "--no-input", *where], _env(**key), TIMEOUT)
        assert code == 0, err
        said.append(err)
    assert "web search is not configured" in said[0] and "web.search.provider" in said[0]
    assert "searxng" in said[0] and "BRAVE_API_KEY" in said[0] and "TAVILY_API_KEY" in said[0]
    assert "web search is not configured" not in said[1]  # once per data folder

    (config / "artifactflow.yaml").write_text(
        (config / "artifactflow.yaml").read_text().replace("provider: null", "provider: brave")
    )
    llm.script(Text("third answer"))
    code, _, err = fork_cli(
        ["run", "third", "--no-input", *where[:2], "--data-dir", str(tmp_path / "d2")], _env(**key), TIMEOUT
    )
    assert code == 0 and "web search is not configured" not in err


# --- listings start without pydantic: the store's place remembered (cli/settings_cache.py) -------

QUICK_HEAVY = {"pydantic", "pydantic_settings", "yaml", "sqlalchemy", *ENGINE}


def test_a_listing_on_a_fresh_data_folder_creates_nothing(tmp_path: Path) -> None:
    config, data = make_config(tmp_path), tmp_path / "data"
    where = ["--config-dir", str(config), "--data-dir", str(data)]
    for args, said in ((["conversations"], "No conversations (0 in all)"), (["pending"], "No paused messages")):
        code, modules, out, err = _probe([*args, *where])
        assert (code, said in out) == (0, True), err
        assert sorted(modules & {"sqlalchemy", *ENGINE}) == []
    assert not data.exists()


async def test_the_second_listing_uses_the_remembered_settings_until_a_file_changes(
    tmp_path: Path, make_client, llm
) -> None:
    config, data = make_config(tmp_path), tmp_path / "data"
    llm.script(Text("Stored."))
    client = await make_client(config_dir=config, data_dir=data)
    await client.run("the first conversation")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "ARTIFACTFLOW_CONFIG_DIR": str(config),
           "ARTIFACTFLOW_DATA_DIR": str(data)}

    code, first, out, _ = _probe(["conversations", "--json"], **env)  # loads, remembers
    assert code == 0 and "the first conversation" in out and "pydantic_settings" in first
    code, second, again, _ = _probe(["conversations", "--json"], **env)
    assert (code, again) == (0, out)
    assert sorted(second & QUICK_HEAVY) == []  # no pydantic, YAML, SQLAlchemy or engine
    code, modules, _, _ = _probe(["pending"], **env)
    assert code == 0 and sorted(modules & QUICK_HEAVY) == []

    (config / "artifactflow.yaml").write_text("run:\n  max_rounds: 3\n")  # an unknown key
    code, modules, _, err = _probe(["conversations"], **env)
    assert code == 2 and "max_rounds" in err and "pydantic_settings" in modules

    (config / "artifactflow.yaml").write_text(f"data_dir: {tmp_path / 'elsewhere'}\n")
    code, _, out, _ = _probe(["conversations"], **{**env, "ARTIFACTFLOW_DATA_DIR": None})
    assert code == 0 and "No conversations (0 in all)" in out  # the new folder, not the cached one
    code, _, out, _ = _probe(["conversations"], **env)  # the environment's folder again
    assert code == 0 and "the first conversation" in out
