"""LangChain tools as first-class tools: any `BaseTool`, with a permission and a timeout."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest
from conftest import make_config
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langchain_core.tools import tool as lc_tool
from pydantic import BaseModel
from scripted_llm import Call, Text, ToolCalls

from artifactflow import ConfigError, Permission, Resume, wrap_tool
from artifactflow.cli.main import main


@lc_tool
def reverse(word: str, times: int = 1) -> str:
    """Reverse a word.

    Args:
        word: The word to reverse.
        times: How many copies.
    """
    return word[::-1] * times


@lc_tool
async def shout(text: str) -> str:
    """Upper-case text (an async tool: runs on the event loop, not in a thread)."""
    assert threading.current_thread() is threading.main_thread()
    await asyncio.sleep(0)
    return text.upper()


class Lookup(BaseTool):
    """A subclass with no args_schema: the schema comes from `_run`'s signature."""

    name: str = "lookup"
    description: str = "Look a key up in a tiny table"

    def _run(self, key: str) -> str:
        table = {"alpha": "first", "omega": "last"}
        if key not in table:
            raise ToolException(f"no entry for {key!r}")
        return table[key]


class Pair(BaseModel):
    left: int
    right: int


add = StructuredTool.from_function(
    func=lambda left, right: left + right, name="add", description="Add two integers",
    args_schema=Pair,
)
double = StructuredTool.from_function(
    func=lambda x: x * 2, name="double", description="Double a number",
    args_schema={"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
)


def tool_texts(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def test_tools_with_and_without_schemas_run(make_client, llm):
    tools = [reverse, shout, Lookup(), add, double]
    client = await make_client(
        lead_tools=[t.name for t in tools], extra_tools=tools
    )
    registry = client.admin.services.tools
    assert {registry.source(t.name) for t in tools} == {"langchain"}
    assert registry.get("lookup").json_schema() == {
        "type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"],
    }
    assert registry.get("reverse").json_schema()["required"] == ["word"]
    assert registry.permission("reverse") is Permission.AUTO
    llm.script(
        ToolCalls([
            Call("reverse", {"word": "flow", "times": 2}),
            Call("shout", {"text": "hi"}),
            Call("lookup", {"key": "omega"}),
            Call("lookup", {"key": "zeta"}),
            Call("add", {"left": 2, "right": 3}),
            Call("double", {"x": 21}),
            Call("double", {"x": "many"}),
        ]),
        Text("ok"),
    )
    result = await client.run("use them")
    assert result.status == "completed"
    texts = tool_texts(llm.requests[1])
    assert texts[:3] == ["wolfwolf", "HI", "last"]
    assert texts[3] == "ERROR: ToolException: no entry for 'zeta'"
    assert [json.loads(t) for t in texts[4:6]] == [5, 42]
    assert texts[6].startswith("ERROR: invalid arguments for 'double': x: 'many' is not of type")
    sent = {s["function"]["name"]: s["function"] for s in llm.requests[0]["tools"]}
    assert sent["reverse"]["parameters"]["properties"]["times"] == {"default": 1, "type": "integer"}


async def test_confirm_wrapped_tool_pauses_and_runs_once(make_client, llm, tmp_path):
    journal = tmp_path / "journal.txt"

    @lc_tool
    def write_line(text: str) -> str:
        """Append a line to the journal."""
        with journal.open("a", encoding="utf-8") as handle:
            handle.write(text + "\n")
        return "written"

    wrapped = wrap_tool(write_line, permission="confirm")
    client = await make_client(lead_tools=["write_line"], extra_tools=[wrapped])
    assert client.admin.services.tools.permission("write_line") is Permission.CONFIRM
    llm.script(ToolCalls([Call("write_line", {"text": "once"}, id="c1")]))
    events = [e async for e in await client.runs.start("write")]
    assert events[-1].type == "permission_request"
    assert not journal.exists()
    llm.script(Text("done"))
    result = await client.run(Resume(events[-1].message_id, "approve"))
    assert result.status == "completed"
    assert journal.read_text().splitlines() == ["once"]
    assert tool_texts(llm.requests[-1]) == ["written"]


async def test_wrapped_timeout_applies(make_client, llm):
    @lc_tool
    async def nap(seconds: float) -> str:
        """Sleep."""
        await asyncio.sleep(seconds)
        return "rested"

    client = await make_client(lead_tools=["nap"], extra_tools=[wrap_tool(nap, timeout=0.2)])
    llm.script(ToolCalls([Call("nap", {"seconds": 30})]), Text("ok"))
    await client.run("nap")
    assert tool_texts(llm.requests[1]) == ["ERROR: tool 'nap' timed out after 0.2 s"]


def test_wrap_tool_refuses_what_is_not_a_langchain_tool():
    with pytest.raises(ConfigError, match="needs a LangChain BaseTool"):
        wrap_tool(lambda: None)
    with pytest.raises(ConfigError, match="timeout must be positive"):
        wrap_tool(reverse, timeout=0)


PLUGIN = '''
from langchain_core.tools import tool
from artifactflow import wrap_tool

@tool
def greet(name: str) -> str:
    """Greet someone."""
    return f"hello {name}"

@tool
def delete_everything(confirm_word: str) -> str:
    """Pretend to delete everything."""
    return "gone"

dangerous = wrap_tool(delete_everything, permission="confirm", timeout=5)
'''


@pytest.fixture
def plugin_config(tmp_path: Path) -> Path:
    return make_config(
        tmp_path,
        lead_tools=["greet", "delete_everything"],
        yaml_text="plugins: [lc_plugin]\n",
        plugin_files={"lc_plugin.py": PLUGIN},
    )


async def test_plugin_module_exports_langchain_tools(make_client, llm, plugin_config):
    client = await make_client(config_dir=plugin_config)
    registry = client.admin.services.tools
    assert registry.permission("greet") is Permission.AUTO  # bare @tool
    assert registry.permission("delete_everything") is Permission.CONFIRM  # wrap_tool wins
    assert registry.get("delete_everything").timeout == 5
    llm.script(
        ToolCalls([Call("greet", {"name": "ada"}), Call("delete_everything", {"confirm_word": "x"})])
    )
    result = await client.run("go")
    assert result.status == "waiting"
    assert [c["tool"] for c in result.pending_calls] == ["delete_everything"]


def test_tools_command_lists_sources_permissions_and_schemas(
    plugin_config, tmp_path, llm_env, capsys
):
    base = ["--config-dir", str(plugin_config), "--data-dir", str(tmp_path / "data")]
    assert main(["tools", "--json", *base]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["greet"]["source"] == "langchain" and rows["greet"]["permission"] == "auto"
    assert rows["delete_everything"]["permission"] == "confirm"
    assert rows["delete_everything"]["agents"] == ["lead_agent"]
    assert rows["create_artifact"]["source"] == "builtin"
    assert rows["greet"]["schema"] == {
        "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
    }
    assert main(["tools", *base]) == 0
    out = capsys.readouterr().out
    assert any(line.split()[:3] == ["delete_everything", "langchain", "confirm"]
               for line in out.splitlines())
    assert main(["tools", "--schema", "greet", *base]) == 0
    assert json.loads(capsys.readouterr().out) == rows["greet"]["schema"]
    assert main(["tools", "--schema", "nope", *base]) == 2
    assert "no tool named 'nope'" in capsys.readouterr().err
