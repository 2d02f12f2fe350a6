"""Agents as files: `config/agents/*.md` with YAML front matter and the prompt as the body.

```
---
name: lead_agent
description: Plans the work and writes the answer
role: lead            # or subagent
model: fast           # a profile from models.yaml or a model name; empty = ARTIFACTFLOW_MODEL
tools: [create_artifact, call_subagent]
subagents: [search_agent]   # lead only; default: every subagent
max_tool_rounds: 20
max_tokens: 200000    # optional: tokens this agent may use in one run (all its calls)
max_output_tokens: 2048   # optional: output bound of each of its model calls
tool_choice: auto     # optional: sent with its tools (auto, required, none)
recall: true          # optional: recall memories before its first model call (a subagent
                      # only when set; the lead follows `memory.recall` unless set)
memory_profile: compact   # optional: its context profile (default: `memory.profile`)
---
You are ...
```
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import ConfigError
from ..settings import read_config_text

_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*(?:\n|\Z)(.*)\Z", re.DOTALL)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$")


class AgentSpec(BaseModel):
    """One agent's definition. Immutable once loaded."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    role: Literal["lead", "subagent"] = "subagent"
    model: str | None = None
    tools: tuple[str, ...] = ()
    subagents: tuple[str, ...] | None = None
    handoffs: tuple[str, ...] = ()  # agents this one may hand over to (agent groups)
    max_tool_rounds: int = Field(default=20, ge=1, le=1000)
    max_tokens: int | None = Field(default=None, ge=1)  # budget: prompt + completion in one run
    max_output_tokens: int | None = Field(default=None, ge=1)  # per call; None: the profile's
    tool_choice: str | dict[str, Any] | None = None  # None: the profile's
    recall: bool | None = None  # None: the lead follows `memory.recall`, a subagent does not
    memory_profile: str | None = None  # None: `memory.profile` (memory/profiles.py)
    prompt: str = ""
    source: str | None = None

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("must be letters, digits, '_' or '-', starting with a letter")
        return value

    @field_validator("tools", "subagents", "handoffs", mode="before")
    @classmethod
    def _listify(cls, value: object) -> object:
        if value is None:
            return value
        if isinstance(value, str):
            return tuple(v.strip() for v in value.split(",") if v.strip())
        return value


def parse_agent_file(path: Path) -> AgentSpec:
    text = read_config_text(path)
    match = _FRONT_MATTER.match(text)
    if not match:
        raise ConfigError(f"{path}: missing YAML front matter (a '---' block at the top)")
    try:
        meta = yaml.safe_load(match.group(1)) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML front matter: {exc}") from None
    if not isinstance(meta, dict):
        raise ConfigError(f"{path}: front matter must be a mapping")
    meta.setdefault("name", path.stem)
    try:
        return AgentSpec(**meta, prompt=match.group(2).strip(), source=str(path))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "front matter"
        raise ConfigError(f"{path}: field '{where}': {err['msg']}") from None
    except TypeError as exc:  # duplicate keyword such as prompt/source in front matter
        raise ConfigError(f"{path}: {exc}") from None


def load_agents(folder: Path) -> dict[str, AgentSpec]:
    """Load every agent file; exactly one lead is required."""
    agents: dict[str, AgentSpec] = {}
    if not folder.is_dir():
        raise ConfigError(f"agent folder {folder} does not exist")
    for path in sorted(folder.glob("*.md")):
        spec = parse_agent_file(path)
        if spec.name in agents:
            raise ConfigError(
                f"{path}: field 'name': agent '{spec.name}' is already defined in "
                f"{agents[spec.name].source}"
            )
        agents[spec.name] = spec
    leads = [a for a in agents.values() if a.role == "lead"]
    if len(leads) != 1:
        found = ", ".join(a.name for a in leads) or "none"
        raise ConfigError(f"{folder}: exactly one agent must have role 'lead' (found {found})")
    lead = leads[0]
    for name in lead.subagents or ():
        if name not in agents or agents[name].role != "subagent":
            raise ConfigError(f"{lead.source}: field 'subagents': '{name}' is not a subagent")
    return agents
