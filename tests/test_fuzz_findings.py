"""What the route fuzzers (test_openapi_fuzz.py, test_route_fuzz.py, test_cross_user_matrix.py)
found, each as its one-request repro: a 4xx and nothing stored, where the server answered 500."""

from __future__ import annotations

import json
from typing import Any

import httpx

from artifactflow.api.app import create_app


async def _http(make_client: Any) -> tuple[httpx.AsyncClient, Any]:
    af = await make_client()
    app = create_app(client=af)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t"), af


async def test_store_value_with_an_integer_beyond_64_bits_is_refused(make_client: Any) -> None:
    """schemathesis: `PUT /store/items` with `{"v": 2**64}` in the value was a 500 (orjson
    cannot encode it); now 422 naming the problem, and nothing is stored."""
    http, _ = await _http(make_client)
    async with http:
        for value in ({"v": 2**64}, {"v": [-(2**63) - 1]}):
            answer = await http.put("/store/items", json={"namespace": ["n"], "key": "k", "value": value})
            assert answer.status_code == 422, answer.text
            assert "64-bit" in answer.text
        assert (await http.get("/store/items", params={"namespace": "n", "key": "k"})).status_code == 404
        edge = await http.put("/store/items", json={"namespace": ["n"], "key": "k", "value": {"v": 2**63 - 1}})
        assert edge.status_code == 204, edge.text
        got = await http.get("/store/items", params={"namespace": "n", "key": "k"})
        assert got.json()["value"] == {"v": 2**63 - 1}


def _deep(levels: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for _ in range(levels):
        out = {"a": out}
    return out


FOUND = [  # (method, path, body): each was a 500 or a 2xx that went ahead
    ("POST", "/api/v1/render", {"text": "a\ud800b"}),  # 500
    ("POST", "/api/v1/render", {"text": "a\x00b"}),  # 200, NUL rendered as U+FFFD
    ("POST", "/api/v1/chat", {"content": "hi", "conversation_id": "a\ud800b"}),  # 500
    ("POST", "/api/v1/chat", {"content": "hi", "parent_message_id": "a\ud800b"}),  # 500
    ("POST", "/api/v1/chat", {"content": "hi", "assistant": "a\ud800b"}),  # 500
    # an ignored key holding 300 levels: the run started with it dropped
    ("POST", "/runs/wait", {"assistant_id": "lead_agent", "checkpoint": _deep(300),
                            "input": {"messages": [{"role": "user", "content": "hi"}]}}),
    ("POST", "/runs", {"assistant_id": "lead_agent", "extra": {"k": "a\ud800b"},
                       "input": {"messages": [{"role": "user", "content": "hi"}]}}),
    ("POST", "/threads", {"metadata": {}, "unknown": _deep(300)}),
    ("PUT", "/store/items", {"namespace": ["n"], "key": "k", "value": {}, "ttl": 1e30}),  # 204
    ("POST", "/store/namespaces", {"max_depth": 10**30}),  # 200
]


async def test_hostile_fields_found_by_the_route_fuzz_are_refused(make_client: Any, llm_env: Any) -> None:
    """tests/test_route_fuzz.py's findings, one request each: 422, and nothing was stored
    or started (no thread, no store item, no model call)."""
    http, _ = await _http(make_client)
    async with http:
        for method, path, body in FOUND:
            content = json.dumps(body).encode()  # ASCII escapes: the lone surrogate as sent
            answer = await http.request(method, path, content=content,
                                        headers={"Content-Type": "application/json"})
            assert answer.status_code == 422, (method, path, answer.status_code, answer.text[:200])
        assert (await http.post("/threads/search", json={})).json() == []
        assert (await http.get("/store/items", params={"namespace": "n", "key": "k"})).status_code == 404
        assert llm_env.requests == []  # no run started
