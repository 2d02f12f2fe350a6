"""The peers of `peers.py`: one adapter per framework, each running the benchmark's task.

Every adapter opens on a fresh folder, runs one conversation to its end with `converse` (the
final answer is returned: the benchmark checks it, and the fake model counts the calls) and
closes. The frameworks are imported inside `open`, so a missing one is reported by
`check_installed` with the command that installs it, not as an ImportError here.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from fake_model import page, task

SYSTEM = "You are the lead agent. Read the pages one by one."
PEERS = ["artifactflow", "agents-sdk", "langgraph", "bare"]
STORING = ["artifactflow", "agents-sdk", "langgraph"]
BENCH_EXTRA = "pip install -e '.[bench]'"


class Peer(Protocol):
    """One framework, opened on a fresh folder; `converse` runs one conversation to its end
    and returns the final answer."""

    data: Path  # what it stores (empty for the bare loop)

    async def open(self) -> None: ...

    async def converse(self, rounds: int, conversation: str) -> str: ...

    async def close(self) -> None: ...


# --- the peers ------------------------------------------------------------------------------


class Artifactflow:
    def __init__(self, folder: Path, base_url: str) -> None:
        self.folder, self.data = folder, folder / "data"
        self.config = folder / "config"
        agents = self.config / "agents"
        agents.mkdir(parents=True, exist_ok=True)
        (agents / "lead_agent.md").write_text(
            f"---\nname: lead_agent\nrole: lead\ntools: [fetch_page]\nmax_tool_rounds: 1000\n---\n{SYSTEM}\n"
        )
        # a long-context model: 200 rounds of 4 KB never reach compaction (its summary calls
        # would change the task; the call count assertion would catch them)
        (self.config / "models.yaml").write_text(
            "profiles:\n  fake:\n    model: fake\n    base_url_env: BENCH_FAKE_MODEL_URL\n"
            "    context_window: 4000000\n"
        )
        (self.config / "artifactflow.yaml").write_text(
            "model: fake\nllm:\n  max_retries: 0\nrun:\n  max_concurrent_runs: 1000\n"
        )
        os.environ["BENCH_FAKE_MODEL_URL"] = base_url
        self.client: Any = None

    async def open(self) -> None:
        from artifactflow import Client, load_settings, tool

        @tool
        def fetch_page(n: int) -> str:
            """Return one page of text.

            Args:
                n: Page number.
            """
            return page(n)

        self.client = await Client.open(
            load_settings(self.config, self.data), extra_tools=[fetch_page]
        )

    async def converse(self, rounds: int, conversation: str) -> str:
        result = await self.client.run(task(rounds))
        if result.status != "completed":
            raise AssertionError(f"artifactflow run ended {result.status}: {result.error}")
        return result.response or ""

    async def close(self) -> None:
        await self.client.aclose()


class AgentsSdk:
    def __init__(self, folder: Path, base_url: str) -> None:
        self.data = folder / "data"
        self.data.mkdir(parents=True, exist_ok=True)
        self.base_url = base_url
        self.sessions: list[Any] = []

    async def open(self) -> None:
        import openai

        from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled

        set_tracing_disabled(True)  # the SDK would otherwise upload traces to api.openai.com

        @function_tool
        def fetch_page(n: int) -> str:
            """Return one page of text.

            Args:
                n: Page number.
            """
            return page(n)

        self.openai = openai.AsyncOpenAI(base_url=self.base_url, api_key="benchmark", max_retries=0)
        model = OpenAIChatCompletionsModel(model="fake", openai_client=self.openai)
        self.agent = Agent(name="lead_agent", instructions=SYSTEM, tools=[fetch_page], model=model)

    async def converse(self, rounds: int, conversation: str) -> str:
        from agents import Runner, SQLiteSession

        session = SQLiteSession(conversation, self.data / "sessions.db")
        self.sessions.append(session)
        result = await Runner.run(self.agent, task(rounds), session=session, max_turns=rounds + 2)
        return str(result.final_output)

    async def close(self) -> None:
        for session in self.sessions:
            session.close()
        self.sessions.clear()
        await self.openai.close()


class LangGraphAgent:
    def __init__(self, folder: Path, base_url: str) -> None:
        self.data = folder / "data"
        self.data.mkdir(parents=True, exist_ok=True)
        self.base_url = base_url

    async def open(self) -> None:
        import aiosqlite
        from langchain.agents import create_agent
        from langchain_core.tools import tool
        from langchain_openai import ChatOpenAI
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        @tool
        def fetch_page(n: int) -> str:
            """Return one page of text.

            Args:
                n: Page number.
            """
            return page(n)

        self.conn = await aiosqlite.connect(self.data / "checkpoints.db")
        saver = AsyncSqliteSaver(self.conn)
        model = ChatOpenAI(
            model="fake",
            base_url=self.base_url,
            api_key="benchmark",  # type: ignore[arg-type]
            max_retries=0,
            use_responses_api=False,
        )
        self.agent = create_agent(
            model, tools=[fetch_page], system_prompt=SYSTEM, checkpointer=saver
        )

    async def converse(self, rounds: int, conversation: str) -> str:
        config: Any = {
            "configurable": {"thread_id": conversation},
            "recursion_limit": 2 * rounds + 10,
        }
        out = await self.agent.ainvoke(
            {"messages": [{"role": "user", "content": task(rounds)}]}, config
        )
        return str(out["messages"][-1].content)

    async def close(self) -> None:
        await self.conn.close()


class Bare:
    """The floor: posts the ready body with the SDK's low-level `post` (no request transform),
    reads the SSE stream, keeps the history in a list, stores nothing."""

    def __init__(self, folder: Path, base_url: str) -> None:
        self.data = folder / "data"
        self.data.mkdir(parents=True, exist_ok=True)
        self.base_url = base_url

    async def open(self) -> None:
        import openai

        self.client = openai.AsyncOpenAI(base_url=self.base_url, api_key="benchmark", max_retries=0)
        self.tools = [
            {
                "type": "function",
                "function": {
                    "name": "fetch_page",
                    "description": "Return one page of text.",
                    "parameters": {
                        "type": "object",
                        "properties": {"n": {"type": "integer"}},
                        "required": ["n"],
                    },
                },
            }
        ]

    async def converse(self, rounds: int, conversation: str) -> str:
        import openai
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": task(rounds)},
        ]
        while True:
            body = {
                "model": "fake",
                "messages": messages,
                "tools": self.tools,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            stream = await self.client.post(
                "/chat/completions",
                body=body,
                cast_to=ChatCompletion,
                stream=True,
                stream_cls=openai.AsyncStream[ChatCompletionChunk],
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
                return "".join(text)
            ordered = [calls[i] for i in sorted(calls)]
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": c["id"],
                            "type": "function",
                            "function": {"name": c["name"], "arguments": c["arguments"]},
                        }
                        for c in ordered
                    ],
                }
            )
            for call in ordered:
                n = json.loads(call["arguments"])["n"]
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": page(n)})

    async def close(self) -> None:
        await self.client.close()


FACTORIES: dict[str, Callable[[Path, str], Peer]] = {
    "artifactflow": Artifactflow,
    "agents-sdk": AgentsSdk,
    "langgraph": LangGraphAgent,
    "bare": Bare,
}
NEEDS = {"agents-sdk": ["agents"], "langgraph": ["langchain.agents", "langchain_openai"]}


def check_installed(names: list[str]) -> None:
    import importlib.util

    missing = [
        f"{name} (module {module})"
        for name in names
        for module in NEEDS.get(name, [])
        if importlib.util.find_spec(module.split(".")[0]) is None
        or importlib.util.find_spec(module) is None
    ]
    if missing:
        sys.exit(f"peers not installed: {', '.join(missing)}. Install them with: {BENCH_EXTRA}")
