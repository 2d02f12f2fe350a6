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

from . import scripted_llm as _server
from .scripted_llm import *  # noqa: F403  (its __all__ is the public list, kept in one place)

__all__: list[str] = []
__all__ += _server.__all__
