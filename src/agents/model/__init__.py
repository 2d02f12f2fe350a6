"""The model seam: the `Model` protocol, its implementations, and what picks one.

- `base`: the protocol and its plain data (`ModelRequest`, `ModelResponse`, `Usage`,
  `ResolvedModel`: the endpoint and model a request goes to).
- `profiles`: `config/models.yaml` and the environment → a `ResolvedModel` (`ModelRegistry`).
- `retry`: the shared retry policy (backoff, the `Retry-After` cap, no replay after output).
- `openai_chat`: `api: chat_completions`, the OpenAI chat-completions client.
- `scripted`: `ScriptedModel`, an in-process model for tests.
- `registry`: API name → implementation, and `ModelPicker` for `Services`.

The names are imported on first use (`lazy_exports`): the command line checks a run's model
profile and credentials (`profiles`) before anything loads the OpenAI SDK (about 1 s of CPU).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...lazy import lazy_exports

if TYPE_CHECKING:
    from .base import (
        DeltaCallback,
        Model,
        ModelRequest,
        ModelResponse,
        ResolvedModel,
        Usage,
        is_context_overflow,
    )
    from .openai_chat import OpenAIChatModel
    from .profiles import ModelRegistry, ProfileSpec
    from .registry import ModelPicker, model_api_names, register_model_api
    from .scripted import Reply, ScriptedModel, ToolCall

_MODULE_OF = {
    **dict.fromkeys(
        ("DeltaCallback", "Model", "ModelRequest", "ModelResponse", "ResolvedModel", "Usage",
         "is_context_overflow"),
        ".base",
    ),
    "OpenAIChatModel": ".openai_chat",
    "ModelRegistry": ".profiles",
    "ProfileSpec": ".profiles",
    **dict.fromkeys(("ModelPicker", "model_api_names", "register_model_api"), ".registry"),
    **dict.fromkeys(("Reply", "ScriptedModel", "ToolCall"), ".scripted"),
}
__getattr__ = lazy_exports(__name__, _MODULE_OF)

__all__ = [
    "DeltaCallback",
    "Model",
    "ModelPicker",
    "ModelRegistry",
    "ModelRequest",
    "ModelResponse",
    "OpenAIChatModel",
    "ProfileSpec",
    "Reply",
    "ResolvedModel",
    "ScriptedModel",
    "ToolCall",
    "Usage",
    "is_context_overflow",
    "model_api_names",
    "register_model_api",
]
