"""Per-round cost: ms per tool round at 10/50/200 rounds, against a bare `AsyncOpenAI` loop.

One agent calls one tool per round and gets a `--payload`-byte result back, for N rounds,
against the scripted OpenAI-compatible server over real HTTP with no model latency. Three
loops run on the same server, interleaved (their order rotates every repeat) and repeated:

- bare:   `AsyncOpenAI.chat.completions.create(stream=True)` in a plain loop: the floor the
          issue names, what a plain SDK client of this server pays (HTTP, SSE parsing, the
          SDK's request transform, the server's own work);
- post:   the same loop sending the ready body through the SDK's low-level `client.post`
          (no request transform): the floor of the way our client calls the SDK;
- model:  the same loop through our `OpenAIChatModel` (`Model.complete`), no graph;
- engine: a whole run through `Client.run` (graph, checkpoints, event log,
          tool node), with a window no run nears (compaction never triggers).

Three figures per loop: `wall` is the run's wall time / N; `cpu` is the process's CPU time / N
(client and scripted server together: the server's share is the same for every loop, and CPU
time stays meaningful when other work shares the machine); `tail` is the CPU time per round
over the last tenth of the run (read at each request's arrival), i.e. the cost of a round when
the history is N rounds long. Medians over the repeats; ratios against `bare`, and
`engine/post`: what the engine adds to the floor of its own way of calling the SDK.

Run: `python benchmarks/per_round.py [--rounds 10,50,200] [--repeats 3] [--payload 4096]`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from scripted_llm import Call, ScriptedLLM, Text, ToolCalls  # noqa: E402

from artifactflow import Client, load_settings, tool  # noqa: E402
from artifactflow.agents.model import (  # noqa: E402
    ModelRequest,
    OpenAIChatModel,
    ResolvedModel,  # noqa: E402
)
from artifactflow.agents.spec import load_agents  # noqa: E402
from artifactflow.core.state import assistant_message  # noqa: E402
from artifactflow.core.window.limits import recursion_limit  # noqa: E402
from artifactflow.settings import LLMSettings  # noqa: E402

PAYLOAD = 4096
SYSTEM = "You are the lead agent. Read the pages one by one."


def page(n: int, size: int) -> str:
    words = " ".join(f"w{(n * 31 + i) % 9973}" for i in range(size // 4))
    return f"page {n}: {words}"[:size]


@tool
def fetch_page(n: int) -> str:
    """Return one page of text.

    Args:
        n: Page number.
    """
    return page(n, PAYLOAD)


CPU_AT_REQUEST: list[float] = []


def answer(request: dict[str, Any]) -> Any:
    """N tool rounds, then a final answer; N travels in the task text ("pages 1 to N")."""
    CPU_AT_REQUEST.append(time.process_time())
    messages = request.get("messages") or []
    task = next((m["content"] for m in messages if m.get("role") == "user"), "")
    wanted = int(task.rsplit(" ", 1)[-1].rstrip("."))
    done = sum(1 for m in messages if m.get("role") == "tool")
    if done >= wanted:
        return Text("done")
    return ToolCalls([Call("fetch_page", {"n": done + 1})])


def task_for(rounds: int) -> str:
    return f"Read pages 1 to {rounds}."


async def bare_loop(llm: ScriptedLLM, rounds: int) -> None:
    client = openai.AsyncOpenAI(base_url=llm.base_url, api_key="benchmark", max_retries=0)
    tools = [fetch_page.openai_spec()]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": task_for(rounds)},
    ]
    try:
        while True:
            stream = await client.chat.completions.create(
                model="scripted-model",
                messages=messages,
                tools=tools,  # type: ignore[arg-type]
                stream=True,
                stream_options={"include_usage": True},
            )
            text: list[str] = []
            calls: dict[int, dict[str, str]] = {}
            async for chunk in stream:
                for choice in chunk.choices:
                    if choice.delta.content:
                        text.append(choice.delta.content)
                    for part in choice.delta.tool_calls or []:
                        slot = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                        slot["id"] = part.id or slot["id"]
                        if part.function and part.function.name:
                            slot["name"] += part.function.name
                        if part.function and part.function.arguments:
                            slot["arguments"] += part.function.arguments
            if not calls:
                return
            ordered = [calls[i] for i in sorted(calls)]
            messages.append(assistant_message("".join(text), ordered))
            for call in ordered:
                n = json.loads(call["arguments"])["n"]
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": page(n, PAYLOAD)}
                )
    finally:
        await client.close()


async def post_loop(llm: ScriptedLLM, rounds: int) -> None:
    client = openai.AsyncOpenAI(base_url=llm.base_url, api_key="benchmark", max_retries=0)
    tools = [fetch_page.openai_spec()]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": task_for(rounds)},
    ]
    try:
        while True:
            body = {
                "model": "scripted-model",
                "messages": messages,
                "tools": tools,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            stream = await client.post(
                "/chat/completions",
                body=body,
                cast_to=ChatCompletion,
                stream=True,
                stream_cls=openai.AsyncStream[ChatCompletionChunk],
            )
            calls: dict[int, dict[str, str]] = {}
            async for chunk in stream:
                for choice in chunk.choices:
                    for part in choice.delta.tool_calls or []:
                        slot = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                        slot["id"] = part.id or slot["id"]
                        if part.function and part.function.name:
                            slot["name"] += part.function.name
                        if part.function and part.function.arguments:
                            slot["arguments"] += part.function.arguments
            if not calls:
                return
            ordered = [calls[i] for i in sorted(calls)]
            messages.append(assistant_message("", ordered))
            for call in ordered:
                n = json.loads(call["arguments"])["n"]
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": page(n, PAYLOAD)}
                )
    finally:
        await client.close()


async def model_loop(llm: ScriptedLLM, rounds: int) -> None:
    model = OpenAIChatModel(LLMSettings(max_retries=0))
    target = ResolvedModel(None, "scripted-model", llm.base_url, "benchmark")
    tools = [fetch_page.openai_spec()]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": task_for(rounds)},
    ]
    try:
        while True:
            response = await model.complete(ModelRequest(target, list(messages), tools))
            if not response.tool_calls:
                return
            messages.append(assistant_message(response.content, response.tool_calls))
            for call in response.tool_calls:
                n = json.loads(call["arguments"])["n"]
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": page(n, PAYLOAD)}
                )
    finally:
        await model.aclose()


def write_config(root: Path) -> Path:
    config = root / "config"
    agents = config / "agents"
    agents.mkdir(parents=True)
    (agents / "lead_agent.md").write_text(
        f"---\nname: lead_agent\nrole: lead\ntools: [fetch_page]\nmax_tool_rounds: 1000\n---\n{SYSTEM}\n"
    )
    limit = recursion_limit(load_agents(agents))
    (config / "artifactflow.yaml").write_text(
        # the scripted server declares no window: a long-context one, so no compaction call
        # joins the rounds (`measure` counts the requests)
        f"run:\n  recursion_limit: {limit}\ncontext:\n  default_window: 4000000\n"
        "llm:\n  max_retries: 0\n"
    )
    return config


def engine_loop_factory(root: Path) -> Callable[[ScriptedLLM, int], Awaitable[None]]:
    counter = iter(range(1_000_000))

    async def engine_loop(llm: ScriptedLLM, rounds: int) -> None:
        folder = root / f"run{next(counter)}"
        config = write_config(folder)
        client = await Client.open(load_settings(config, folder / "data"), extra_tools=[fetch_page])
        try:
            result = await client.run(task_for(rounds))
        finally:
            await client.aclose()
        if result.status != "completed" or result.response != "done":
            raise RuntimeError(
                f"engine run ended {result.status}: {result.error}, answer {result.response!r}"
            )

    return engine_loop


async def measure(
    llm: ScriptedLLM, loop: Callable[[ScriptedLLM, int], Awaitable[None]], rounds: int
) -> tuple[float, float, float]:
    """(wall ms/round, CPU ms/round, tail CPU ms/round) of one run."""
    first = len(CPU_AT_REQUEST)
    started, cpu = time.perf_counter(), time.process_time()
    await loop(llm, rounds)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    times = CPU_AT_REQUEST[first:]
    if len(times) != rounds + 1:
        raise RuntimeError(f"expected {rounds + 1} model requests, saw {len(times)}")
    span = max(1, rounds // 10)
    tail = (times[rounds] - times[rounds - span]) / span
    return wall * 1000 / rounds, cpu * 1000 / rounds, tail * 1000


async def main() -> None:
    global PAYLOAD
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", default="10,50,200")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--payload", type=int, default=PAYLOAD, help="tool result bytes")
    parser.add_argument("--loops", default="bare,post,model,engine")
    args = parser.parse_args()
    PAYLOAD = args.payload
    sizes = [int(x) for x in args.rounds.split(",")]
    logging.disable(logging.WARNING)
    os.environ["OPENAI_API_KEY"] = "benchmark-no-network"
    with tempfile.TemporaryDirectory() as folder, ScriptedLLM() as llm:
        os.environ["OPENAI_BASE_URL"] = llm.base_url
        llm.route(answer)
        loops: dict[str, Callable[[ScriptedLLM, int], Awaitable[None]]] = {
            "bare": bare_loop,
            "post": post_loop,
            "model": model_loop,
            "engine": engine_loop_factory(Path(folder)),
        }
        names = [n.strip() for n in args.loops.split(",") if n.strip()]
        await bare_loop(llm, 3)  # warm-up: imports, first connections
        samples: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
        for repeat in range(args.repeats):
            order = names[repeat % len(names) :] + names[: repeat % len(names)]
            for rounds in sizes:
                for name in order:
                    samples.setdefault((name, rounds), []).append(
                        await measure(llm, loops[name], rounds)
                    )
    print(
        f"{args.payload}-byte tool results, one call per round, no model latency; "
        f"medians of {args.repeats} interleaved repeats\n"
    )
    labels = (
        "wall ms/round (wall time / N)",
        "cpu ms/round (process CPU time / N)",
        "tail cpu ms/round (CPU per round over the last tenth)",
    )
    for index, label in enumerate(labels):
        print(label)
        pairs = [(n, "bare") for n in names if n != "bare" and "bare" in names]
        if "engine" in names and "post" in names:
            pairs.append(("engine", "post"))
        head = (
            " ".join(f"{n:>9}" for n in names)
            + " "
            + " ".join(f"{a + '/' + b:>12}" for a, b in pairs)
        )
        print(f"{'rounds':>6} {head}")
        for rounds in sizes:
            med = {n: statistics.median(s[index] for s in samples[(n, rounds)]) for n in names}
            cells = " ".join(f"{med[n]:>9.2f}" for n in names)
            ratios = " ".join(f"{med[a] / med[b]:>11.2f}x" for a, b in pairs)
            print(f"{rounds:>6} {cells} {ratios}")
        print()


if __name__ == "__main__":
    asyncio.run(main())
