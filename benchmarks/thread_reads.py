"""Do reads of a conversation grow with its length? Latency of each read at 10, 100 and 1,000
messages.

Each size is one conversation whose messages form one branch (each the child of the one before,
the last active), every message answered, with EVENTS events of its run stored (one a 4 KB tool
result, compressed as the event log stores it), beside OTHERS short conversations. Reads:

- `head`:            `thread_reads.thread_head` (open the thread, its state);
- `branch page`:     `thread_reads.branch_page`, the newest PAGE messages of the active branch;
- `search page`:     `thread_reads.conversation_page`, PAGE conversations with their active message;
- `tree (all)`:      the whole message list (`list_messages`, what the conversation tree reads) —
                     O(thread) by contract, shown as the baseline that grows;
- `events (all)`:    every message's events (`events(message_id)` for each message of the branch,
                     what rebuilding a thread's values from the event log reads) — the old way.

Sizes are interleaved and each read repeated; figures are medians (and ranges) in ms, and the
ratio of the 1,000-message median to the 10-message one (target ≤ 2 for the O(page) reads).
The benchmark asserts what each read returned (page lengths, the active message, every event).
The machine is shared: run it on an idle one for absolute figures; the ratios are within one run.

With `--protocol`, the Agent Protocol's reads of the same sizes are timed too, in process over
ASGI against a served client: `GET /threads/{id}` (open), `GET /threads/{id}/state`, `POST
/threads/{id}/history` (a page of 10 states) and `POST /threads/search` (the page holding that
size's thread, `ids`, with its values). Their conversations are copies of one real run's
message and events (one tool round with a 4 KB result, then the answer, on the peers' fake
model), so the protocol reads events of the shapes a run writes; the state must hold 4
messages per message of the thread. A read is timed from the request to the last byte of
the body received; decoding and checking it come after. The server renders each ended
message once and keeps it (src/protocol/renderings.py: stored in `ap_renderings`, and in
memory): plain rows read with both; `(restart)` rows clear the memory first, as the first
read after a restart (renderings read from the database); `(first)` rows also delete the
stored renderings, as the first read of a thread ever (every message rendered from its
events). On code before stored renderings both are its cold read (memory cleared).

The protocol's state carries the whole branch's messages by contract (`values`; LangGraph's
server does the same and agent-chat-ui needs it), so its bytes grow with the thread: a
history page of 10 states carries the branch 10 times. So the `floor` rows time sending the
same bytes (each read's body at that size, answered as it is by a bare app over the same
transport: in process, ASGI hands a body over by reference, so this floor is near zero), the
`floor over TCP` rows receiving them over a loopback socket (what a served body costs to
move at least), and the table after gives each read's bytes and its time above the
in-process floor per MB (what the server does per byte it sends).

Run: `python benchmarks/thread_reads.py [--sizes 10,100,1000] [--repeats 15] [--pg URL]
[--protocol | --protocol-only]` (`--pg`: also on PostgreSQL, an empty database at URL).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from artifactflow.core.store import schema as t
from artifactflow.core.store.codec import event_row
from artifactflow.core.store.repository import AppStore
from artifactflow.core.store.thread_reads import branch_page, conversation_page, thread_head

EVENTS = 4
PAGE = 20
OTHERS = 50
TOOL_RESULT = ("lorem ipsum dolor sit amet " * 160)[:4096]


async def build(store: AppStore, size: int) -> tuple[str, list[str]]:
    """One conversation of `size` messages on one branch, with their events; its id and the
    message ids, oldest first."""
    cid = uuid.uuid4().hex
    now = time.time()
    ids = [uuid.uuid4().hex for _ in range(size)]
    messages, events = [], []
    for n, mid in enumerate(ids):
        messages.append({
            "id": mid, "conversation_id": cid, "parent_id": ids[n - 1] if n else None,
            "thread_id": f"thread-{mid}", "content": f"question {n}", "response": f"answer {n}",
            "status": "completed", "outcome": "answered", "error": None, "waiting_for": None,
            "metrics": '{"tokens": 100}', "run_token": None, "lease_expires_at": None,
            "checkpoints_deleted": True, "created_at": now + n, "updated_at": now + n,
        })
        for k in range(EVENTS):
            data = {"result": TOOL_RESULT} if k == 1 else {"text": f"event {k}"}
            events.append(event_row(mid, {
                "event_id": k + 1, "type": "tool_complete" if k == 1 else "text",
                "agent": "lead_agent", "timestamp": now + n, "data": data,
            }))
    conversation = {
        "id": cid, "user_id": None, "title": f"{size} messages", "active_message_id": ids[-1],
        "created_at": now, "updated_at": now + size,
    }
    await store.write(t.conversations.insert().values(**conversation))
    for start in range(0, size, 200):
        await store.write(t.messages.insert().values(messages[start : start + 200]))
    for start in range(0, len(events), 500):
        await store.write(t.events.insert().values(events[start : start + 500]))
    return cid, ids


def reads(store: AppStore, cid: str, ids: list[str]) -> dict[str, Callable[[], Awaitable[None]]]:
    """Each read, with the check of what it returned."""
    size = len(ids)

    async def head() -> None:
        found = await thread_head(store, cid)
        assert found is not None and found.active is not None and found.active["id"] == ids[-1]

    async def branch() -> None:
        page = await branch_page(store, cid, limit=PAGE)
        assert page is not None and [m["id"] for m in page.messages] == ids[::-1][:PAGE]

    async def search() -> None:
        heads = await conversation_page(store, limit=PAGE)
        assert len(heads) == PAGE and all(h.active is not None for h in heads)

    async def tree() -> None:
        assert len(await store.list_messages(cid)) == size

    async def events() -> None:
        total = 0
        for mid in ids:
            total += len(await store.events(mid))
        assert total == size * EVENTS

    return {
        "head": head, "branch page": branch, "search page": search,
        "tree (all)": tree, "events (all)": events,
    }


async def measure(store: AppStore, sizes: list[int], repeats: int) -> dict[tuple[str, int], list[float]]:
    for _ in range(OTHERS):
        await build(store, 3)
    built = {size: await build(store, size) for size in sizes}
    timings: dict[tuple[str, int], list[float]] = {}
    for repeat in range(repeats):
        order = sizes if repeat % 2 == 0 else sizes[::-1]
        for size in order:
            for name, read in reads(store, *built[size]).items():
                if name == "events (all)" and size > 100 and repeat >= 3:
                    continue  # seconds per read at 1,000: three samples say enough
                started = time.perf_counter()
                await read()
                timings.setdefault((name, size), []).append((time.perf_counter() - started) * 1000)
    return timings


def report(label: str, sizes: list[int], timings: dict[tuple[str, int], list[float]]) -> str:
    small, large = min(sizes), max(sizes)
    names = list(dict.fromkeys(name for name, _ in timings))
    head = " | ".join(f"{s} messages, ms" for s in sizes)
    lines = [f"\n{label}\n", f"| read | {head} | {large} ÷ {small} |", "|---|" + "---:|" * (len(sizes) + 1)]
    for name in names:
        cells = []
        for size in sizes:
            v = timings[(name, size)]
            cells.append(f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f})")
        ratio = statistics.median(timings[(name, large)]) / statistics.median(timings[(name, small)])
        lines.append(f"| {name} | {' | '.join(cells)} | {ratio:.2f} |")
    return "\n".join(lines)


async def run(url: str | None, sizes: list[int], repeats: int) -> str:
    with tempfile.TemporaryDirectory() as folder:
        if url is None:
            store = await AppStore.open(None, sqlite_path=Path(folder) / "app.db")
            label = "SQLite"
        else:
            store = await AppStore.open(url)
            label = "PostgreSQL"
        try:
            timings = await measure(store, sizes, repeats)
        finally:
            await store.close()
    return report(
        f"{label}: medians (min–max) of {repeats} interleaved repeats; page = {PAGE}; "
        f"{EVENTS} events per message; {OTHERS} other conversations",
        sizes,
        timings,
    )


async def copy_thread(store: AppStore, seed: str, size: int) -> tuple[str, list[str]]:
    """A conversation of `size` copies of message `seed` (its row and its stored events) on
    one branch, the last active."""
    row = dict((await store.fetch_rows(sa.select(t.messages).where(t.messages.c.id == seed)))[0])
    rows = await store.fetch_rows(sa.select(t.events).where(t.events.c.message_id == seed))
    events = [dict(r) for r in rows]
    cid, now = uuid.uuid4().hex, time.time()
    ids = [uuid.uuid4().hex for _ in range(size)]
    await store.write(t.conversations.insert().values(
        id=cid, user_id=None, title=f"{size} messages", active_message_id=ids[-1],
        created_at=now, updated_at=now + size,
    ))
    messages, copies = [], []
    for n, mid in enumerate(ids):
        messages.append({**row, "id": mid, "conversation_id": cid, "thread_id": f"thread-{mid}",
                         "parent_id": ids[n - 1] if n else None, "created_at": now + n,
                         "updated_at": now + n})
        copies += [{**e, "message_id": mid} for e in events]
    for start in range(0, size, 200):
        await store.write(t.messages.insert().values(messages[start : start + 200]))
    for start in range(0, len(copies), 500):
        await store.write(t.events.insert().values(copies[start : start + 500]))
    return cid, ids


async def protocol_run(url: str | None, sizes: list[int], repeats: int) -> str:
    """The protocol's thread reads at each size (see the module docstring)."""
    import os

    import httpx

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import concurrency as bench
    from fake_model import task
    from peer_adapters import Artifactflow

    from artifactflow.api.app import create_app

    model = bench.spawn_model()
    try:
        base_url = model.stdout.readline().strip()  # type: ignore[union-attr]
        os.environ.setdefault("OPENAI_API_KEY", "benchmark-no-network")
        with tempfile.TemporaryDirectory() as folder:
            peer = Artifactflow(Path(folder), base_url)
            if url is not None:
                settings = peer.config / "artifactflow.yaml"
                settings.write_text(settings.read_text() + f"database_url: {url}\n")
            await peer.open()
            try:
                result = await peer.client.run(task(1))
                assert result.status == "completed", result
                store = peer.client.admin.store
                built = {size: await copy_thread(store, result.message_id, size) for size in sizes}
                app = create_app(client=peer.client)
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://af") as http:
                    timings, body_bytes = await measure_protocol(http, store, built, sizes, repeats)
            finally:
                await peer.close()
    finally:
        model.stdin.close()  # type: ignore[union-attr]  # the model server stops with its stdin
        model.wait(10)
    label = "SQLite" if url is None else "PostgreSQL"
    return report(
        f"Agent Protocol, {label}: medians (min–max) of {repeats} interleaved repeats, ms "
        "(in process over ASGI)", sizes, timings,
    ) + "\n" + per_byte(sizes, timings, body_bytes)


