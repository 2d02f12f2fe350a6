"""The model seam: the `Model` protocol, its implementations, and what picks one.

- `base`: the protocol and its plain data (`ModelRequest`, `ModelResponse`, `Usage`,
  `ResolvedModel`: the endpoint and model a request goes to).
- `profiles`: `config/models.yaml` and the environment → a `ResolvedModel` (`ModelRegistry`).
- `retry`: the shared retry policy (backoff, the `Retry-After` cap, no replay after output).
- `openai_chat`: `api: chat_completions`, the OpenAI chat-completions client.
- `scripted`: `ScriptedModel`, an in-process model for tests.
- `registry`: API name → implementation, and `ModelPicker` for `Services`.
"""

from __future__ import annotations

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
