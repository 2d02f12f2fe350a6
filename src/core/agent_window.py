"""Keeping an agent step inside its model's context window: the glue between the agent nodes
and the pure `core/window` package.

Around each model call of an agent step (`windowed_call`):
1. Fit: the request's fixed part (system prompt with the plan, conversation history, task or
   instruction: never summarized) plus the invocation's working memory go through
   `fit_request`; when over `context.compact_at` × window, the oldest rounds are summarized
   with one call to `context.summary_model` (default: the agent's model), and a
   `context_compacted` event says so (tokens before/after, rounds, the summary call's usage).
2. Call, measured: after the response, the invocation's `TokenCounter` is calibrated with the
   provider's `prompt_tokens`.
3. Recover once: a "context length exceeded" refusal recalibrates from the figure the provider
   names, compacts aggressively and retries; a second refusal (or compaction switched off)
   ends in `ContextWindowExceeded`, whose message names the setting to change.

Counters live on the run context, keyed by invocation: they survive between the steps of a
run segment; a resumed segment (perhaps in another process) starts fresh and recalibrates
from its first reported usage. When the memory was compacted, the node returns
`node_result(update, replaced)`: channel writes that replace the memory (a reset and one
append in the DeltaChannel), so no second copy is checkpointed.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from langgraph.types import Command

from ..agents.model import ModelRequest, ModelResponse
from ..agents.model.openai_wire import output_limit
from ..agents.spec import AgentSpec
from ..errors import ContextOverflowError, LLMError
from ..events.payloads import AgentEventData, ContextCompactedData
from ..shapes import ChatMessage
from .context import RunContext, Services
from .window import (
    CompactionConfig,
    CompactionResult,
    ContextWindowExceeded,
    Overflow,
    Prices,
    TokenCounter,
    context_window,
    cost_usd,
    fit_request,
    memory_writes,
    parse_exception,
)

log = logging.getLogger("artifactflow")

Message = ChatMessage
MIN_SHARE = 0.1  # the lowest compaction threshold an output bound may push us to
Emit = Callable[[AgentEventData], None]
Call = Callable[[list[Message]], Awaitable[ModelResponse]]


def model_label(target: Any) -> str:
    return f"model profile '{target.profile}'" if target.profile else f"model '{target.model}'"


def compaction_config(
    svc: Services, spec: AgentSpec, target: Any, learned: int | None = None
) -> CompactionConfig:
    """The agent's model window (or the smaller one a provider named in this run), with the
    threshold lowered when needed so that a prompt at it plus the call's output bound still
    fit: servers refuse prompt + max_tokens > window."""
    window = context_window(target, svc.settings.context)
    window = min(window, learned or window)
    config = CompactionConfig.from_settings(
        svc.settings.context, window, agent=spec.name, model_label=model_label(target)
    )
    probe = ModelRequest(target, [], agent=spec.name, max_output_tokens=spec.max_output_tokens)
    _, bound = output_limit(probe, svc.settings.llm)
    if bound and window * config.compact_at + bound > window:
        config = dataclasses.replace(config, compact_at=max(MIN_SHARE, (window - bound) / window))
    return config


def _state(context: RunContext) -> dict[str, Any]:
    state = context.window
    state.setdefault("counters", {})
    state.setdefault("windows", {})
    return state


def counter_for(context: RunContext, invocation: str) -> TokenCounter:
    counters: dict[str, TokenCounter] = _state(context)["counters"]
    return counters.setdefault(invocation, TokenCounter())


class Summarizer:
    """The one summary call of a compaction, through the Model seam, with its usage kept for
    the `context_compacted` event (budgets count it). A failed call yields "" so compaction
    falls back to a mechanical trace instead of failing the step."""

    def __init__(self, svc: Services, agent: str, model_ref: str | None) -> None:
        self.agent = agent
        self.target = svc.resolve(svc.settings.context.summary_model or model_ref)
        self.model = svc.llm.for_target(self.target)
        self.window = context_window(self.target, svc.settings.context)
        self.max_output_tokens = svc.settings.context.summary_max_tokens
        self.prompt_tokens = self.completion_tokens = 0

    async def __call__(self, messages: list[Message]) -> str:
        # The summary request is sized to leave `summary_max_tokens` of the window for the
        # answer (twice that, for a tokenizer denser than our estimate): bound the call to it.
        request = ModelRequest(
            self.target, messages, None, agent=self.agent, max_output_tokens=2 * self.max_output_tokens
        )
        try:
            response = await self.model.complete(request)
        except LLMError as exc:
            log.warning("%s: the summary call failed (%s); keeping a mechanical summary", self.agent, exc)
            return ""
        if response.usage is not None:
            self.prompt_tokens += response.usage.prompt_tokens
            self.completion_tokens += response.usage.completion_tokens
        return response.content

    def event_data(self) -> dict[str, Any]:
        cost = cost_usd(self.prompt_tokens, self.completion_tokens, Prices.of(self.target))
        return {
            "summary_model": self.target.model,
            "usage": {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens},
            "cost_usd": cost if self.prompt_tokens else None,
        }


@dataclass
class WindowedStep:
    """A model call made to fit. `memory` is what the request was built from: the compacted
    memory when `compacted`, else the memory as given."""

    response: ModelResponse
    memory: list[Message]
    compacted: bool

    def replaced(self, update: Mapping[str, Any], invocation: str) -> dict[str, list[Message]]:
        """`{invocation: full new memory}` when compacted (what `node_result` needs), else {}."""
        if not self.compacted:
            return {}
        turn = update["agent_memories"][invocation][-1]  # this step's assistant message
        return {invocation: [*self.memory, turn]}


def node_result(update: Mapping[str, Any], replaced: Mapping[str, list[Message]]) -> Any:
    """What a node returns: its partial update, or, when memories were compacted, channel
    writes that replace those memories once (`memory_writes`)."""
    if not replaced:
        return update
    return Command(update=memory_writes(update, dict(replaced)))


def _overflow(exc: LLMError) -> Overflow | None:
    overflow = parse_exception(exc)
    if overflow is None and isinstance(exc, ContextOverflowError):
        overflow = Overflow()
    return overflow


def _still_too_long(config: CompactionConfig, tokens: int, overflow: Overflow, compaction: bool) -> ContextWindowExceeded:
    said = f"; the provider says {overflow.limit_tokens:,}" if overflow.limit_tokens else ""
    fix = (
        "Set `context_window` for this model in config/models.yaml to its real window (or "
        "context.default_window for models without a profile)"
    )
    if not compaction:
        fix += ", or turn context.compaction on so older tool rounds are summarized"
    return ContextWindowExceeded(
        f"{config.agent}: the provider refused the request as longer than the model's context "
        f"window (about {tokens:,} tokens estimated; {config.window:,}-token window configured "
        f"for {config.model_label}{said}). {fix}.",
        agent=config.agent,
        setting="context_window",
    )


async def windowed_call(
    context: RunContext,
    spec: AgentSpec,
    invocation: str,
    *,
    fixed: list[Message],
    memory: list[Message],
    task: str,
    emit: Emit,
    call: Call,
    on_compacted: Callable[[CompactionResult, str], Awaitable[None]] | None = None,
) -> WindowedStep:
    """Fit the request, call the model (`call(messages)`), calibrate; recover once from an
    overflow. `fixed` is the request without the memory; `task` goes into summary requests;
    `on_compacted(result, summary_model)` runs after each compaction (the `on_compaction`
    hook)."""
    svc = context.services
    tools = svc.tools.specs(spec.tools) or None
    settings = svc.settings.context
    target = svc.resolve(spec.model)
    windows = _state(context)["windows"]
    config = compaction_config(svc, spec, target, windows.get(model_label(target)))
    counter = counter_for(context, invocation)
    summarizer = Summarizer(svc, spec.name, spec.model)
    summarizer.max_output_tokens = config.summary_tokens
    compacted = False

    async def fit(aggressive: bool) -> None:
        nonlocal memory, compacted
        result = await fit_request(
            fixed=fixed,
            memory=memory,
            tools=tools,
            task=task,
            summarize=summarizer,
            counter=counter,
            config=config,
            aggressive=aggressive,
            summary_window=summarizer.window,
        )
        if result is not None:
            memory, compacted = result.memory, True
            _announce(emit, result, summarizer)
            summarizer.prompt_tokens = summarizer.completion_tokens = 0
            if on_compacted is not None:
                await on_compacted(result, summarizer.target.model)

    if settings.compaction:
        await fit(aggressive=False)
    for attempt in (1, 2):
        measured = counter.measure([*fixed, *memory], tools)
        try:
            response = await call([*fixed, *memory])
        except LLMError as exc:
            overflow = _overflow(exc)
            if overflow is None:
                raise
            if attempt == 2 or not settings.compaction:
                raise _still_too_long(config, measured.tokens, overflow, settings.compaction) from exc
            counter.observe(measured.raw, overflow.requested_tokens)
            if overflow.limit_tokens and overflow.limit_tokens < config.window:
                windows[model_label(target)] = overflow.limit_tokens
                config = compaction_config(svc, spec, target, overflow.limit_tokens)
            try:
                await fit(aggressive=True)
            except ContextWindowExceeded as error:
                raise error from exc  # the provider's refusal stays visible as the cause
            continue
        usage = response.usage
        counter.observe(measured.raw, usage.prompt_tokens if usage else None)
        return WindowedStep(response, memory, compacted)
    raise AssertionError("unreachable")  # pragma: no cover


def _announce(emit: Emit, result: CompactionResult, summarizer: Summarizer) -> None:
    data = result.event_data()
    summary = summarizer.event_data() if data["summary_chars"] else {}
    emit(ContextCompactedData(
        scope="memory",
        tokens_before=data["tokens_before"],
        tokens_after=data["tokens_after"],
        rounds_summarized=data["rounds_summarized"],
        aggressive=data["aggressive"],
        results_shortened=data["results_shortened"],
        **summary,
    ))
