"""A hook that raises: the run ends with an `error` event naming the hook and the point
(`kind: "hook"`), other hooks see `on_error` and `on_run_end`; with `hooks.on_error: log`
the failure is logged and the run goes on."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from conftest import make_config
from hooks_recorder import SUB, Recorder, by_agent, open_client
from scripted_llm import Call, Text, ToolCalls

from artifactflow import HookError, Hooks
from artifactflow.hooks import Failure


class Boom(Hooks):
    name = "boom"

    def __init__(self, point: str, when: str | None = None) -> None:
        self.point, self.when = point, when

    def _maybe(self, point: str, who: str | None = None) -> None:
        if point == self.point and (self.when is None or self.when == who):
            raise RuntimeError(f"broken in {point}")

    async def before_run(self, run, content):
        self._maybe("before_run")

    async def on_agent_start(self, run, agent):
        self._maybe("on_agent_start", agent.name)

    async def after_tool_call(self, run, call, result):
        self._maybe("after_tool_call", call.id)


def script(llm) -> None:
    by_agent(llm, {
        "lead": [
            ToolCalls([Call("lookup", {"topic": "a"}, id="l1"), Call("lookup", {"topic": "b"}, id="l2"),
                       Call("call_subagent", {"agent_name": SUB, "instruction": "dig"}, id="d1")]),
            Text("done"),
        ],
        SUB: [Text("sub answer")],
    })


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return make_config(tmp_path, lead_tools=["call_subagent", "lookup"], subagents={SUB: ["lookup"]})


@pytest.mark.parametrize(("point", "when"), [("after_tool_call", "l2"), ("on_agent_start", SUB)])
async def test_a_raising_hook_ends_the_run_with_an_error_naming_it(config, tmp_path, llm_env, point, when):
    script(llm_env)
    recorder = Recorder()
    client = await open_client(config, tmp_path / "data", [Boom(point, when), recorder])
    try:
        result = await client.run("go")
        message = await client.conversations.message(result.message_id)
    finally:
        await client.aclose()
    assert result.status == "failed" and message["status"] == "failed"
    error = result.events[-1]
    assert error.type == "error"
    assert error.data.to_dict() == {
        "message": f"hook 'boom' failed in {point}: RuntimeError: broken in {point}. Fix the hook, "
                   "remove it, or set `hooks.on_error: log` to log hook failures and go on",
        "kind": "hook", "hook": "boom", "point": point,
    }
    # a failing hook is not a subagent's failure: no subagent_complete(failed), no second answer
    assert not [e for e in result.events if e.type == "subagent_complete"]
    assert len(llm_env.requests) == 1
    (_, failure), = recorder.args("on_error")
    assert isinstance(failure, Failure) and failure.scope == "run" and failure.fatal and failure.kind == "hook"
    assert isinstance(failure.error, HookError) and failure.error.point == point
    assert recorder.seen()[-2:] == [("on_error", "run"), ("on_run_end", "failed")]


async def test_with_on_error_log_a_raising_hook_is_logged_and_the_run_goes_on(tmp_path, llm_env, caplog):
    config = make_config(tmp_path, lead_tools=["call_subagent", "lookup"], subagents={SUB: ["lookup"]},
                         yaml_text="hooks: {on_error: log}\n")
    script(llm_env)
    client = await open_client(config, tmp_path / "data", [Boom("after_tool_call", "l2")])
    try:
        with caplog.at_level(logging.WARNING, logger="artifactflow.hooks"):
            result = await client.run("go")
    finally:
        await client.aclose()
    assert result.status == "completed" and result.response == "done"
    assert "hook 'boom' failed in after_tool_call (ignored)" in caplog.text
    tool_msgs = [m for m in llm_env.requests[-1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_msgs] == ["facts about a", "facts about b", "sub answer"]


async def test_a_failing_before_run_stores_nothing(config, tmp_path, llm_env):
    client = await open_client(config, tmp_path / "data", [Boom("before_run")])
    try:
        with pytest.raises(HookError, match="hook 'boom' failed in before_run"):
            await client.run("go")
        assert await client.conversations.list() == []  # no conversation, no message
    finally:
        await client.aclose()
    assert llm_env.requests == []


class Doomed(Hooks):
    async def on_run_end(self, run, end):
        raise RuntimeError("cannot end")

    async def on_error(self, run, failure):
        raise RuntimeError("cannot fail")


async def test_end_hooks_only_log_their_failures(config, tmp_path, llm_env, caplog):
    llm_env.script(Text("fine"))
    client = await open_client(config, tmp_path / "data", [Doomed()])
    try:
        with caplog.at_level(logging.WARNING, logger="artifactflow.hooks"):
            result = await client.run("go")
    finally:
        await client.aclose()
    assert result.status == "completed" and "failed in on_run_end (ignored)" in caplog.text
