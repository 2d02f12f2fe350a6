"""What the route fuzzers (test_openapi_fuzz.py, test_route_fuzz.py, test_cross_user_matrix.py)
found, each as its one-request repro: a 4xx and nothing stored, where the server answered 500."""

from __future__ import annotations

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
