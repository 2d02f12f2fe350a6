"""Helpers for testing code built on artifactflow, without a model provider or a network.

`ScriptedLLM` is a real OpenAI-compatible HTTP server on 127.0.0.1 that answers from a script
(text, streamed tool calls, HTTP errors, delays), so your agents, tools and permission flows
run through the real `openai` client. Point `OPENAI_BASE_URL` at `llm.base_url`:

    from artifactflow.testing import Call, ScriptedLLM, Text, ToolCalls

    with ScriptedLLM() as llm:
        llm.script(ToolCalls([Call("my_tool", {"x": 1})]), Text("done"))
        os.environ["OPENAI_BASE_URL"] = llm.base_url
        ...
"""

from .quirks import LLAMA_CPP_PYTHON, LLAMA_SERVER, Quirks
from .scripted_llm import (
    NO_RESPONSE_MESSAGE,
    Call,
    Delay,
    Error,
    Hang,
    Response,
    Route,
    ScriptedLLM,
    Text,
    ToolCalls,
    Unexpected,
    completion_tokens,
    prompt_tokens,
    scripted_llm,
)

__all__ = [
    "LLAMA_CPP_PYTHON",
    "LLAMA_SERVER",
    "NO_RESPONSE_MESSAGE",
    "Call",
    "Delay",
    "Error",
    "Hang",
    "Quirks",
    "Response",
    "Route",
    "ScriptedLLM",
    "Text",
    "ToolCalls",
    "Unexpected",
    "completion_tokens",
    "prompt_tokens",
    "scripted_llm",
]
