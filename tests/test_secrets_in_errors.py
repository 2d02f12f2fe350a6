"""The process keeps its own secrets out of every stored and printed error (issue 34).

Repro: some OpenAI-compatible proxies echo the refused key ("Incorrect API key provided:
sk-..."); the text was stored and shown verbatim in the `error` event, the message row, the
model-call record, the checkpoints, the API and the CLI. Now every `ArtifactFlowError`'s text,
and each error text stored or printed that did not start as one, goes through
`errors.scrub_secrets`.

The proof reads the data folder's raw bytes (every SQLite file and its write-ahead log), so
no place that stores a copy can be missed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_helpers import CLI
from conftest import make_config
from scripted_llm import Error

from artifactflow.errors import FatalLLMError, scrub_secrets

KEY = "sk-proj-Zq8vT3kLm9Pw2Rx7Yb4Nc6Hd1Fs5Gj0K"
ECHO = f"Incorrect API key provided: {KEY}. You can find your API key at https://example.invalid."


def _refuse(llm: Any) -> None:
    llm.script(Error(401, ECHO, type="invalid_request_error", code="invalid_api_key"))


def _stored_bytes(data: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(data.rglob("*")) if p.is_file())


async def test_a_provider_echoing_the_key_stores_no_copy_of_it(
    make_client: Any, llm_env: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    client = await make_client()
    _refuse(llm_env)
    result = await client.run("hello")
    assert result.status == "failed"
    assert KEY not in (result.error or "") and "Incorrect API key provided: [redacted]" in (result.error or "")
    events = await client.runs.events(result.message_id)
    assert events[-1].type == "error" and KEY not in events[-1].data.message
    message = await client.conversations.message(result.message_id)
    assert KEY not in str(dict(message))
    await client.aclose()
    assert KEY.encode() not in _stored_bytes(tmp_path / "data")
    assert b"[redacted]" in _stored_bytes(tmp_path / "data")


def test_the_cli_prints_no_copy_of_the_key(
    tmp_path: Path, llm_env: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cli = CLI(make_config(tmp_path), tmp_path / "data", capsys)
    _refuse(llm_env)
    # `main()` in a process of its own, forked (tests/cli_fork.py): what it prints is the subject
    done = cli.fork("run", "hello", env=CLI.env(OPENAI_BASE_URL=llm_env.base_url, OPENAI_API_KEY=KEY))
    assert done.code == 1, done
    assert "[redacted]" in done.out + done.err, done
    assert KEY not in done.out + done.err
    _refuse(llm_env)
    shown = cli.fork("run", "--debug", "hello", env=CLI.env(OPENAI_BASE_URL=llm_env.base_url, OPENAI_API_KEY=KEY))
    assert KEY not in shown.out + shown.err
    assert KEY.encode() not in _stored_bytes(cli.data)


def test_scrubbing_names_what_it_removes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARTIFACTFLOW_API_TOKEN", "tok-0123456789abcdef")
    text = "token tok-0123456789abcdef, url postgresql://app:hunter22@db/x, header Bearer abcdefghijklmnop"
    assert scrub_secrets(text) == (
        "token [redacted], url postgresql://app:[redacted]@db/x, header Bearer [redacted]"
    )
    assert "tok-0123456789abcdef" not in str(FatalLLMError(text))
    assert scrub_secrets("a task-list of 20 items") == "a task-list of 20 items"  # words stay
