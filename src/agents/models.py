"""Model profiles: which endpoint, key and model name an agent's `model:` field means.

`config/models.yaml` maps profile names to `{base_url, api_key_env, model, params}`. An agent
whose `model` is not a profile name uses that string as the model name on the default
endpoint, which is configured exactly as the OpenAI SDK is: `OPENAI_BASE_URL` and
`OPENAI_API_KEY`. Credentials are checked when a run starts, so a missing key is a clear
message naming the variable, never a traceback from deep inside the SDK.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ConfigError, MissingCredentialsError
from ..settings import read_config_text

DEFAULT_MODEL = "gpt-4o-mini"


class ProfileSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    base_url: str | None = None
    base_url_env: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    params: dict[str, Any] = {}


@dataclass(frozen=True)
class ResolvedModel:
    """A concrete endpoint + model pair, ready to build a client for."""

    profile: str | None
    model: str
    base_url: str | None
    api_key: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def client_key(self) -> tuple[str | None, str]:
        return (self.base_url, self.api_key)


class ModelRegistry:
    """Resolves agent model references against profiles and the environment."""

    def __init__(
        self,
        profiles: Mapping[str, ProfileSpec] | None = None,
        default_model: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.profiles = dict(profiles or {})
        self.default_model = default_model
        self.env = os.environ if env is None else env

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
            for name, spec in section.items():
                try:
                    profiles[str(name)] = ProfileSpec.model_validate(spec)
                except ValidationError as exc:
                    err = exc.errors()[0]
                    where = ".".join(str(p) for p in err["loc"]) or "profile"
                    raise ConfigError(
                        f"{path}: profile '{name}', field '{where}': {err['msg']}"
                    ) from None
        return cls(profiles, default_model=default_model, env=env)

    def resolve(self, reference: str | None) -> ResolvedModel:
        ref = reference or self.default_model
        if ref and ref in self.profiles:
            spec = self.profiles[ref]
            base_url = spec.base_url
            if spec.base_url_env:
                base_url = self.env.get(spec.base_url_env) or base_url
            key = self.env.get(spec.api_key_env)
            if not key:
                raise MissingCredentialsError(
                    f"model profile '{ref}' needs an API key: set {spec.api_key_env}"
                )
            return ResolvedModel(ref, spec.model, base_url, key, dict(spec.params))
        base_url = self.env.get("OPENAI_BASE_URL") or None
        key = self.env.get("OPENAI_API_KEY")
        if not key:
            raise MissingCredentialsError(
                "no model endpoint configured: set OPENAI_API_KEY (and OPENAI_BASE_URL for a "
                "non-OpenAI endpoint, e.g. http://localhost:11434/v1), or name a profile from "
                "config/models.yaml in ARTIFACTFLOW_MODEL"
            )
        return ResolvedModel(None, ref or DEFAULT_MODEL, base_url, key, {})
