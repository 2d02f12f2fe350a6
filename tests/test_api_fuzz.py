"""Property-based fuzzing of the HTTP API from its own OpenAPI schema (schemathesis).

Every operation gets generated requests, valid ones and invalid ones; the app must never answer
5xx, and its answers must pass schemathesis' checks against the schema it publishes.

schemathesis runs the ASGI app in its own event-loop thread and starts the lifespan there, so
the app is built from a client factory (which also creates a bearer token: auth is on, so
the ownership checks are fuzzed too); `shutdown_lifespans()` closes the client. The model is scripted to answer "ok" to anything, so runs started by fuzzed `POST /chat`
calls finish quickly. (schemathesis' own pytest integration, `from_fixture` + `parametrize`,
does not work with pytest 9, so each operation is driven by Hypothesis directly.)
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from conftest import make_config
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance
from scripted_llm import ScriptedLLM, Text
from waiting import wait_until_sync

from artifactflow import Client, load_settings
from artifactflow.api.app import create_app
from artifactflow.api.limits import active_runs

# The schema does not depend on settings: read the operations at collection time.
OPERATIONS = [
    (method.upper(), path)
    for path, item in create_app().openapi()["paths"].items()
    for method in item
]


# Unknown query parameters are ignored by design (proxies and browsers add their own), and the
# auth header is supplied outside the generated case, which this check would misread.
EXCLUDED = [negative_data_rejection]
# A workflow run's free-form `input` is refused when a string or key in it holds NUL (no
# database stores it; the protocol's bodies are checked the same way), which JSON Schema cannot
# say of values at any depth: a generated NUL is a 422 there, not a schema violation.
FREE_FORM = {("POST", "/api/v1/workflows/{name}/runs")}


def wait_idle(client: Client) -> None:
    """Let runs started by a fuzzed request finish before the next case (no pile-up of runs)."""
    wait_until_sync(
        lambda: not active_runs(client), what="the end of the fuzzer's runs"
    )


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root = tmp_path_factory.mktemp("fuzz")
    with ScriptedLLM() as llm, pytest.MonkeyPatch.context() as patch:
        llm.route(lambda request: Text("ok"))
        patch.setenv("OPENAI_BASE_URL", llm.base_url)
        patch.setenv("OPENAI_API_KEY", "test-key")
        for name in list(os.environ):
            if name.startswith("ARTIFACTFLOW_"):
                patch.delenv(name)
        yaml_text = "auth:\n  enabled: true\nserver:\n  heartbeat_seconds: 0.2\n"
        config = make_config(root, lead_tools=["create_artifact"], yaml_text=yaml_text)
        settings = load_settings(config, root / "data")
        opened: list[tuple[Client, str]] = []

        async def open_client() -> Client:
            client = await Client.open(settings)
            opened.append((client, (await client.admin.create_token("fuzzer"))[1]))
            return client

        app = create_app(open_client)
        try:
            schema = schemathesis.openapi.from_asgi("/openapi.json", app)  # starts the lifespan
            client, token = opened[0]
            yield schema, {"Authorization": f"Bearer {token}"}, client
        finally:
            asgi.shutdown_lifespans()  # closes the client the lifespan opened


# Runs started by fuzzed requests execute in schemathesis' loop thread, concurrently with
# Hypothesis, and LangGraph draws checkpoint ids from the global `random`; Hypothesis then warns
# that a strategy used `random`. It is not the strategy, so that warning is not an error here.
@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_no_server_errors(api_schema: Any, method: str, path: str, mode: GenerationMode) -> None:
    schema, auth, client = api_schema
    operation = schema[path][method]

    @settings(
        max_examples=15,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def check(case: Any) -> None:
        excluded = EXCLUDED + ([positive_data_acceptance] if (method, path) in FREE_FORM else [])
        response = case.call_and_validate(headers=auth, excluded_checks=excluded)
        assert response.status_code < 500, response.text
        wait_idle(client)

    check()
