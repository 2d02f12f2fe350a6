"""Built-in hooks: redaction by regex and the tool policy, alone and loaded from config."""

from __future__ import annotations

import textwrap

import pytest
from hooks_sim import fetch_call, model_step, new_run, tool_round

from artifactflow import load_settings
from artifactflow.hooks import AgentStep, HookRunner, ModelRequest, ModelResponse, Refuse, ToolCall
from artifactflow.hooks.loader import build_runner
from artifactflow.hooks.policy import ToolPolicyHooks, host_of
from artifactflow.hooks.redaction import RedactionHooks
from artifactflow.tools.base import ToolResult

KEY = "sk-" + "a1B2" * 6
RUN = new_run()
LEAD = AgentStep("lead_agent", "lead", 1, model="m")


def redactor() -> HookRunner:
    return HookRunner([RedactionHooks([r"sk-[A-Za-z0-9]{20,}", r"\b\d{3}-\d{2}-\d{4}\b"])])


async def test_redaction_cleans_the_user_message_before_it_is_stored():
    assert await redactor().before_run(RUN, f"use {KEY} and ssn 123-45-6789") == "use [REDACTED] and ssn [REDACTED]"
    assert await redactor().before_run(RUN, "nothing secret") == "nothing secret"


async def test_redaction_cleans_every_message_sent_to_the_model():
    request = ModelRequest(
        [
            {"role": "system", "content": f"key {KEY}"},
            {"role": "user", "content": [{"type": "text", "text": f"part {KEY}"}]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "web_fetch", "arguments": f'{{"token": "{KEY}"}}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": f"page says {KEY}"},
        ],
        [],
        "m",
    )
    sent = await redactor().before_model_request(RUN, LEAD, request)
    assert KEY not in repr(sent.messages)
    assert sent.messages[0]["content"] == "key [REDACTED]"
    assert sent.messages[1]["content"] == [{"type": "text", "text": "part [REDACTED]"}]
    assert sent.messages[2]["tool_calls"][0]["function"]["arguments"] == '{"token": "[REDACTED]"}'
    assert sent.messages[2]["content"] is None and sent.messages[3]["tool_call_id"] == "c1"
    assert KEY in repr(request.messages)  # the input record is untouched
    clean = ModelRequest([{"role": "user", "content": "hi"}], [], "m")
    assert await redactor().before_model_request(RUN, LEAD, clean) is clean


async def test_redaction_cleans_tool_results_and_model_answers():
    runner = redactor()
    call = ToolCall("c1", "web_fetch", {"url": "https://x.example"}, "lead_agent", "lead", 1)
    result = await runner.after_tool_call(RUN, call, ToolResult(True, {"body": f"k={KEY}", "n": 3, "list": [KEY]}))
    assert result.data == {"body": "k=[REDACTED]", "n": 3, "list": ["[REDACTED]"]}
    assert result.metadata["redacted"] is True
    failed = await runner.after_tool_call(RUN, call, ToolResult.fail(f"auth {KEY} rejected"))
    assert failed.error == "auth [REDACTED] rejected"
    response = ModelResponse(f"the key is {KEY}", [{"id": "c2", "name": "web_fetch", "arguments": f'{{"q": "{KEY}"}}'}], "m")
    answer = await runner.after_model_request(RUN, LEAD, ModelRequest([], [], "m"), response)
    assert answer.content == "the key is [REDACTED]" and KEY not in answer.tool_calls[0]["arguments"]
    with pytest.raises(ValueError, match="at least one pattern"):
        RedactionHooks([])


def policy(**settings) -> HookRunner:
    return HookRunner([ToolPolicyHooks(settings)])


def fetch(*urls: str) -> ToolCall:
    return ToolCall.from_raw(fetch_call("c1", *urls), agent="lead_agent", invocation="lead", round=1)


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://python.org/downloads", True),
        ("https://docs.python.org/3/", True),
        ("HTTPS://PYTHON.ORG.", True),
        ("python.org/about", True),
        ("https://evil.example/python.org", False),
        ("https://python.org@evil.example/", False),
        ("https://evilpython.org/", False),
        ("https://python.org.evil.example/", False),
        ("ftp://", False),
    ],
)
async def test_web_fetch_is_refused_outside_the_listed_domains(url, allowed):
    runner = policy(rules=[{"tool": "web_fetch", "argument": "url_list", "domains": ["python.org"], "reason": "only python.org"}])
    decided = await runner.before_tool_call(RUN, fetch(url))
    if allowed:
        assert isinstance(decided, ToolCall)
    else:
        assert isinstance(decided, Refuse) and decided.hook == "tool_policy"
        assert decided.reason.startswith("only python.org (url_list ") and "is outside python.org" in decided.reason
    # Every URL of the list must pass.
    both = await runner.before_tool_call(RUN, fetch("https://python.org/", url))
    assert isinstance(both, ToolCall) == allowed


