"""schemathesis over every route of the app: our `/api/v1` (as published), and the Agent
Protocol, A2A and page routes the published document leaves out (`route_surface.full_schema`).

Each operation gets generated valid and invalid requests with a user's bearer token (auth on,
a second user exists); the app must never answer 5xx. Path parameters are drawn from real ids
the user holds as well as from generated strings (`_seed`: `anyOf` an `enum` of them), so a
fuzzed request reaches the handler behind the ownership check instead of a 404 only.

Bounded: `AF_FUZZ_EXAMPLES` examples per operation and mode (default 3: well under a minute on
a busy 2-core machine); a manual run sets it higher (at 100: 13,109 requests over the
operations and 2,682 in stateful sequences, 0 5xx).
`/mcp` (JSON-RPC over Streamable HTTP, not an OpenAPI operation) is fuzzed by
tests/test_route_fuzz.py; `/api/v1` at more examples by tests/test_api_fuzz.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from agent_protocol.toy import toy_route, write_note
from conftest import make_config
from hypothesis import HealthCheck, Phase, given, settings
from route_surface import full_schema, operations
from schemathesis import GenerationMode
from schemathesis.python import asgi
from scripted_llm import ScriptedLLM
from waiting import wait_until_sync

from artifactflow import Client, load_settings
from artifactflow.api.app import create_app
from artifactflow.api.limits import active_runs

EXAMPLES = int(os.environ.get("AF_FUZZ_EXAMPLES", "3"))
SCHEMA = full_schema()
OPERATIONS = operations(SCHEMA)


def _negatable(method: str, path: str) -> bool:
    """Has something to make invalid (a body, a query parameter, a path parameter that is not
    any string): else negative mode has no case to generate."""
    operation = SCHEMA["paths"][path][method.lower()]
    params = operation.get("parameters", [])
    return bool(operation.get("requestBody")) or any(
        p["in"] != "path" or p.get("schema", {}).get("type") != "string" for p in params
    )


CASES = [
    (method, path, mode)
    for method, path in OPERATIONS
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    if mode is GenerationMode.POSITIVE or _negatable(method, path)
]
FIGURES = {"requests": 0, "5xx": 0}


def _seed(schema: dict[str, Any], ids: dict[str, list[str]]) -> dict[str, Any]:
    """Path parameters named like a resource the user holds: real ids or any string."""
    for item in schema["paths"].values():
        for operation in item.values():
            for param in operation.get("parameters", []):
                real = ids.get(param["name"])
                if param["in"] == "path" and real:
                    param["schema"] = {"anyOf": [{"enum": real}, param.get("schema", {})]}
    return schema


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root = tmp_path_factory.mktemp("openapi-fuzz")
    with ScriptedLLM() as llm, pytest.MonkeyPatch.context() as patch:
        llm.route(toy_route)
        patch.setenv("OPENAI_BASE_URL", llm.base_url)
        patch.setenv("OPENAI_API_KEY", "test-key")
        for name in list(os.environ):
            if name.startswith("ARTIFACTFLOW_"):
                patch.delenv(name)
        yaml_text = "auth:\n  enabled: true\nserver:\n  heartbeat_seconds: 0.2\n"
        config = make_config(root, lead_tools=["write_note"], yaml_text=yaml_text)
        opened: list[tuple[Client, str]] = []

        async def open_client() -> Client:
            client = await Client.open(load_settings(config, root / "data"), extra_tools=[write_note])
            await client.admin.create_token("bystander")  # a second user, whose data is not the fuzzer's
            opened.append((client, (await client.admin.create_token("fuzzer"))[1]))
            return client

        app = create_app(open_client)
        try:
            schemathesis.openapi.from_asgi("/openapi.json", app)  # starts the lifespan
            client, token = opened[0]
            auth = {"Authorization": f"Bearer {token}"}
            ids = _real_ids(app, auth)
            schema = schemathesis.openapi.from_dict(_seed(SCHEMA, ids))
            schema.app = app
            yield schema, auth, client
        finally:
            asgi.shutdown_lifespans()
    print(f"\nopenapi fuzz: {len(OPERATIONS)} operations, {FIGURES['requests']} requests, "
          f"{FIGURES['5xx']} 5xx")


def _real_ids(app: Any, auth: dict[str, str]) -> dict[str, list[str]]:
    """Create a thread with a finished run and one paused on an approval, through the app."""
    with asgi.get_client(app) as http:
        assistant = http.post("/assistants/search", json={}, headers=auth).json()[0]["assistant_id"]
        ids: dict[str, list[str]] = {"assistant_id": [assistant], "thread_id": [], "run_id": [],
                                     "conversation_id": [], "message_id": []}
        for text in ("hello", "write a note: fuzz"):
            thread = http.post("/threads", json={}, headers=auth).json()["thread_id"]
            http.post(f"/threads/{thread}/runs/wait", headers=auth, json={
                "assistant_id": assistant, "input": {"messages": [{"role": "user", "content": text}]}})
            run = http.get(f"/threads/{thread}/runs", headers=auth).json()[0]["run_id"]
            ids["thread_id"].append(thread)
            ids["conversation_id"].append(thread)
            ids["run_id"].append(run)
        for conversation in ids["conversation_id"]:
            branch = http.get(f"/api/v1/conversations/{conversation}/branch", headers=auth).json()
            ids["message_id"].extend(m["id"] for m in branch.get("messages", []))
    return {k: v for k, v in ids.items() if v}


def _wait_idle(client: Client) -> None:
    wait_until_sync(lambda: not active_runs(client), what="the end of the fuzzer's runs")


# LangGraph draws checkpoint ids from the global `random` in the app's loop thread, which
# Hypothesis reports as a strategy using `random`: not the strategy, so not an error here.
@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")
@pytest.mark.parametrize(("method", "path", "mode"), CASES, ids=[f"{m} {p} {g}" for m, p, g in CASES])
def test_no_server_errors(api: Any, method: str, path: str, mode: GenerationMode) -> None:
    schema, auth, client = api
    operation = schema[path][method]

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def check(case: Any) -> None:
        response = case.call(headers=auth)
        FIGURES["requests"] += 1
        FIGURES["5xx"] += response.status_code >= 500
        assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.text[:300]}"
        _wait_idle(client)

    check()


def test_every_route_is_fuzzed() -> None:
    """A new route is in the document (so fuzzed above) or excused here with a reason."""
    from route_surface import app_routes

    excused = {
        ("GET", "/openapi.json"): "the document itself",
        ("GET", "/mcp"): "JSON-RPC, not an OpenAPI operation: tests/test_route_fuzz.py",
        ("POST", "/mcp"): "JSON-RPC, not an OpenAPI operation: tests/test_route_fuzz.py",
        ("DELETE", "/mcp"): "JSON-RPC, not an OpenAPI operation: tests/test_route_fuzz.py",
    }
    missing = set(app_routes()) - set(OPERATIONS) - set(excused)
    assert missing == set()


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")
def test_stateful_sequences_never_answer_5xx(api: Any) -> None:
    """Sequences along the links schemathesis infers between operations (an id one answer
    returns, used by the next request: a thread created, then its runs, state and copy; a
    memory listed, then fetched and deleted): no step answers 5xx."""
    schema, auth, client = api
    base = schema.as_state_machine()
    assert len(base.bundles) >= 10, "links were inferred between the operations"
    steps = {"requests": 0}

    class Sequences(base):  # type: ignore[misc, valid-type]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"headers": auth}

        def validate_response(self, response: Any, case: Any, *args: Any, **kwargs: Any) -> None:
            steps["requests"] += 1
            FIGURES["requests"] += 1
            FIGURES["5xx"] += response.status_code >= 500
            assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.text[:300]}"
            _wait_idle(client)

    # generate only: the server keeps its state between scenarios, so a replayed prefix can
    # meet other bundles (Hypothesis calls that a flaky strategy when it replays to shrink)
    Sequences.run(settings=settings(max_examples=EXAMPLES * 4, stateful_step_count=6, deadline=None,
                                    database=None, suppress_health_check=list(HealthCheck),
                                    phases=[Phase.generate]))
    assert steps["requests"] >= EXAMPLES * 4
