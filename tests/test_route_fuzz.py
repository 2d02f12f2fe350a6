"""Hostile input to every route of the app, generated from the routes' own schemas: each answers
4xx, and nothing Alice can see changed (threads, runs, states, messages, artifacts, memories,
store items, knowledge, crons, workflow runs), the paused CONFIRM tool did not run, and no
model call was made.

For each operation of `route_surface.full_schema()`, one field at a time is made hostile in an
otherwise well-formed request naming Alice's own resources (`surface_world.valid_bodies`), so
the refusal is that field's: a wrong JSON type, an object nested 300 deep, a lone surrogate, a
NUL, an integer of 10**30, a negative limit or offset, an unknown enum value; bodies that are
not objects at all; NUL in path parameters. A route with no input to fuzz is listed in
`NO_INPUT`; the coverage check fails on a route that is in neither.

On SQLite and PostgreSQL (their text types differ: what one stores the other may refuse).
About 15 s each: ~940 requests over a real socket, the price of covering every route.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from route_surface import app_routes, full_schema, operations
from scripted_llm import ScriptedLLM
from surface_world import World, snapshot, targets, valid_bodies, world
from waiting import ceiling

SURROGATE, NUL, HUGE = "a\ud800b", "a\x00b", 10**30
NO_INPUT = {
    ("GET", "/ok"), ("GET", "/info"), ("GET", "/openapi.json"), ("GET", "/.well-known/agent-card.json"),
    ("GET", "/"), ("GET", "/favicon.ico"), ("GET", "/highlight.css"), ("GET", "/docs"),
    ("GET", "/docs/oauth2-redirect"), ("GET", "/redoc"), ("GET", "/docs-assets/redoc.standalone.js"),
    ("GET", "/api/v1/workflows"), ("GET", "/api/v1/assistants"),
    # the MCP session's server-to-client event stream: without a session it stays open (by the
    # SDK's design); it reads no body and no parameter
    ("GET", "/mcp"),
}
# The MCP endpoint is JSON-RPC, not in the document: fuzzed with raw bodies (no session: 4xx).
MCP_BODIES = [[], "x", {"jsonrpc": "2.0", "id": 1, "method": 5},
              {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": SURROGATE}}]


def _deep(levels: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for _ in range(levels):
        out = {"a": out}
    return out


def _resolve(schema: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _kinds(schema: dict[str, Any], doc: dict[str, Any]) -> tuple[set[str], dict[str, Any]]:
    """The JSON types a field accepts (empty: any) and its non-null schema."""
    schema = _resolve(schema, doc)
    options = [_resolve(s, doc) for s in schema.get("anyOf", schema.get("oneOf", [schema]))]
    options = [s for s in options if s.get("type") != "null"]
    kinds = {s["type"] for s in options if "type" in s}
    if any("type" not in s and "enum" not in s and "const" not in s for s in options):
        kinds = set()  # one option takes any JSON
    return kinds, options[0] if len(options) == 1 else {}


def hostile(schema: dict[str, Any], doc: dict[str, Any], name: str) -> list[tuple[str, Any]]:
    """(label, value) pairs the field must refuse."""
    kinds, single = _kinds(schema, doc)
    out: list[tuple[str, Any]] = []
    if not kinds:  # free-form JSON: still bounded and clean
        return [("depth 300", _deep(300)), ("surrogate", {"k": SURROGATE}), ("NUL", [NUL]),
                ("huge int", {"n": HUGE})]
    if "enum" in single or "const" in single:
        out.append(("unknown enum", "bogus-value"))
    if "string" in kinds:
        out += [("surrogate", SURROGATE), ("NUL", NUL)]
    else:
        out.append(("wrong type: string", "x"))
    if "integer" in kinds or "number" in kinds:
        out.append(("huge int", HUGE))
        if name in ("limit", "offset") or single.get("minimum", -1) >= 0:
            out.append(("negative", -1))
    elif "string" not in kinds:
        pass
    else:
        out.append(("wrong type: number", 5))
    if "object" in kinds:
        out.append(("depth 300", _deep(300)))
    if "array" in kinds:
        out.append(("depth 300 item", [_deep(300)]))
    if kinds == {"boolean"}:
        out.append(("wrong type: list", [True]))
    return out


def _query_hostile(param: dict[str, Any], doc: dict[str, Any]) -> list[tuple[str, str]]:
    kinds, single = _kinds(param.get("schema", {}), doc)
    out = [("NUL", NUL)]
    if "enum" in single:
        out.append(("unknown enum", "bogus-value"))
    if kinds & {"integer", "number"}:
        out += [("not a number", "abc"), ("huge int", str(HUGE))]
        if param["name"] in ("limit", "offset") or single.get("minimum", -1) >= 0:
            out.append(("negative", "-1"))
    if kinds == {"boolean"}:
        out.append(("not a boolean", "maybe"))
    return out


Case = tuple[str, str, str, str, Any, dict[str, str]]  # label, method, template, url, body, query


def _cases(w: World, doc: dict[str, Any]) -> list[Case]:
    ids = {**w.ids, "alice_id": w.alice_id}
    out: list[Case] = []
    for method, path in operations(doc):
        operation = doc["paths"][path][method.lower()]
        target = targets(path, ids)[0]
        url = path.format(**target)
        body = valid_bodies(method, path, ids, target)[0]
        params = operation.get("parameters", [])
        query = {p["name"]: "1" for p in params if p["in"] == "query" and p.get("required")}
        if path == "/store/items" and method == "GET":
            query = {"namespace": "notes", "key": "k1"}
        for param in params:
            if param["in"] == "query":
                for label, value in _query_hostile(param, doc):
                    out.append((f"query {param['name']}: {label}", method, path, url, body,
                                {**query, param["name"]: value}))
            elif param["in"] == "path":
                out.append((f"path {param['name']}: NUL", method, path,
                            path.format(**{**target, param["name"]: "a%00b"}), body, query))
        content = operation.get("requestBody", {}).get("content", {}).get("application/json")
        if content:
            schema = _resolve(content["schema"], doc)
            out += [("body: a list", method, path, url, [], query), ("body: a string", method, path, url, "x", query)]
            base = body if isinstance(body, dict) else {}
            for name, field in schema.get("properties", {}).items():
                out += [(f"body {name}: {label}", method, path, url, {**base, name: value}, query)
                        for label, value in hostile(field, doc, name)]
    for body in MCP_BODIES:
        out.append(("mcp: no session", "POST", "/mcp", "/mcp", body, {}))
    out.append(("mcp: no session", "DELETE", "/mcp", "/mcp", None, {}))
    return out


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_hostile_input_to_every_route_is_refused_and_changes_nothing(
    tmp_path: Path, llm_env: ScriptedLLM, backend: str
) -> None:
    doc = full_schema()
    async with world(tmp_path, llm_env, backend) as w:
        cases = _cases(w, doc)
        covered = {(m, p) for _, m, p, *_ in cases}
        assert set(app_routes()) - covered - NO_INPUT == set(), "a route with no hostile case"
        assert NO_INPUT <= set(app_routes()), "an excused route that no longer exists"
        before = await snapshot(w)
        wrong = []
        async with httpx.AsyncClient(base_url=w.url, timeout=60, headers=w.alice) as http:
            for label, method, _, url, body, query in cases:
                content = None if body is None else json.dumps(body).encode()
                headers = {"Content-Type": "application/json"}
                if url == "/mcp":
                    headers["Accept"] = "application/json, text/event-stream"
                if "access_token" in query:  # read only without the header: a NUL token is 401
                    headers["Authorization"] = ""
                try:
                    answer = await http.request(method, url, params=query, content=content,
                                                headers=headers, timeout=ceiling(10))
                except httpx.TimeoutException:  # accepted, and streaming: not refused
                    wrong.append((label, method, url, str(body)[:100], 0, "no answer (a stream?)"))
                    continue
                if url.startswith("/a2a/") and answer.status_code == 200 and "error" in answer.json():
                    continue  # JSON-RPC: a refusal is an error object in a 200
                if not 400 <= answer.status_code < 500:
                    wrong.append((label, method, url, str(body)[:100], answer.status_code, answer.text[:160]))
        after = await snapshot(w)
        changed = sorted(k for k in before if before[k] != after[k])
        print(f"\nroute fuzz: {len(covered)} routes, {len(cases)} hostile requests, "
              f"{sum(1 for x in wrong if x[4] >= 500)} 5xx, {len(wrong)} not 4xx, changed: {changed}")
        assert wrong == [], "\n".join(map(str, wrong))
        assert after == before
