"""Recall before the model call (issue 24 step 4): with `memory.recall: true`, the lead's first
model request of a message (as the scripted OpenAI-compatible server receives it over real
HTTP) holds one delimited system section with the relevant memories, within the profile's
budget, and `memory_recalled` lists their ids; project A's memories never reach project B's
runs; recall happens once per invocation, also across a pause and resume."""

from __future__ import annotations

from typing import Any

from scripted_llm import Call, ScriptedLLM, Text, ToolCalls

from artifactflow import Resume, Task
from artifactflow.core.window.tokens import text_tokens
from artifactflow.events.payloads import MemoryRecalledData
from artifactflow.hooks import Hooks
from artifactflow.memory import LOCAL_USER
from artifactflow.memory.recall import memory_store

RECALL = "memory:\n  recall: true\n"
TEAL = "The user's favourite colour for all designs is teal."
PORT = "The staging database listens on port 6543 behind the VPN."


def system_texts(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "system"]


def recalled_section(request: dict[str, Any]) -> str | None:
    """The recalled section, from the request's one system message (checked: only one)."""
    (system,) = system_texts(request)
    assert system.count("<recalled_context") <= 1, "recall injects one section"
    start = system.find("<recalled_context")
    return None if start < 0 else system[start:]


def recalled_events(result: Any) -> list[MemoryRecalledData]:
    return [e.data for e in result.events if isinstance(e.data, MemoryRecalledData)]


async def test_first_request_holds_the_relevant_memory_within_budget(
    make_client: Any, llm: ScriptedLLM
) -> None:
    af = await make_client(yaml_text=RECALL)
    memory = memory_store(af.admin.services)
    teal = await memory.add_memory((LOCAL_USER, "global"), TEAL)
    await memory.add_memory((LOCAL_USER, "global"), PORT)
    llm.script(Text("Teal it is."))
    result = await af.run("Which colour should the new logo use for our designs?")
    assert result.status == "completed"
    section = recalled_section(llm.requests[0])
    assert section is not None and "teal" in section and "6543" not in section
    (event,) = recalled_events(result)
    assert event.ids == [teal.id] and event.profile == "standard" and event.mode == "hybrid"
    assert event.tokens == text_tokens(section) <= 4000 == event.budget
    # stored in the event log, as the other events
    stored = [e for e in await af.runs.events(result.message_id) if e.type == "memory_recalled"]
    assert len(stored) == 1 and stored[0].data.ids == [teal.id]


async def test_recall_off_injects_nothing(make_client: Any, llm: ScriptedLLM) -> None:
    af = await make_client()
    await memory_store(af.admin.services).add_memory((LOCAL_USER, "global"), TEAL)
    llm.script(Text("ok"))
    result = await af.run("Which colour should the new logo use for our designs?")
    assert recalled_section(llm.requests[0]) is None and not recalled_events(result)


async def test_project_memories_stay_in_their_project(make_client: Any, llm: ScriptedLLM) -> None:
    af = await make_client(yaml_text=RECALL)
    memory = memory_store(af.admin.services)
    alpha = await memory.add_memory((LOCAL_USER, "project", "alpha"), "Project alpha ships its releases on Fridays.")
    await memory.add_memory((LOCAL_USER, "project", "beta"), "Project beta ships its releases on Tuesdays.")
    llm.script(Text("Fridays"), Text("Tuesdays"), Text("none"))
    a = await af.run(Task("On which day does the project ship its releases?", project="alpha"))
    b = await af.run(Task("On which day does the project ship its releases?", project="beta"))
    none = await af.run(Task("On which day does the project ship its releases?"))
    first, second, third = (recalled_section(r) or "" for r in llm.requests)
    assert "Fridays" in first and "Tuesdays" not in first
    assert "Tuesdays" in second and "Fridays" not in second
    assert "Fridays" not in third and "Tuesdays" not in third
    assert recalled_events(a)[0].ids == [alpha.id]
    assert all(alpha.id not in e.ids for e in recalled_events(b) + recalled_events(none))


async def test_the_budget_and_order_of_a_small_recency_profile(make_client: Any, llm: ScriptedLLM) -> None:
    yaml_text = RECALL + "  profile: tiny\n  profiles:\n    tiny: {budget_tokens: 120, mode: recency}\n"
    af = await make_client(yaml_text=yaml_text)
    memory = memory_store(af.admin.services)
    saved = [await memory.add_memory((LOCAL_USER, "global"), f"Fact number {i}: " + "word " * 20) for i in range(6)]
    llm.script(Text("ok"))
    result = await af.run("anything")
    (event,) = recalled_events(result)
    section = recalled_section(llm.requests[0]) or ""
    assert event.profile == "tiny" and event.mode == "recency"
    assert 0 < len(event.ids) < 6 and event.tokens <= 120 and text_tokens(section) == event.tokens
    assert event.ids == [s.id for s in reversed(saved)][: len(event.ids)]  # newest first


class Recorder(Hooks):
    def __init__(self) -> None:
        self.recalls: list[Any] = []

    async def on_memory_recall(self, run: Any, agent: Any, recall: Any) -> None:
        self.recalls.append((agent.invocation, recall))


