"""A model server misbehaving mid-answer (issue 22: D7, D8), through real HTTP to the scripted
OpenAI-compatible server.

- D7: the connection is reset (TCP RST) while the answer streams: the run fails with the cause
  named ("connection reset by peer", and the exception chain), never an empty reason.
- D8: the server ignores `max_tokens` and sends 2.4 MB: the answer is cut at the output limit
  plus a margin, marked (finish reason "length" and a note), and only that is stored.
"""

from __future__ import annotations

from typing import Any

from scripted_llm import Text

from artifactflow.agents.model.failures import MARGIN, MAX_CHARS_PER_TOKEN


async def test_a_connection_reset_mid_stream_names_its_cause(make_client: Any, llm: Any) -> None:
    client = await make_client()
    llm.script(Text("a long answer that never arrives whole " * 20, chunk_size=8, reset_after=3))
    result = await client.run("hello")
    assert result.status == "failed"
    error = result.error or ""
    assert error.startswith("model call failed: connection failed: connection reset by peer ("), (
        error
    )
    assert "ConnectionResetError: [Errno 104] Connection reset by peer" in error, error
    assert len(llm.requests) == 1  # text was shown already: not retried


async def test_a_reset_before_any_text_is_retried_and_then_named(
    make_client: Any, llm: Any
) -> None:
    client = await make_client()
    llm.script(*[Text("never", reset_after=0) for _ in range(3)])
    result = await client.run("hello")
    assert result.status == "failed" and len(llm.requests) == 3  # llm.max_retries: 2
    assert "after 3 attempts: connection failed" in (result.error or "")
    assert "connection reset by peer" in (result.error or ""), result.error


async def test_an_answer_past_the_output_limit_is_cut_and_marked(
    make_client: Any, llm: Any
) -> None:
    client = await make_client(yaml_text="llm:\n  max_output_tokens: 1000\n")
    llm.script(Text("x" * 2_400_000, chunk_size=65536))  # the server ignores max_tokens
    run = await client.runs.start("hello")
    live = [event async for event in run]  # token deltas too (they are never stored)
    result = await run.result()
    bound = int(1000 * MAX_CHARS_PER_TOKEN * MARGIN)
    assert llm.requests[0]["max_tokens"] == 1000
    assert result.status == "completed"
    complete = next(e for e in result.events if e.type == "llm_complete")
    assert complete.data.finish_reason == "length"
    assert complete.data.content.startswith("x" * bound) and complete.data.content[bound] != "x"
    assert "[answer cut at 10000 characters" in complete.data.content
    assert len(result.response or "") < bound + 200  # what is stored, not 2.4 MB
    streamed = "".join(e.data.delta for e in live if e.type == "llm_chunk")  # type: ignore[union-attr]
    assert len(streamed) == bound  # nor was more shown


async def test_an_answer_within_the_limit_is_untouched(make_client: Any, llm: Any) -> None:
    client = await make_client(yaml_text="llm:\n  max_output_tokens: 1000\n")
    llm.script(Text("y" * 9000, chunk_size=4096))
    result = await client.run("hello")
    assert result.response == "y" * 9000
    complete = next(e for e in result.events if e.type == "llm_complete")
    assert complete.data.finish_reason == "stop"
