"""The `hooks:` and `telemetry:` sections of `config/artifactflow.yaml`.

    hooks:
      load: [my_hooks:Audit, "checks.py:Policy", {use: my_hooks:Remind, options: {every: 3}}]
      on_error: raise            # or log: a failing hook is logged and skipped
      redaction: {patterns: ['sk-[A-Za-z0-9]{20,}']}
      tool_policy: {deny_tools: [shell], rules: [{tool: web_fetch, argument: url,
                                                  domains: [python.org]}]}
    telemetry:
      exporter: none             # console | otlp
      capture_content: false

A bare list under `hooks:` is short for `hooks: {load: [...]}`. Regexes are compiled when the
settings load, so a bad pattern is a config error naming the field, not a failure mid-run.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


def _compile_all(patterns: list[str]) -> list[str]:
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
    return patterns


class HookSpec(BaseModel):
    """One hook to load: `module:object` (or a file in the config folder by path)."""

    model_config = ConfigDict(extra="forbid")

    use: str = Field(min_length=1)
    options: dict[str, Any] = {}

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        return {"use": value} if isinstance(value, str) else value


class RedactionSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    patterns: list[str] = []
    replacement: str = "[REDACTED]"

    @field_validator("patterns")
    @classmethod
    def _valid(cls, value: list[str]) -> list[str]:
        return _compile_all(value)


class ToolRule(BaseModel):
    """Limits on one tool's argument: the value must match an `allow` regex or a listed
    domain (when any is given) and no `deny` regex."""

    model_config = ConfigDict(extra="forbid")

    tool: str = Field(min_length=1, description="tool name, shell-style wildcards allowed")
    argument: str = Field(min_length=1)
    allow: list[str] = []
    deny: list[str] = []
    domains: list[str] = []
    reason: str | None = None

    @field_validator("allow", "deny")
    @classmethod
    def _valid(cls, value: list[str]) -> list[str]:
        return _compile_all(value)


class ToolPolicySettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    allow_tools: list[str] | None = None  # None: every tool not denied
    deny_tools: list[str] = []
    rules: list[ToolRule] = []


class HooksSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    load: list[HookSpec] = []
    on_error: Literal["raise", "log"] = "raise"
    redaction: RedactionSettings | None = None
    tool_policy: ToolPolicySettings | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_list(cls, value: Any) -> Any:
        if value is None:
            return {}
        return {"load": value} if isinstance(value, list) else value


class TelemetrySettings(BaseModel):
    """Tracing. `exporter: none` registers no tracing hook at all (nil overhead).
    `OTEL_EXPORTER_OTLP_ENDPOINT` and `OTEL_SERVICE_NAME` work as in any OTel SDK;
    `service_name` applies when `OTEL_SERVICE_NAME` is unset."""

    model_config = ConfigDict(extra="forbid")

    exporter: Literal["none", "console", "otlp"] = "none"
    capture_content: bool = False
    service_name: str = "artifactflow"
