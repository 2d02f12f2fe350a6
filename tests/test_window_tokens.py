"""Offline token estimates and their calibration from reported usage."""

from __future__ import annotations

import json
import re

from artifactflow.core.window.tokens import (
    TokenCounter,
    message_tokens,
    request_tokens,
    text_tokens,
    tools_tokens,
)

_PIECE = re.compile(r"\w{1,3}|[^\w\s]")


def true_tokens(messages: list[dict]) -> int:
    """A stand-in 'real tokenizer' that disagrees with the heuristic: 3-character word pieces
    and every punctuation mark is a token (dense for JSON), 3 tokens per message frame."""
    total = 2
    for m in messages:
        total += 3 + len(_PIECE.findall(m.get("content") or ""))
        for call in m.get("tool_calls") or ():
            total += len(_PIECE.findall(call["function"]["arguments"]))
    return total


def tool_round(n: int) -> list[dict]:
    args = json.dumps({"query": f"figures for region {n}", "page": n})
    result = json.dumps({"rows": [{"id": i, "value": i * n, "ok": i % 2 == 0} for i in range(40)]})
    return [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{n}", "type": "function", "function": {"name": "lookup", "arguments": args}}
        ]},
        {"role": "tool", "tool_call_id": f"call_{n}", "content": result},
    ]


def test_heuristic_counts_text_calls_and_schemas():
    assert text_tokens("") == 0 and text_tokens(None) == 0
    assert text_tokens("a" * 400) == 100
    # non-ASCII text costs more per character than ASCII text
    assert text_tokens("数据" * 50) > text_tokens("ab" * 50) * 4
    assert text_tokens("é" * 100) > text_tokens("e" * 100)
    plain = {"role": "assistant", "content": "ok"}
    with_call = {**plain, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "web_fetch", "arguments": '{"url": "' + "x" * 400 + '"}'}}
    ]}
    assert message_tokens(with_call) > message_tokens(plain) + 100
    schema = [{"type": "function", "function": {"name": "f", "description": "d" * 400, "parameters": {}}}]
    assert tools_tokens(schema) > 100
    assert request_tokens([plain], schema) == request_tokens([plain]) + tools_tokens(schema)


def test_calibrated_estimate_tracks_a_different_tokenizer_as_the_run_grows():
    messages = [
        {"role": "system", "content": "You are the lead agent. Use tools to gather data."},
        {"role": "user", "content": "Collect the figures for every region and compare them."},
    ]
    counter = TokenCounter()
    worst_raw = worst_calibrated = 0.0
    for n in range(1, 30):
        measured = counter.measure(messages)
        truth = true_tokens(messages)
        if n > 2:  # the first requests calibrate; from then on the estimate follows the truth
            worst_raw = max(worst_raw, abs(measured.raw - truth) / truth)
            worst_calibrated = max(worst_calibrated, abs(measured.tokens - truth) / truth)
        counter.observe(measured.raw, truth)  # the provider reports usage for that request
        assert counter.estimate(messages) == truth  # exact for what was already counted
        messages += tool_round(n)
    assert worst_raw > 0.3  # the heuristic alone is far off for this JSON-heavy text
    assert worst_calibrated < 0.03


def test_missing_or_absurd_usage_keeps_the_calibration():
    counter = TokenCounter()
    messages = [{"role": "user", "content": "x" * 4000}]
    raw = counter.measure(messages).raw
    for missing in (None, 0, -3):
        counter.observe(raw, missing)
    assert counter.observations == 0 and counter.estimate(messages) == raw
    counter.observe(raw, raw * 2)
    assert counter.estimate(messages) == raw * 2
    counter.observe(raw, raw * 50)  # a proxy reporting nonsense must not wreck the estimate
    assert counter.ratio == 2.0 and counter.estimate(messages) == raw * 2
    restored = TokenCounter.from_dict(json.loads(json.dumps(counter.to_dict())))
    assert restored == counter
    assert TokenCounter.from_dict(None) == TokenCounter()


def test_estimate_shrinks_when_the_memory_is_replaced():
    """After a compaction the request is smaller than the anchor: the delta is negative."""
    counter = TokenCounter()
    long = [{"role": "user", "content": "task"}] + [m for n in range(20) for m in tool_round(n)]
    measured = counter.measure(long)
    counter.observe(measured.raw, true_tokens(long))
    short = [long[0], {"role": "user", "content": "summary of 19 rounds"}, *tool_round(19)]
    estimate, truth = counter.estimate(short), true_tokens(short)
    assert 0 < estimate and abs(estimate - truth) / truth < 0.2


def test_measuring_a_growing_memory_recounts_only_what_changed():
    """The memo gives exactly the full count, whatever changed: appended rounds, a compacted
    front, an edited system prompt."""
    counter = TokenCounter()
    system = {"role": "system", "content": "You are the lead agent."}
    memory = [m for n in range(30) for m in tool_round(n)]
    for step in range(1, 30):
        messages = [system, *memory[: 2 * step]]
        assert counter.measure(messages).raw == request_tokens(messages)
    compacted = [{"role": "user", "content": "[Context summary: 25 earlier tool rounds] notes"}, *memory[50:]]
    messages = [{"role": "system", "content": "You are the lead agent. Plan v2"}, *compacted]
    assert counter.measure(messages).raw == request_tokens(messages)
    edited = [dict(m) for m in messages]
    edited[-1]["content"] += " and more"
    assert counter.measure(edited).raw == request_tokens(edited)


def test_tool_schemas_are_encoded_once_per_list_of_schema_objects(monkeypatch):
    """A run offers the registry's same schema objects at every call: their count is kept,
    not re-encoded; other schemas (a new object, one more, one fewer) are counted afresh."""
    from artifactflow.core.window import tokens

    encoded: list[str] = []
    real_dumps = tokens.json.dumps

    def dumps(value: object, **kwargs: object) -> str:
        encoded.append(str(value))
        return real_dumps(value, **kwargs)

    monkeypatch.setattr(tokens.json, "dumps", dumps)
    one = {"type": "function", "function": {"name": "fetch_page", "parameters": {}}}
    two = {"type": "function", "function": {"name": "a_much_longer_tool_name", "parameters": {}}}
    first = tokens.tools_tokens([one, two])
    assert tokens.tools_tokens([one, two]) == first and len(encoded) == 2
    assert tokens.tools_tokens([one]) < first and len(encoded) == 3
    renamed = {**two, "function": {**two["function"], "name": "x"}}
    assert tokens.tools_tokens([one, renamed]) < first and len(encoded) == 5
    assert tokens.tools_tokens([one, two]) == first and len(encoded) == 5