async def test_recall_fires_once_across_rounds_and_a_resume(
    make_client: Any, llm: ScriptedLLM, tmp_path: Any
) -> None:
    from conftest import make_config

    config = make_config(tmp_path, lead_tools=["append_line"], yaml_text=RECALL + "plugins: [file_tools]\npermissions: {append_line: confirm}\n",
                         plugin_files={"file_tools.py": PLUGIN})
    af = await make_client(config_dir=config)
    hooks = Recorder()
    af.admin.services.hooks.add(hooks)
    await memory_store(af.admin.services).add_memory((LOCAL_USER, "global"), TEAL)
    target = tmp_path / "out.txt"
    llm.script(
        ToolCalls([Call("append_line", {"path": str(target), "text": "teal"}, id="c1")]),
        Text("done"),
    )
    paused = await af.run("Write our favourite design colour to the file")
    assert paused.status == "waiting"
    run = await af.runs.start(Resume(paused.message_id, "approve"))
    done = await run.result()
    assert done.status == "completed"
    sections = [recalled_section(r) for r in llm.requests]
    assert len(sections) == 2 and sections[0] and sections[0] == sections[1]  # same section, round 2 after resume
    events = [e for e in await af.runs.events(paused.message_id) if e.type == "memory_recalled"]
    assert len(events) == 1 and len(hooks.recalls) == 1 and hooks.recalls[0][0] == "lead"


PLUGIN = '''
from artifactflow import tool

@tool
def append_line(path: str, text: str) -> str:
    """Append one line of text to a file."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text + "\\n")
    return "appended"
'''


async def test_a_subagent_recalls_when_its_file_asks(
    make_client: Any, llm: ScriptedLLM, tmp_path: Any
) -> None:
    from conftest import make_config, write_agent

    config = make_config(tmp_path, lead_tools=["call_subagent"], subagents={"researcher": []})
    write_agent(config / "agents", "researcher", description="researcher does research",
                prompt="You are researcher, a subagent.", extra="recall: true\nmemory_profile: compact\n")
    af = await make_client(config_dir=config)  # memory.recall off: the lead recalls nothing
    teal = await memory_store(af.admin.services).add_memory((LOCAL_USER, "global"), TEAL)
    llm.script(
        ToolCalls([Call("call_subagent", {"agent_name": "researcher",
                                          "instruction": "Find the favourite design colour"}, id="d1")]),
        Text("teal"),
        Text("The colour is teal."),
    )
    result = await af.run("Which colour do we use in designs?")
    lead_first, sub_first, lead_last = llm.requests
    assert recalled_section(lead_first) is None and recalled_section(lead_last) is None
    section = recalled_section(sub_first)
    assert section is not None and "teal" in section and 'profile="compact"' in section
    (event,) = recalled_events(result)
    assert event.ids == [teal.id] and event.profile == "compact" and event.mode == "hybrid"
    assert event.invocation and event.invocation != "lead"


WORKFLOW = """\
name: colours
input: {type: object}
nodes:
  - {id: start, role: start}
  - {id: plain, role: linear, kind: agent, agent: designer, instruction: "Name the favourite design colour"}
  - {id: recalled, role: linear, kind: agent, agent: designer, instruction: "Name the favourite design colour", memory_profile: comprehensive}
  - {id: done, role: exit}
edges:
  - {from: start, to: plain}
  - {from: plain, to: recalled}
  - {from: recalled, to: done}
"""


async def test_a_workflow_node_names_its_profile(make_client: Any, llm: ScriptedLLM, tmp_path: Any) -> None:
    from wf_helpers import workflow_config

    from artifactflow import WorkflowTask

    config = workflow_config(tmp_path, {"colours": WORKFLOW}, agents={"designer": []})
    af = await make_client(config_dir=config)
    teal = await memory_store(af.admin.services).add_memory((LOCAL_USER, "global"), TEAL)
    llm.script(Text("no idea"), Text("teal"))
    result = await af.run(WorkflowTask("colours", {}))
    plain, recalled = llm.requests
    assert recalled_section(plain) is None
    section = recalled_section(recalled)
    assert section is not None and "teal" in section and 'profile="comprehensive"' in section
    (event,) = recalled_events(result)
    assert event.ids == [teal.id] and event.mode == "semantic" and event.budget == 8000


async def test_one_users_memories_never_reach_another_users_run(make_client: Any, llm: ScriptedLLM) -> None:
    af = await make_client(yaml_text=RECALL)
    memory = memory_store(af.admin.services)
    mine = await memory.add_memory(("alice", "global"), TEAL)
    llm.script(Text("teal"), Text("no idea"))
    alice = await af.run("Which colour should the new logo use for our designs?", user_id="alice")
    bob = await af.run("Which colour should the new logo use for our designs?", user_id="bob")
    assert "teal" in (recalled_section(llm.requests[0]) or "")
    assert recalled_section(llm.requests[1]) is None
    assert recalled_events(alice)[0].ids == [mine.id] and not recalled_events(bob)