def per_byte(
    sizes: list[int], timings: dict[tuple[str, int], list[float]], body_bytes: dict[tuple[str, int], int]
) -> str:
    """Each read's body size and its median time above the floor's per MB."""
    head = " | ".join(f"{s}: KB, ms/MB above floor" for s in sizes)
    lines = ["", f"| read | {head} |", "|---|" + "---:|" * len(sizes)]
    for name in dict.fromkeys(n for n, _ in body_bytes):
        cells = []
        for size in sizes:
            size_bytes = body_bytes[(name, size)]
            above = statistics.median(timings[(name, size)]) - statistics.median(
                timings[(f"floor: {name}", size)]
            )
            cells.append(f"{size_bytes / 1024:,.0f}, {above / (size_bytes / 1e6):.1f}")
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(lines)


async def measure_protocol(
    http: Any, store: AppStore, built: dict[int, tuple[str, list[str]]], sizes: list[int],
    repeats: int,
) -> tuple[dict[tuple[str, int], list[float]], dict[tuple[str, int], int]]:
    import httpx
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    try:
        from artifactflow.protocol.renderings import CACHES
    except ImportError:  # before stored renderings
        from artifactflow.protocol.steps_cache import CACHES  # type: ignore[no-redef]

    async def forget(stored: bool) -> None:
        for cache in list(CACHES.values()):
            cache.clear()
        if stored and hasattr(t, "ap_renderings"):
            await store.write(t.ap_renderings.delete())

    bodies: dict[str, bytes] = {}  # the floor app answers each read's last body as it is

    async def answer(request: Request) -> Response:
        return Response(bodies[request.path_params["key"]], media_type="application/json")

    floor_app = Starlette(routes=[Route("/floor/{key}", answer)])
    floor = httpx.AsyncClient(transport=httpx.ASGITransport(app=floor_app), base_url="http://floor")

    def reads(cid: str, size: int) -> dict[str, tuple[str, str, Any, Callable[[Any], bool]]]:
        def messages(body: Any) -> bool:
            return len(body["values"]["messages"]) == 4 * size

        return {
            "GET /threads/{id}": ("GET", f"/threads/{cid}", None, messages),
            "GET /threads/{id}/state": ("GET", f"/threads/{cid}/state", None, messages),
            "POST /threads/{id}/history (10)": (
                "POST", f"/threads/{cid}/history", {"limit": 10}, lambda body: len(body) == 10
            ),
            "POST /threads/search (ids)": (
                "POST", "/threads/search", {"ids": [cid], "limit": 20},
                lambda body: len(body) == 1 and messages(body[0]),
            ),
        }

    timings: dict[tuple[str, int], list[float]] = {}
    body_bytes: dict[tuple[str, int], int] = {}
    last: dict[tuple[str, int], bytes] = {}
    cold = {"GET /threads/{id}", "POST /threads/{id}/history (10)"}
    for repeat in range(repeats):
        for size in sizes if repeat % 2 == 0 else sizes[::-1]:
            if size > 100 and repeat >= 5:
                continue  # seconds per read at 1,000: five samples say enough
            for key, (name, (method, path, body, check)) in enumerate(reads(built[size][0], size).items()):
                variants = [("", None)]
                if name in cold:
                    variants = [(" (first)", True), (" (restart)", False), *variants]
                for suffix, stored in variants:
                    if stored is not None:
                        await forget(stored)
                    started = time.perf_counter()
                    response = await http.request(method, path, json=body)
                    took = (time.perf_counter() - started) * 1000
                    assert response.status_code == 200, (response.status_code, response.text[:200])
                    assert check(response.json()), (name, size)
                    timings.setdefault((name + suffix, size), []).append(took)
                bodies[str(key)] = last[(name, size)] = response.content
                body_bytes[(name, size)] = len(response.content)
                started = time.perf_counter()
                echoed = await floor.get(f"/floor/{key}")
                took = (time.perf_counter() - started) * 1000
                assert echoed.content == response.content
                timings.setdefault((f"floor: {name}", size), []).append(took)
    await floor.aclose()
    for (name, size), data in last.items():
        timings[(f"floor over TCP: {name}", size)] = await tcp_floor(data, 5)
    return timings, body_bytes


