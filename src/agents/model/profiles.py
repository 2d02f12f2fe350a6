"""Model profiles: which endpoint, key and model name an agent's `model:` field means.

`config/models.yaml` maps profile names to `{api, base_url, api_key_env, model, params}`, plus
what the engine must know about the model: `context_window` (tokens; unset means the
`context.default_window` setting) and optional prices per million tokens. Three fields adapt
the calls to the server: `max_output_tokens` (the output bound of each call; unset means
`llm.max_output_tokens`), `tool_choice` (sent with tools; llama-cpp-python ignores tools
without it) and `stream_tools: false` (the server cannot stream tool calls, so turns that
offer tools are sent unstreamed). An agent
whose `model` is not a profile name uses that string as the model name on the default
endpoint, which is configured exactly as the OpenAI SDK is: `OPENAI_BASE_URL` and
`OPENAI_API_KEY`. Credentials are checked when a run starts, so a missing key is a clear
message naming the variable, never a traceback from deep inside the SDK.

`api` names the provider API that serves the profile (`chat_completions`, the default);
`registry` maps it to a `Model` implementation, so a new provider API is a new
module registered there, never a change to the nodes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...errors import ConfigError, MissingCredentialsError
from ...settings import read_config_text
from ...settings.problems import unknown_key_line
from .base import ResolvedModel
from .registry import model_api_names

DEFAULT_MODEL = "gpt-4o-mini"


class ProfileSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    api: str = "chat_completions"
    base_url: str | None = None
    base_url_env: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    params: dict[str, Any] = {}
    context_window: int | None = Field(default=None, ge=256)
    input_per_mtok: float | None = Field(default=None, ge=0)  # USD per million prompt tokens
    output_per_mtok: float | None = Field(default=None, ge=0)  # USD per million completion tokens
    max_output_tokens: int | None = Field(default=None, ge=1)  # per call; None: llm.max_output_tokens
    tool_choice: str | dict[str, Any] | None = None  # "auto", "required", "none" or a function
    stream_tools: bool = True  # False: turns that offer tools are sent without streaming


class ModelRegistry:
    """Resolves agent model references against profiles and the environment.

    `credentials_required=False` resolves without API keys (an empty key): for a process whose
    every agent is served by one in-process model (`Services.use_model`), where no key is sent.
    """

    def __init__(
        self,
        profiles: Mapping[str, ProfileSpec] | None = None,
        default_model: str | None = None,
        env: Mapping[str, str] | None = None,
        *,
        credentials_required: bool = True,
    ) -> None:
        self.profiles = dict(profiles or {})
        self.default_model = default_model
        self.env = os.environ if env is None else env
        self.credentials_required = credentials_required

    @classmethod
    def from_file(
        cls, path: Path, default_model: str | None = None, env: Mapping[str, str] | None = None
    ) -> ModelRegistry:
        profiles: dict[str, ProfileSpec] = {}
        if path.exists():
            try:
                raw = yaml.safe_load(read_config_text(path)) or {}
            except yaml.YAMLError as exc:
                raise ConfigError(f"{path}: invalid YAML: {exc}") from None
            section = raw.get("profiles", raw) if isinstance(raw, dict) else None
            if not isinstance(section, dict):
                raise ConfigError(f"{path}: expected 'profiles:' mapping names to profiles")
            lines: list[str] = []  # every problem of the file, not the first
            for name, spec in section.items():
                try:
                    profiles[str(name)] = ProfileSpec.model_validate(spec)
                except ValidationError as exc:
                    for err in exc.errors():
                        where = ".".join(str(p) for p in err["loc"]) or "profile"
                        if err["type"] == "extra_forbidden":
                            line = unknown_key_line(where, where, ProfileSpec.model_fields)
                            lines.append(f"profile '{name}', {line}")
                        else:
                            lines.append(f"profile '{name}', field '{where}': {err['msg']}")
                    continue
                api = profiles[str(name)].api
                if api not in model_api_names():
                    lines.append(
                        f"profile '{name}', field 'api': unknown model API '{api}'; "
                        f"known: {', '.join(model_api_names())}"
                    )
            if len(lines) == 1:
                raise ConfigError(f"{path}: {lines[0]}")
            if lines:
                listed = "\n".join(f"  - {line}" for line in lines)
                raise ConfigError(f"{path}: {len(lines)} problems:\n{listed}")
        return cls(profiles, default_model=default_model, env=env)

    def _refuse_unknown_profile(self, ref: str) -> None:
        """`ref` is no profile and no endpoint would serve it as a model name: name it with
        the profiles there are (the nearest first), since a typo is likelier than a model."""
        import difflib

        names = sorted(self.profiles)
        close = difflib.get_close_matches(ref, names, n=1, cutoff=0.6)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise MissingCredentialsError(
            f"model '{ref}' is not a profile of models.yaml ({hint}profiles: {', '.join(names)}); "
            "to use it as a model name on the default endpoint, set OPENAI_API_KEY"
        )

    def resolve(self, reference: str | None) -> ResolvedModel:
        ref = reference or self.default_model
        if ref and ref in self.profiles:
            spec = self.profiles[ref]
            base_url = spec.base_url
            if spec.base_url_env:
                base_url = self.env.get(spec.base_url_env) or base_url
            key = self.env.get(spec.api_key_env) or ""
            if not key and self.credentials_required:
                where = f" for {base_url}" if base_url else ""
                hint = " (any value if the server checks no key)" if base_url else ""
                raise MissingCredentialsError(
                    f"model profile '{ref}' needs an API key{where}: set {spec.api_key_env}{hint}"
                )
            return ResolvedModel(
                ref, spec.model, base_url, key, dict(spec.params), spec.api,
                spec.context_window, spec.input_per_mtok, spec.output_per_mtok,
                max_output_tokens=spec.max_output_tokens, tool_choice=spec.tool_choice,
                stream_tools=spec.stream_tools,
            )
        base_url = self.env.get("OPENAI_BASE_URL") or None
        key = self.env.get("OPENAI_API_KEY") or ""
        if ref and self.profiles and not key and self.credentials_required:
            self._refuse_unknown_profile(ref)  # a misspelled profile, not "no endpoint"
        if not key and self.credentials_required and base_url:
            raise MissingCredentialsError(
                f"no API key for the endpoint OPENAI_BASE_URL={base_url}: set OPENAI_API_KEY "
                "(a local server that checks no key, such as llama-server or Ollama, accepts any "
                "value: OPENAI_API_KEY=none)"
            )
        if not key and self.credentials_required:
            raise MissingCredentialsError(
                "no model endpoint configured: set OPENAI_API_KEY (and OPENAI_BASE_URL for a "
                "non-OpenAI endpoint, e.g. http://localhost:11434/v1), or name a profile from "
                "config/models.yaml in ARTIFACTFLOW_MODEL"
            )
        return ResolvedModel(None, ref or DEFAULT_MODEL, base_url, key, {})
