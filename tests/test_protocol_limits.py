"""A body over `server.max_request_bytes` on a protocol route answers 413 in the protocol's
error shape (`{"detail": ...}`), whether refused by its Content-Length or while being read,
and creates nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
from browser_helpers import serving

from artifactflow.api.app import create_app


async def test_a_body_too_large_is_413_with_detail(make_client: Any, llm: Any) -> None:
    af = await make_client(yaml_text="server:\n  max_request_bytes: 200\n")
    async with serving(create_app(client=af)) as url, httpx.AsyncClient(base_url=url) as http:
        big = {"metadata": {"note": "x" * 500}}
        answer = await http.post("/threads", json=big)
        assert answer.status_code == 413 and "max_request_bytes" in answer.json()["detail"]

        async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: counted while read
            yield b'{"metadata": {"note": "'
            for _ in range(10):
                yield b"y" * 50
            yield b'"}}'

        answer = await http.post(
            "/threads", content=chunked(), headers={"content-type": "application/json"}
        )
        assert answer.status_code == 413 and answer.json()["detail"]
        assert (await http.post("/threads/search", json={})).json() == []
        # /api/v1 keeps its own envelope
        answer = await http.post("/api/v1/chat", json={"content": "x" * 500})
        assert answer.status_code == 413 and answer.json()["error"]["code"] == "payload_too_large"


async def test_an_unexpected_error_is_a_500_with_detail(
    make_client: Any, llm: Any, monkeypatch: Any
) -> None:
    from artifactflow.protocol import catalog

    def broken(client: Any) -> list[Any]:
        raise RuntimeError("a bug")

    af = await make_client()
    async with serving(create_app(client=af)) as url, httpx.AsyncClient(base_url=url) as http:
        monkeypatch.setattr(catalog, "assistants", broken)
        answer = await http.get("/assistants/agent")
        assert answer.status_code == 500
        assert answer.json() == {"detail": "internal server error; see the server log"}
