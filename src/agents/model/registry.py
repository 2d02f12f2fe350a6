"""Which `Model` serves a resolved profile.

A profile in `config/models.yaml` names its provider API (`api: chat_completions`, the
default). Implementations are registered here by that name as factories of `LLMSettings`, so
supporting the OpenAI Responses API or Anthropic's is one new module plus one
`register_model_api` call; the nodes only ever see the `Model` protocol.

`ModelPicker` is what the process's `Services` carries: it builds one `Model` per API on first
use and closes them at shutdown, or serves every agent with one fixed model (a
`ScriptedModel` in tests).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ...errors import ConfigError
from ...settings import LLMSettings
from .base import Model, ResolvedModel

ModelFactory = Callable[[LLMSettings], Model]


def _openai_chat(settings: LLMSettings) -> Model:
    from .openai_chat import OpenAIChatModel

    return OpenAIChatModel(settings)


_APIS: dict[str, ModelFactory] = {"chat_completions": _openai_chat}


def register_model_api(name: str, factory: ModelFactory, *, replace: bool = False) -> None:
    """Make `api: <name>` in a model profile mean `factory(settings.llm)`."""
    if name in _APIS and not replace:
        raise ConfigError(
            f"model API '{name}' is already registered; pass replace=True to override it"
        )
    _APIS[name] = factory


def model_api_names() -> list[str]:
    return sorted(_APIS)


class ModelPicker:
    """Maps a resolved profile to the `Model` of its API, built once per process."""

    def __init__(
        self,
        settings: LLMSettings,
        *,
        fixed: Model | None = None,
        wrap: Callable[[Model], Model] | None = None,
    ) -> None:
        self.settings = settings
        self.fixed = fixed
        self.wrap = wrap  # e.g. the request recorder (replay/recording.py), around every model
        self._models: dict[str, Model] = {}

    def for_target(self, target: ResolvedModel) -> Model:
        if self.fixed is not None:
            return self.wrap(self.fixed) if self.wrap else self.fixed
        model = self._models.get(target.api)
        if model is None:
            factory = _APIS.get(target.api)
            if factory is None:
                where = f"model profile '{target.profile}'" if target.profile else "the model"
                raise ConfigError(
                    f"{where}: unknown model API '{target.api}'; known: "
                    f"{', '.join(model_api_names())}"
                )
            model = self._models[target.api] = factory(self.settings)
        return self.wrap(model) if self.wrap else model

    def prepare(self, targets: Iterable[ResolvedModel]) -> None:
        """Build now the models `targets` will need (each API once), so that the modules they
        import (the chat-completions client brings `openai` and `aiohttp`: ~60k objects) are
        loaded before the process freezes its long-lived objects (`core/engine.py`). Built on
        a first run instead, they stayed in the collector's reach, re-walked by every full
        collection under load. A target whose API is unknown is left for its run to report."""
        if self.fixed is not None:
            return
        for target in targets:
            if target.api in _APIS and target.api not in self._models:
                self._models[target.api] = _APIS[target.api](self.settings)

    async def aclose(self) -> None:
        models = list(self._models.values())
        if self.fixed is not None:
            models.append(self.fixed)
        self._models.clear()
        for model in models:
            await model.aclose()
