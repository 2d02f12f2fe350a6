"""One run's agent configuration: what an assistant saves and a run's `config.configurable` /
`context` set (the model, a system-prompt addition, a subset of the lead's tools, permission
overrides, the recall profile, limits), applied as per-run `Services` over the process's.

The configuration is stored with the message (`af_run_configs`), and `RunConfigs` hands the
engine those services again when the message resumes, in this process or another
(`Runtime.services_for`), so a paused run keeps its model and permissions. Nothing here changes
the process's agents or tools: a run's services are copies with the lead's spec replaced and a
permission view of the tool registry.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..core.store.schema import run_configs
from ..errors import UserError

if TYPE_CHECKING:
    from ..core.context import Services
    from ..core.run.runtime import Runtime
    from ..core.store.repository import AppStore
    from ..core.store.rows import MessageRow


class AgentConfig(BaseModel):
    """The keys of `config.configurable` and `context` an assistant or a run may set; every
    key optional (unset: the agent file's own). Unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = Field(
        default=None, min_length=1, description="A model profile from models.yaml or a model name."
    )
    system_prompt: str | None = Field(
        default=None, description="Added to the lead agent's system prompt."
    )
    tools: list[str] | None = Field(
        default=None, description="The subset of the lead agent's tools this agent may call."
    )
    permissions: dict[str, Literal["AUTO", "CONFIRM", "auto", "confirm"]] | None = Field(
        default=None, description="Permission overrides per tool: AUTO or CONFIRM."
    )
    recall: bool | None = Field(default=None, description="Recall memories before the first call.")
    memory_profile: str | None = Field(default=None, description="The recall/context profile.")
    max_tokens: int | None = Field(
        default=None, ge=1, description="Token budget of the lead agent in one run."
    )
    max_output_tokens: int | None = Field(default=None, ge=1, description="Output bound per call.")
    max_tool_rounds: int | None = Field(default=None, ge=1, le=1000)

    def set(self) -> dict[str, Any]:
        """The keys given, as plain data."""
        return self.model_dump(exclude_none=True)


def config_schema() -> dict[str, Any]:
    """The JSON schema of `AgentConfig`: the graph's `config_schema` and `context_schema`."""
    return AgentConfig.model_json_schema()


def parse_config(data: Mapping[str, Any] | None, where: str) -> AgentConfig:
    """`data` as an `AgentConfig`; a `UserError` naming `where` and the field when it is not."""
    if data is None:
        return AgentConfig()
    if not isinstance(data, Mapping):
        raise UserError(f"{where} must be an object, not {type(data).__name__}")
    try:
        return AgentConfig.model_validate(dict(data))
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(root)"
        known = ", ".join(AgentConfig.model_fields)
        raise UserError(f"{where}.{field}: {err['msg']} (known keys: {known})") from None


def merged(*layers: Mapping[str, Any] | None, where: str = "config") -> AgentConfig:
    """Later layers win key by key (assistant config, assistant context, run config, run
    context); each layer is checked on its own first."""
    out: dict[str, Any] = {}
    for layer in layers:
        out.update(parse_config(layer, where).set())
    return parse_config(out, where)


def run_services(services: Services, config: AgentConfig) -> Services:
    """The process's services with the lead agent configured by `config`; a `UserError` when
    it names a tool the lead does not have, a tool that does not exist or a memory profile
    that is not one. The model is resolved now, so a missing key fails before anything runs."""
    given = config.set()
    if not given:
        return services
    lead = services.lead
    update: dict[str, Any] = {}
    if config.model is not None:
        services.resolve(config.model)  # credentials: refused now, not mid-run
        update["model"] = config.model
    if config.system_prompt:
        update["prompt"] = f"{lead.prompt}\n\n{config.system_prompt}".strip()
    if config.tools is not None:
        unknown = [t for t in config.tools if t not in lead.tools]
        if unknown:
            raise UserError(
                f"config tools {unknown} are not tools of {lead.name}; "
                f"its tools: {', '.join(lead.tools) or '(none)'}"
            )
        update["tools"] = tuple(config.tools)
    if config.memory_profile is not None:
        profiles = services.settings.memory.profiles
        if config.memory_profile not in profiles:
            raise UserError(
                f"config memory_profile {config.memory_profile!r} is not a profile; "
                f"known: {', '.join(profiles)}"
            )
        update["memory_profile"] = config.memory_profile
    for key in ("recall", "max_tokens", "max_output_tokens", "max_tool_rounds"):
        if getattr(config, key) is not None:
            update[key] = getattr(config, key)
    tools = services.tools
    if config.permissions:
        unknown = [t for t in config.permissions if t not in tools]
        if unknown:
            raise UserError(
                f"config permissions name unknown tools {unknown}; known: {', '.join(tools.names())}"
            )
        tools = tools.with_permissions({k: v.lower() for k, v in config.permissions.items()})
    agents = {**services.agents, lead.name: lead.model_copy(update=update)}
    return dataclasses.replace(services, agents=agents, tools=tools)


class RunConfigs:
    """The engine's `ServicesProvider` for messages started with an agent configuration."""

    def __init__(self, store: AppStore) -> None:
        self.store = store

    async def save(self, message_id: str, config: AgentConfig) -> None:
        await self.store.insert_once(
            run_configs.insert().values(
                message_id=message_id, config=config.model_dump_json(), created_at=time.time()
            )
        )

    async def load(self, message_id: str) -> AgentConfig | None:
        rows = await self.store.fetch_rows(
            sa.select(run_configs.c.config).where(run_configs.c.message_id == message_id)
        )
        return AgentConfig.model_validate(json.loads(rows[0]["config"])) if rows else None

    async def services_for(self, rt: Runtime, message: MessageRow) -> Services | None:
        config = await self.load(message["id"])
        return None if config is None else run_services(rt.services, config)
