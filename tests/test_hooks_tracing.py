"""Tracing on the hooks: GenAI span names, nesting and attributes from an in-memory
exporter, a resume in a "new process" that continues the trace, and real OTLP/HTTP export
to a local collector."""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from hooks_sim import LEAD, SUB, first_segment, model_step, new_run, second_segment, tool_round
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from artifactflow.hooks import AgentStep, Failure, HookRunner, RunEnd
from artifactflow.hooks.telemetry import tracer_provider, tracing_from_settings
from artifactflow.hooks.tracing import TracingHooks
from artifactflow.settings.hooks import TelemetrySettings
from artifactflow.tools.base import ToolResult


def process(**kwargs) -> tuple[HookRunner, InMemorySpanExporter]:
    """A fresh tracer provider and hook: what a new process would have."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return HookRunner([TracingHooks(provider, **kwargs)]), exporter


def by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, ReadableSpan]:
    out = {}
    for span in spans:
        assert span.name not in out, f"duplicate span {span.name}"
        out[span.name] = span
    return out


def subset(span: ReadableSpan, expected: dict) -> bool:
    return dict(span.attributes).items() >= expected.items()


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent else None


async def test_one_run_reads_as_one_nested_trace_across_a_pause_in_another_process():
    runner_a, exported_a = process()
    run = new_run()
    waiting = await first_segment(runner_a, run)
    a = by_name(exported_a.get_finished_spans())
    assert sorted(a) == [
        "chat gpt-small", "chat gpt-test", "execute_tool web_fetch",
        "invoke_agent lead_agent", "invoke_agent researcher",
    ]
    root, sub = a["invoke_agent lead_agent"], a["invoke_agent researcher"]
    trace_id = root.context.trace_id
    assert root.parent is None
    assert {s.context.trace_id for s in a.values()} == {trace_id}
    assert parent_of(a["chat gpt-test"]) == root.context.span_id
    assert parent_of(a["execute_tool web_fetch"]) == root.context.span_id
    assert parent_of(sub) == root.context.span_id
    assert parent_of(a["chat gpt-small"]) == sub.context.span_id
    assert root.attributes["artifactflow.paused"] is True and sub.attributes["artifactflow.paused"] is True

    assert subset(root, {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": LEAD,
        "gen_ai.conversation.id": "conv-1", "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-test", "artifactflow.run.segment": "new",
    })
    assert subset(a["chat gpt-test"], {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-test", "gen_ai.response.model": "gpt-test-2025",
        "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20,
        "gen_ai.agent.name": LEAD, "gen_ai.conversation.id": "conv-1",
    })
    assert a["chat gpt-test"].attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert subset(a["execute_tool web_fetch"], {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "web_fetch",
        "gen_ai.tool.call.id": "c1", "gen_ai.tool.type": "function",
    })
    assert subset(sub, {"gen_ai.agent.name": "researcher", "artifactflow.tool_call_id": "c2"})
    # Contents are off by default.
    assert not any(k.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.tool.call.arg", "gen_ai.tool.call.res"))
                   for s in a.values() for k in s.attributes)

    # What the paused message stores: W3C traceparents of the open invocations.
    trace = waiting["trace"]
    def ids(traceparent: str) -> str:  # version-trace-span, without the flags
        return traceparent.rsplit("-", 1)[0]

    assert ids(trace["traceparent"]) == f"00-{trace_id:032x}-{root.context.span_id:016x}"
    assert list(trace["invocations"]) == [SUB]
    assert ids(trace["invocations"][SUB]) == f"00-{trace_id:032x}-{sub.context.span_id:016x}"

    # Another process resumes from the stored message: same trace, continued under the spans
    # the first segment stored.
    runner_b, exported_b = process()
    resumed = dataclasses.replace(run, resumed=True, trace_context=waiting["trace"])
    await second_segment(runner_b, resumed)
    spans_b = exported_b.get_finished_spans()
    assert {s.context.trace_id for s in spans_b} == {trace_id}
    b = {s.name: s for s in spans_b if s.name != "chat gpt-small"}
    chats_small = [s for s in spans_b if s.name == "chat gpt-small"]
    root_b, sub_b = b["invoke_agent lead_agent"], b["invoke_agent researcher"]
    assert parent_of(root_b) == root.context.span_id
    assert root_b.attributes["artifactflow.run.segment"] == "resumed"
    assert parent_of(sub_b) == sub.context.span_id and sub_b.attributes["artifactflow.continued"] is True
    assert parent_of(b["execute_tool append_note"]) == sub_b.context.span_id
    assert [parent_of(s) for s in chats_small] == [sub_b.context.span_id]
    assert parent_of(b["chat gpt-test"]) == root_b.context.span_id
    assert sub_b.attributes["artifactflow.outcome"] == "done"
    assert root_b.attributes["artifactflow.run.status"] == "completed"
    assert [e.name for e in root_b.events] == ["permission_result"]
    assert [e.name for e in root.events] == ["permission_request"]
    assert runner_b.trace_context(resumed) is None  # the run is over: nothing left open


async def test_contents_are_recorded_only_when_asked():
    runner, exported = process(capture_content=True)
    run = new_run()
    await first_segment(runner, run)
    spans = by_name(exported.get_finished_spans())
    assert '"find the release date"' in spans["chat gpt-test"].attributes["gen_ai.input.messages"]
    assert "web_fetch" in spans["chat gpt-test"].attributes["gen_ai.output.messages"]
    assert spans["execute_tool web_fetch"].attributes["gen_ai.tool.call.arguments"] == '{"url_list": ["https://python.org/downloads"]}'
    assert spans["execute_tool web_fetch"].attributes["gen_ai.tool.call.result"] == "Python 3.14 released"


async def test_the_standard_variable_turns_content_capture_on(monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    assert TracingHooks(TracerProvider()).capture_content is True
    assert TracingHooks(TracerProvider(), capture_content=False).capture_content is False


async def test_failures_set_error_status():
    runner, exported = process()
    run = new_run()
    await runner.on_run_start(run)
    sub = AgentStep("researcher", SUB, 1, model="gpt-small")
    await runner.on_agent_start(run, sub)
    from artifactflow.hooks import ModelRequest

    await runner.before_model_request(run, sub, ModelRequest([], [], "gpt-small"))
    await runner.on_error(run, Failure("model", "HTTP 500: upstream", error=RuntimeError("HTTP 500"), agent=sub, kind="llm"))
    await runner.on_error(run, Failure("agent", "subagent failed", agent=sub))
    calls = await model_step(runner, run, AgentStep(LEAD, "lead", 1, model="gpt-test"), "", [
        {"id": "c9", "name": "web_fetch", "arguments": "{}"}])
    await tool_round(runner, run, LEAD, "lead", 1, calls, {"c9": ToolResult.fail("HTTP 404")})
    await runner.on_run_end(run, RunEnd("failed", error="model failed"))
    spans = by_name(exported.get_finished_spans())
    chat = spans["chat gpt-small"]
    assert chat.status.status_code is StatusCode.ERROR and chat.attributes["error.type"] == "llm"
    assert [e.name for e in chat.events] == ["exception"]
    assert spans["invoke_agent researcher"].status.status_code is StatusCode.ERROR
    tool = spans["execute_tool web_fetch"]
    assert tool.status.status_code is StatusCode.ERROR and tool.attributes["error.type"] == "tool_error"
    root = spans["invoke_agent lead_agent"]
    assert root.status.status_code is StatusCode.ERROR and root.attributes["artifactflow.run.status"] == "failed"


async def test_parallel_subagents_in_separate_tasks_nest_under_their_own_span():
    runner, exported = process()
    run = new_run()
    await runner.on_run_start(run)

    async def subagent(name: str, delay: float) -> None:
        step = AgentStep(name, f"{name}:01", 1, model=f"m-{name}")
        await runner.on_agent_start(run, step)
        from artifactflow.hooks import ModelRequest, ModelResponse

        request = await runner.before_model_request(run, step, ModelRequest([], [], f"m-{name}"))
        await asyncio.sleep(delay)  # the other task's spans open meanwhile
        await runner.after_model_request(run, step, request, ModelResponse("ok", [], f"m-{name}"))
        from artifactflow.hooks import AgentStepEnd

        await runner.on_agent_end(run, step, AgentStepEnd("ok", 0, outcome="done"))

    await asyncio.gather(subagent("alpha", 0.02), subagent("beta", 0.0))
    await runner.on_run_end(run, RunEnd("completed"))
    spans = by_name(exported.get_finished_spans())
    for name in ("alpha", "beta"):
        assert parent_of(spans[f"chat m-{name}"]) == spans[f"invoke_agent {name}"].context.span_id
        assert parent_of(spans[f"invoke_agent {name}"]) == spans["invoke_agent lead_agent"].context.span_id


async def test_a_caller_traceparent_makes_the_run_a_child_of_the_callers_span():
    runner, exported = process()
    caller = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
    run = new_run(trace_context={"traceparent": caller})
    await runner.on_run_start(run)
    await runner.on_run_end(run, RunEnd("completed"))
    (root,) = exported.get_finished_spans()
    assert root.context.trace_id == int("ab" * 16, 16) and parent_of(root) == int("cd" * 8, 16)
    # A malformed stored value starts a new trace rather than failing the run.
    await runner.on_run_start(new_run(message_id="m2", trace_context={"traceparent": "garbage"}))


def test_telemetry_off_registers_no_hook():
    assert tracing_from_settings(TelemetrySettings()) is None


async def test_console_exporter_prints_spans_to_stderr(capsys, monkeypatch):
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    hook = tracing_from_settings(TelemetrySettings(exporter="console", service_name="svc-from-config"))
    runner = HookRunner([hook])
    run = new_run()
    await runner.on_run_start(run)
    await runner.on_run_end(run, RunEnd("completed"))
    await runner.aclose()
    captured = capsys.readouterr()
    assert captured.out == ""
    assert '"name": "invoke_agent lead_agent"' in captured.err and "svc-from-config" in captured.err


class _Collector(BaseHTTPRequestHandler):
    received: list[ExportTraceServiceRequest] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        _Collector.received.append((self.path, request))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def collector():
    server = HTTPServer(("127.0.0.1", 0), _Collector)
    _Collector.received = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", _Collector.received
    finally:
        server.shutdown()
        server.server_close()


async def test_otlp_export_reaches_a_local_collector_with_the_standard_variables(collector, monkeypatch):
    endpoint, received = collector
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "research-bot")
    hook = tracing_from_settings(TelemetrySettings(exporter="otlp"))
    runner = HookRunner([hook])
    run = new_run()
    waiting = await first_segment(runner, run)
    await runner.aclose()  # flushes the batch
    assert waiting["trace"]["traceparent"].startswith("00-")
    (path, request), *_ = received
    assert path == "/v1/traces"
    resource = request.resource_spans[0].resource
    service = {a.key: a.value.string_value for a in resource.attributes}["service.name"]
    names = sorted(s.name for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans)
    assert service == "research-bot"
    assert names == ["chat gpt-small", "chat gpt-test", "execute_tool web_fetch",
                     "invoke_agent lead_agent", "invoke_agent researcher"]


def test_tracer_provider_accepts_an_explicit_exporter():
    exporter = InMemorySpanExporter()
    provider = tracer_provider(TelemetrySettings(), exporter)
    provider.get_tracer("t").start_span("x").end()
    assert [s.name for s in exporter.get_finished_spans()] == ["x"]


async def test_a_subagent_answer_is_told_by_its_agent_span_not_a_tool_span():
    from artifactflow.hooks import ToolCall

    runner, exported = process()
    run = new_run()
    await runner.on_run_start(run)
    delegate = ToolCall("c2", "call_subagent", {"agent_name": "researcher"}, LEAD, "lead", 1)
    await runner.after_tool_call(run, delegate, ToolResult(True, "3.14 is out"))
    await runner.after_tool_call(run, delegate, ToolResult.fail("unknown subagent 'nobody'"))
    await runner.on_run_end(run, RunEnd("completed"))
    names = sorted(s.name for s in exported.get_finished_spans())
    assert names == ["execute_tool call_subagent", "invoke_agent lead_agent"]  # only the failed call