async def test_tools_and_argument_patterns_can_be_denied_or_allowed():
    runner = policy(
        deny_tools=["shell", "*_artifact"],
        rules=[
            {"tool": "web_*", "argument": "url_list", "deny": [r"\.zip$"]},
            {"tool": "search", "argument": "options.engine", "allow": ["^(ddg|brave)$"]},
        ],
    )

    def call(name: str, **args) -> ToolCall:
        return ToolCall("c", name, args, "lead_agent", "lead", 1)

    assert (await runner.before_tool_call(RUN, call("shell", cmd="ls"))).reason == "the tool 'shell' is not allowed by policy"
    assert isinstance(await runner.before_tool_call(RUN, call("delete_artifact")), Refuse)
    assert "matches a denied pattern" in (await runner.before_tool_call(RUN, fetch("https://x.example/a.zip"))).reason
    assert isinstance(await runner.before_tool_call(RUN, fetch("https://x.example/a.html")), ToolCall)
    assert isinstance(await runner.before_tool_call(RUN, call("search", options={"engine": "ddg"})), ToolCall)
    refused = await runner.before_tool_call(RUN, call("search", options={"engine": "google"}))
    assert refused.reason == "options.engine 'google' is outside the allowed patterns"
    assert isinstance(await runner.before_tool_call(RUN, call("search", q="no engine given")), ToolCall)

    only = policy(allow_tools=["web_fetch", "read_*"])
    assert isinstance(await only.before_tool_call(RUN, call("read_artifact")), ToolCall)
    assert (await only.before_tool_call(RUN, call("shell"))).reason.endswith("(allowed: web_fetch, read_*)")


def test_host_parsing():
    assert host_of("https://user:pw@Docs.Python.org:443/x") == "docs.python.org"
    assert host_of("http://[::1]/") == "::1"
    assert host_of("") is None


async def test_both_builtins_load_from_config_and_act_in_a_simulated_round(tmp_path):
    folder = tmp_path / "config"
    folder.mkdir()
    (folder / "artifactflow.yaml").write_text(textwrap.dedent(r"""
        hooks:
          tool_policy:
            rules: [{tool: web_fetch, argument: url_list, domains: [python.org]}]
          redaction:
            patterns: ['sk-[A-Za-z0-9]{20,}']
            replacement: '<secret>'
    """), encoding="utf-8")
    runner = build_runner(load_settings(folder, tmp_path / "data"))
    assert [name for name, _ in runner.hooks] == ["tool_policy", "redaction"]
    decided = await model_step(runner, RUN, LEAD, "", [fetch_call("c1"), fetch_call("c2", "https://evil.example/")])
    assert isinstance(decided[0], ToolCall) and isinstance(decided[1], Refuse)
    raw = [ToolCall.from_raw(fetch_call("c2", "https://evil.example/"), agent="lead_agent", invocation="lead", round=1)]
    outcomes, _ = await tool_round(
        runner, RUN, "lead_agent", "lead", 1, decided, {"c1": ToolResult(True, f"token {KEY}")},
        raw_calls=[decided[0], raw[0]],
    )
    assert outcomes[0].result.data == "token <secret>"
    assert outcomes[1].refused and outcomes[1].result.error.startswith("refused: url_list 'https://evil.example/' is outside python.org")
