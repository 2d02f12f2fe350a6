"""Calls of one response: `tool_complete` events in call order whatever order the calls finish
in, calls on the same resource (`serial_key`) one after another, artifact tools on one id in
call order; and the registry's cached tool specs."""

from __future__ import annotations

import asyncio

from scripted_llm import Call, Text, ToolCalls

from artifactflow import ToolRegistry, tool
from artifactflow.core.tool_schedule import RoundSchedule

GATE: dict[str, asyncio.Event] = {}
LOG: list[str] = []


@tool
async def waits() -> str:
    """Finish only after `opens` ran."""
    await GATE["open"].wait()
    return "waited"


@tool
async def opens() -> str:
    """Let `waits` finish."""
    GATE["open"].set()
    return "opened"


@tool(serial_key="res:{name}")
async def use(name: str, step: int) -> str:
    """Use a named resource for a few event-loop turns.

    Args:
        name: The resource.
        step: Which use this is.
    """
    LOG.append(f"start {name}{step}")
    for _ in range(5):
        await asyncio.sleep(0)
    LOG.append(f"end {name}{step}")
    return f"{name}{step}"


def completes(events) -> list[str]:  # type: ignore[no-untyped-def]
    return [e.data.tool_call_id for e in events if e.type == "tool_complete"]


async def test_tool_complete_events_follow_call_order(make_client, llm):
    GATE["open"] = asyncio.Event()
    client = await make_client(lead_tools=["waits", "opens"], extra_tools=[waits, opens])
    llm.script(ToolCalls([Call("waits", id="first"), Call("opens", id="second")]), Text("ok"))
    result = await client.run("go")
    assert result.status == "completed"
    # `waits` finished last (it needed `opens`), yet its event comes first, as does its result
    assert completes(result.events) == ["first", "second"]
    tool_messages = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["waited", "opened"]
    stored = await client.runs.events(result.message_id)
    assert completes(stored) == ["first", "second"]


async def test_calls_on_one_resource_run_in_call_order(make_client, llm):
    LOG.clear()
    client = await make_client(lead_tools=["use"], extra_tools=[use])
    calls = [Call("use", {"name": "a", "step": 1}), Call("use", {"name": "b", "step": 1}),
             Call("use", {"name": "a", "step": 2})]
    llm.script(ToolCalls(calls), Text("ok"))
    result = await client.run("go")
    assert result.status == "completed"
    assert LOG.index("end a1") < LOG.index("start a2")
    assert LOG.index("start b1") < LOG.index("end a1")  # other resources still run alongside
    assert [e.data.result.data for e in result.events if e.type == "tool_complete"] == ["a1", "b1", "a2"]


async def test_create_then_update_of_one_artifact_in_one_response(make_client, llm):
    tools = ["create_artifact", "update_artifact", "read_artifact"]
    client = await make_client(lead_tools=tools)
    llm.script(
        ToolCalls([
            Call("create_artifact", {"id": "notes", "title": "Notes", "content": "alpha beta"}),
            Call("update_artifact", {"id": "notes", "old_str": "beta", "new_str": "gamma"}),
            Call("read_artifact", {"id": "notes"}),
        ]),
        Text("Written."),
    )
    result = await client.run("Write notes")
    done = [e.data for e in result.events if e.type == "tool_complete"]
    assert [d.tool for d in done] == tools and all(d.success for d in done)
    assert done[2].result.data.endswith("alpha gamma")
    artifact = await client.admin.store.get_artifact(result.conversation_id, "notes")
    assert artifact["version"] == 2 and artifact["content"] == "alpha gamma"


def test_schedule_releases_in_order_and_chains_keys():
    sent: list[str] = []
    schedule = RoundSchedule(["a", "b", "c"], {"a": "k", "b": None, "c": "k"})
    schedule.release("c", lambda: sent.append("c"))
    schedule.release("b", lambda: sent.append("b"))
    assert sent == []
    schedule.release("a", lambda: sent.append("a"))
    assert sent == ["a", "b", "c"]
    schedule.release("elsewhere", lambda: sent.append("x"))  # not in the round: at once
    assert sent[-1] == "x"

    async def scenario() -> list[str]:
        order: list[str] = []

        async def run(call_id: str) -> None:
            async with schedule.turn(call_id):
                order.append(call_id)
                await asyncio.sleep(0)

        await asyncio.gather(run("c"), run("b"), run("a"))
        return order

    assert asyncio.run(scenario()) == ["b", "a", "c"]  # c waits for a (same key), b does not


def test_serial_key_templates_functions_and_fallbacks():
    assert use.serial_key_for({"name": "x", "step": 1}) == "res:x"
    assert use.serial_key_for({}) == "res:{name}"  # missing argument: serial with every such call
    by_function = tool(serial_key=lambda args: f"path:{args['path']}")(lambda path: path)
    assert by_function.serial_key_for({"path": "/a"}) == "path:/a"
    assert by_function.serial_key_for({}) == "tool:<lambda>"
    assert waits.serial_key_for({}) is None


def test_registry_specs_are_cached_until_register():
    registry = ToolRegistry([waits, opens])
    first = registry.specs(["waits", "opens", "missing"])
    assert [s["function"]["name"] for s in first] == ["waits", "opens"]
    assert registry.specs(["waits", "opens", "missing"]) is first
    registry.register(use)
    again = registry.specs(["waits", "opens", "use"])
    assert again is not first and [s["function"]["name"] for s in again] == ["waits", "opens", "use"]
