"""HookRunner: order, rewrites, refusals, errors, and exactly-once keys on a real store."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import types
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from pg import fresh_database

from artifactflow.core.store.repository import AppStore
from artifactflow.errors import UserError
from artifactflow.hooks import (
    AgentStep,
    AgentStepEnd,
    Failure,
    HookError,
    HookRunner,
    Hooks,
    MemoryHookLedger,
    ModelRequest,
    ModelResponse,
    Refuse,
    RunEnd,
    RunInfo,
    StoreHookLedger,
    ToolCall,
    ToolRound,
    hook_key,
)
from artifactflow.tools.base import ToolResult

RUN = RunInfo("c1", "m1", "t1", "lead_agent", "hello")
LEAD = AgentStep("lead_agent", "lead", 1, model="m")


def call(call_id: str = "c1", name: str = "web_fetch", **args: Any) -> ToolCall:
    return ToolCall(call_id, name, args or {"url": "https://a.example"}, "lead_agent", "lead", 1)


class Recorder(Hooks):
    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    async def before_model_request(self, run, agent, request):
        self.log.append(f"{self.name}:before_model_request:{request.messages[-1]['content']}")
        msgs = [*request.messages[:-1], {"role": "user", "content": request.messages[-1]["content"] + self.name}]
        return request.with_messages(msgs)

    def on_model_start(self, run, agent, request):  # a sync observer
        self.log.append(f"{self.name}:on_model_start:{request.messages[-1]['content']}")


async def test_interceptors_chain_in_order_then_observers_see_the_final_value():
    seen: list[str] = []
    runner = HookRunner([Recorder("A", seen), Recorder("B", seen)])
    request = ModelRequest([{"role": "user", "content": "x"}], [], "m")
    final = await runner.before_model_request(RUN, LEAD, request)
    assert final.messages[-1]["content"] == "xAB"
    assert request.messages[-1]["content"] == "x"  # what a hook received stays as it was
    assert seen == [
        "A:before_model_request:x",
        "B:before_model_request:xA",
        "A:on_model_start:xAB",
        "B:on_model_start:xAB",
    ]


async def test_a_module_and_a_plain_object_are_hooks_too():
    module = types.ModuleType("my_hooks")
    calls: list[str] = []

    async def before_run(run, content):
        calls.append("module")
        return content.upper()

    before_run.__module__ = "my_hooks"
    module.before_run = before_run  # type: ignore[attr-defined]

    class Plain:
        def before_run(self, run, content):
            calls.append("plain")
            return content + "!"

    runner = HookRunner([module, Plain()])
    assert await runner.before_run(RUN, "hi") == "HI!"
    assert calls == ["module", "plain"]
    assert [name for name, _ in runner.hooks] == ["my_hooks", "Plain"]


def test_a_typo_in_a_point_name_is_an_error_with_a_suggestion():
    class Typo(Hooks):
        async def before_tool_cal(self, run, call):
            pass

    with pytest.raises(UserError, match="'before_tool_cal', which is not a hook point.*did you mean 'before_tool_call'"):
        HookRunner([Typo()])
    with pytest.raises(UserError, match="implements no hook point"):
        HookRunner([object()])
    with pytest.raises(UserError, match="on_error must be"):
        HookRunner([], on_error="ignore")  # type: ignore[arg-type]


async def test_no_hooks_means_values_pass_through_untouched():
    runner = HookRunner()
    request = ModelRequest([{"role": "user", "content": "x"}], [], "m")
    assert runner.empty and not runner.wants("before_model_request", "on_model_start")
    assert await runner.before_model_request(RUN, LEAD, request) is request
    c = call()
    assert await runner.before_tool_call(RUN, c) is c
    result = ToolResult(True, "data")
    assert await runner.after_tool_call(RUN, c, result) is result
    assert await runner.after_tool_round(RUN, ToolRound("lead_agent", "lead", 1, (c,))) == []
    assert await runner.before_run(RUN, "hi") == "hi"


class Boom(Hooks):
    name = "audit"

    async def after_tool_call(self, run, call, result):
        raise ValueError("no audit log")

    async def on_run_end(self, run, end):
        raise RuntimeError("flush failed")


class Upper(Hooks):
    async def after_tool_call(self, run, call, result):
        return dataclasses.replace(result, data=str(result.data).upper())


async def test_a_raising_hook_is_an_error_naming_the_hook_and_the_point():
    runner = HookRunner([Boom(), Upper()])
    with pytest.raises(HookError, match=r"hook 'audit' failed in after_tool_call: ValueError: no audit log.*hooks.on_error: log") as info:
        await runner.after_tool_call(RUN, call(), ToolResult(True, "x"))
    assert info.value.hook == "audit" and info.value.point == "after_tool_call"
    # The run's outcome is decided at on_run_end: its failures are only logged.
    await runner.on_run_end(RUN, RunEnd("completed"))


async def test_on_error_log_skips_the_failing_hook_and_goes_on(caplog: pytest.LogCaptureFixture):
    runner = HookRunner([Boom(), Upper()], on_error="log")
    with caplog.at_level(logging.WARNING, logger="artifactflow.hooks"):
        result = await runner.after_tool_call(RUN, call(), ToolResult(True, "x"))
    assert result.data == "X"
    assert "hook 'audit' failed in after_tool_call (ignored)" in caplog.text


async def test_a_wrong_return_type_is_a_hook_error():
    class Wrong(Hooks):
        async def after_model_request(self, run, agent, request, response):
            return "just text"

    runner = HookRunner([Wrong()])
    response = ModelResponse("hi", [], "m")
    with pytest.raises(HookError, match="returned str, expected ModelResponse or None"):
        await runner.after_model_request(RUN, LEAD, ModelRequest([], [], "m"), response)


async def test_cancellation_is_never_wrapped():
    class Slow(Hooks):
        async def on_tool_start(self, run, call):
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await HookRunner([Slow()]).on_tool_start(RUN, call())


async def test_before_tool_call_rewrites_arguments_or_refuses_with_the_hook_named():
    class Pin(Hooks):
        async def before_tool_call(self, run, call):
            return call.with_arguments({**call.arguments, "max_chars": 100})

    class Policy(Hooks):
        name = "policy"

        async def before_tool_call(self, run, call):
            if "evil" in call.arguments.get("url", ""):
                return Refuse("evil.example is not allowed")
            return None

    class After(Hooks):
        seen: list[str] = []

        async def before_tool_call(self, run, call):
            self.seen.append(call.id)

    after = After()
    runner = HookRunner([Pin(), Policy(), after])
    good, bad = await runner.before_tool_calls(
        RUN, [call("a", url="https://ok.example"), call("b", url="https://evil.example")]
    )
    assert isinstance(good, ToolCall) and good.arguments == {"url": "https://ok.example", "max_chars": 100}
    assert isinstance(bad, Refuse) and bad.hook == "policy"
    assert bad.result().error == "refused: evil.example is not allowed"
    assert bad.result().metadata == {"refused": True, "refused_by": "policy"}
    assert after.seen == ["a"]  # a refusal ends the chain

    class Renamer(Hooks):
        async def before_tool_call(self, run, call):
            return dataclasses.replace(call, name="shell")

    with pytest.raises(HookError, match="arguments only"):
        await HookRunner([Renamer()]).before_tool_call(RUN, call())


async def test_after_tool_round_adds_messages_from_every_hook_in_order():
    class Remind(Hooks):
        async def after_tool_round(self, run, round):
            return f"{len(round.outcomes)} results; cite sources"

    class Note(Hooks):
        async def after_tool_round(self, run, round):
            return [{"role": "user", "content": "note"}]

    class Bad(Hooks):
        async def after_tool_round(self, run, round):
            return {"role": "tool", "content": "x", "tool_call_id": "zz"}

    runner = HookRunner([Remind(), Note()])
    added = await runner.after_tool_round(RUN, ToolRound("lead_agent", "lead", 1, (call(),)))
    assert added == [{"role": "user", "content": "0 results; cite sources"}, {"role": "user", "content": "note"}]
    with pytest.raises(HookError, match="return a string, a chat message"):
        await HookRunner([Bad()]).after_tool_round(RUN, ToolRound("lead_agent", "lead", 1, ()))


async def test_failures_in_on_error_hooks_are_logged_not_raised(caplog):
    class Broken(Hooks):
        async def on_error(self, run, failure):
            raise RuntimeError("pager down")

    with caplog.at_level(logging.WARNING, logger="artifactflow.hooks"):
        await HookRunner([Broken()]).on_error(RUN, Failure("run", "model failed", fatal=True))
    assert "failed in on_error" in caplog.text


def test_keys_line_up_with_the_tool_ledger():
    c = call("call_7")
    assert c.key == "lead/1/call_7"  # the tool node's ledger key for this call
    assert hook_key("after_tool_round", "lead", 1) == "lead/1/*/after_tool_round"
    assert hook_key("on_tool_start", "researcher:ab12", 3, "call_7") == "researcher:ab12/3/call_7/on_tool_start"
    assert ToolRound("r", "researcher:ab12", 3, ()).key == "researcher:ab12/3/*"
    with pytest.raises(ValueError):
        hook_key("x", "a/b", 1)


class Counting(Hooks):
    def __init__(self) -> None:
        self.rounds = 0
        self.added = 0

    async def on_tool_round_start(self, run, round):
        self.rounds += 1

    async def after_tool_round(self, run, round):
        self.added += 1
        return f"reminder {self.added}"


async def _replay_round(runner: HookRunner, run: RunInfo) -> list[Any]:
    round_ = ToolRound("lead_agent", "lead", 2, (call(),))
    await runner.on_tool_round_start(run, round_)
    return await runner.after_tool_round(run, round_)


async def test_keyed_points_fire_once_per_key_across_a_node_rerun():
    ledger = MemoryHookLedger()
    hook = Counting()
    runner = HookRunner([hook], ledger=ledger)
    assert await _replay_round(runner, RUN) == [{"role": "user", "content": "reminder 1"}]
    assert ledger.reads == 0  # a new segment cannot have fired anything: no lookups
    resumed = dataclasses.replace(RUN, resumed=True)
    # LangGraph re-runs the node on resume: the same keys return the first firing's output.
    assert await _replay_round(runner, resumed) == [{"role": "user", "content": "reminder 1"}]
    assert (hook.rounds, hook.added) == (1, 1)
    # Another round, or another message, is another key.
    other = dataclasses.replace(resumed, message_id="m2")
    assert await _replay_round(runner, other) == [{"role": "user", "content": "reminder 2"}]
    await ledger.clear("m1")
    assert await _replay_round(runner, resumed) == [{"role": "user", "content": "reminder 3"}]


@pytest_asyncio.fixture(params=["sqlite", "postgres"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[str | None, Path]]:
    if request.param == "sqlite":
        yield None, tmp_path / "app.db"
    else:
        async with fresh_database() as url:
            yield url, tmp_path / "unused.db"


async def test_store_ledger_survives_the_process(store_url):
    url, path = store_url
    first = await AppStore.open(url, sqlite_path=path)
    hook_a = Counting()
    try:
        added = await _replay_round(HookRunner([hook_a], ledger=StoreHookLedger(first)), RUN)
    finally:
        await first.close()
    assert added == [{"role": "user", "content": "reminder 1"}]
    # A new process recovers the run and re-runs the tool node: nothing fires twice.
    second = await AppStore.open(url, sqlite_path=path)
    hook_b = Counting()
    try:
        recovered = dataclasses.replace(RUN, recovered=True)
        again = await _replay_round(HookRunner([hook_b], ledger=StoreHookLedger(second)), recovered)
        assert again == added and (hook_b.rounds, hook_b.added) == (0, 0)
        assert await second.hook_mark_put("m1", "lead/2/*/after_tool_round", "[]") is False
        await second.hook_marks_clear("m1")
        assert await second.hook_mark_get("m1", "lead/2/*/after_tool_round") is None
    finally:
        await second.close()


async def test_concurrent_firings_of_one_key_keep_the_first_stored_output():
    ledger = MemoryHookLedger()
    runner = HookRunner([Counting()], ledger=ledger)
    run = dataclasses.replace(RUN, recovered=True)

    async def fire(value: str) -> str:
        await asyncio.sleep(0)
        return value

    results = await asyncio.gather(runner.once(run, "k", lambda: fire("a")), runner.once(run, "k", lambda: fire("b")))
    assert results == ["a", "a"]


async def test_trace_context_and_close_reach_the_hooks():
    class Traced(Hooks):
        closed = False

        def trace_context(self, run):
            return {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}

        async def on_run_start(self, run):
            pass

        async def aclose(self):
            Traced.closed = True

    runner = HookRunner([Traced()])
    assert runner.trace_context(RUN)["traceparent"].startswith("00-111")
    await runner.aclose()
    assert Traced.closed
    end = AgentStepEnd("done", 0, outcome="completed")
    assert end.finishes_invocation and not AgentStepEnd("", 1).finishes_invocation