async def tcp_floor(data: bytes, repeats: int) -> list[float]:
    """ms to receive `data` over a loopback TCP connection (asyncio streams, both ends here):
    what sending a body costs beyond the app, where ASGI in process hands it over by reference."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.write(data)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"go\n")
        got = await reader.read(-1)
        times.append((time.perf_counter() - started) * 1000)
        assert len(got) == len(data)
        writer.close()
    server.close()
    await server.wait_closed()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--pg", metavar="URL", help="also on PostgreSQL (an empty database)")
    parser.add_argument("--protocol", action="store_true", help="also the Agent Protocol's reads")
    parser.add_argument("--protocol-only", action="store_true", help="only the Agent Protocol's")
    args = parser.parse_args()
    sizes = sorted(int(x) for x in args.sizes.split(","))
    if len(sizes) < 2 or args.repeats < 3:
        sys.exit("give at least two sizes and --repeats ≥ 3")
    args.protocol = args.protocol or args.protocol_only
    if args.protocol:  # first on PostgreSQL: the store reads' made-up events are no run's
        print(asyncio.run(protocol_run(None, sizes, args.repeats)))
        if args.pg:
            print(asyncio.run(protocol_run(args.pg, sizes, args.repeats)))
        if args.protocol_only:
            return
    print(asyncio.run(run(None, sizes, args.repeats)))
    if args.pg:
        print(asyncio.run(run(args.pg, sizes, args.repeats)))
    print("\n(a shared machine: absolute figures are noisy; ratios are within one run)")


if __name__ == "__main__":
    main()
