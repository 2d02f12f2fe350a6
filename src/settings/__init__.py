"""Settings: `config/artifactflow.yaml`, overridden by `ARTIFACTFLOW_*` environment variables.

The config folder is `ARTIFACTFLOW_CONFIG_DIR` (default `./config`); when that folder does not
exist the packaged defaults are used, so the CLI works outside a checkout. The data folder
defaults to the user's data folder (`data_dir.py`), the same from every directory. Environment beats
the YAML file (`ARTIFACTFLOW_WEB__ALLOW_PRIVATE_NETWORKS=true` sets `web.allow_private_networks`),
and explicit keyword overrides from Python beat both (validated the same way: a bad value is a
`ConfigError` naming the field).

The settings sit just above `errors` and import nothing else of the package: the config
models of other parts live beside this module (`hooks.py`: the `hooks:` and `telemetry:`
sections, `mcp.py`: `mcp_servers:`, `memory.py`: `memory:`, `permissions.py`: the tool permission levels), and the
hooks and tools packages import them from here.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from ..errors import ConfigError
from . import problems
from .data_dir import default_data_dir, notice_legacy_data_dir
from .hooks import HooksSettings, TelemetrySettings
from .knowledge import KnowledgeSettings
from .mcp import McpServerConfig
from .memory import MemorySettings
from .permissions import Permission, parse_permissions
from .platform import CronSettings, StoreTTLSettings, WebhookSettings
from .projects import project_name_problem

log = logging.getLogger("artifactflow.settings")

PACKAGED_CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"


def packaged_config_dir() -> Path:
    """Where the default config lives: the repo's `config/` or the installed copy."""
    # `artifactflow.default_config` is the installed mapping of config/ (data, not code: found
    # by name, never imported from the package root).
    root = __name__.rpartition(".")[0]  # artifactflow
    spec = importlib.util.find_spec(f"{root}.default_config")
    if spec is None or spec.origin is None:  # pragma: no cover - running from a bare source tree
        return PACKAGED_CONFIG_DIR
    return Path(spec.origin).resolve().parent


class LLMSettings(BaseModel):
    max_retries: int = Field(default=3, ge=0, le=10)
    # of those, retries after a timeout (a server silent for `timeout` seconds is slow, not flaky)
    timeout_retries: int = Field(default=1, ge=0, le=10)
    backoff_base: float = Field(default=0.5, ge=0)
    backoff_max: float = Field(default=8.0, ge=0)
    timeout: float = Field(default=120.0, gt=0)  # seconds per read (connect, each streamed chunk)
    temperature: float | None = None
    # Output bound of every model call unless the agent or its profile sets one; None: none.
    max_output_tokens: int | None = Field(default=4096, ge=1)
    # Seconds one model call may take in all (retries and streaming included); None: no limit.
    call_deadline: float | None = Field(default=600.0, gt=0)


class ToolSettings(BaseModel):
    timeout: float = Field(default=60.0, gt=0)
    max_result_chars: int = Field(default=20_000, gt=100)


class CheckpointSettings(BaseModel):
    keep_completed: bool = False
    retention_hours: float = Field(default=24.0, ge=0)


class SearchSettings(BaseModel):
    provider: str | None = None
    searxng_url: str | None = None
    brave_api_key_env: str = "BRAVE_API_KEY"
    tavily_api_key_env: str = "TAVILY_API_KEY"


class WebSettings(BaseModel):
    allow_private_networks: bool = False
    fetch_timeout: float = 20.0
    search: SearchSettings = SearchSettings()


class LoopGuardSettings(BaseModel):
    """The loop guard (core/loop_guard.py): the same failing tool call (or malformed call of
    the same kind) repeated in a row is
    told to change course at `warn_after`, and ends the run (`loop_detected`) at `stop_after`.
    0 or null turns either off."""

    warn_after: int | None = Field(default=3, ge=0)
    stop_after: int | None = Field(default=5, ge=0)
    # malformed calls of one family (any tool) are also counted within the last `window`
    # calls, whatever succeeded between them; 0 or null: only calls in a row count
    window: int | None = Field(default=12, ge=0)


class RunSettings(BaseModel):
    recursion_limit: int = Field(default=400, ge=10)
    max_concurrent_runs: int = Field(default=4, ge=1)
    lease_seconds: float = Field(default=30.0, gt=1)
    # Several workers: recover runs whose owner died (at start, then every half lease), and a
    # limit on runs in progress across all workers of one database (HTTP; None: no limit).
    recover_on_start: bool = False
    max_runs_per_database: int | None = Field(default=None, ge=1)
    record_requests: bool = True  # store each model request for `artifactflow export` / replay
    loop_guard: LoopGuardSettings = LoopGuardSettings()


class ContextSettings(BaseModel):
    """Keeping each model request inside the model's context window (see core/window)."""

    compaction: bool = True  # summarize old tool rounds before a request would overflow
    default_window: int = Field(default=32_768, ge=256)  # tokens, for models without `context_window`
    compact_at: float = Field(default=0.8, gt=0.1, lt=1.0)  # fraction of the window that triggers it
    keep_recent_rounds: int = Field(default=4, ge=1)  # newest tool rounds kept verbatim
    summary_model: str | None = None  # profile or model name; None: the agent's own model
    summary_max_tokens: int = Field(default=1024, ge=64)
    history_share: float = Field(default=0.5, gt=0.0, le=1.0)  # of the compaction threshold
    keep_recent_messages: int = Field(default=4, ge=0)  # conversation turns kept verbatim


class BudgetSettings(BaseModel):
    """Per-run limits; crossing one ends the run with outcome `budget_exceeded`."""

    max_tokens: int | None = Field(default=None, ge=1)  # prompt + completion, all agents
    max_cost_usd: float | None = Field(default=None, gt=0)  # from the model profiles' prices
    # Seconds one segment of a run may work (from its start or resume to its end or pause; the
    # time it waits for a person is not counted), a model call in progress included; None: none.
    max_seconds: float | None = Field(default=None, gt=0)


class AuthSettings(BaseModel):
    enabled: bool | None = None  # None: on unless the server binds to loopback


class ServerSettings(BaseModel):
    max_request_bytes: int = 1_000_000
    heartbeat_seconds: float = 15.0
    # A queued protocol run (`enqueue`, a cron tick) claimed by a worker that has not started
    # it after this many seconds is queued again, and the next reader starts it: its claimer
    # died between the claim and the start. Starting takes well under a second; the engine
    # refuses a second start of the same run, so a live but slow claimer is never doubled.
    queued_start_seconds: float = Field(default=30.0, gt=0)
    # Browser origins allowed to call the server from another page (CORS), e.g.
    # ["http://localhost:3000"]; "*" allows any. Empty (default): no CORS headers.
    cors_origins: list[str] = []

    @field_validator("cors_origins")
    @classmethod
    def _check_cors_origins(cls, value: list[str]) -> list[str]:
        return [cors_origin(v) for v in value]


def cors_origin(value: str) -> str:
    """`value` as a CORS origin (`scheme://host[:port]`, no path, or `*`); ValueError if not."""
    origin = value.strip().rstrip("/")
    if origin == "*":
        return origin
    scheme, sep, rest = origin.partition("://")
    if (
        not sep
        or scheme.lower() not in ("http", "https")
        or not rest
        or any(c in rest for c in "/?#@ ")
    ):
        raise ValueError(
            f"CORS origin {value!r} is not an origin: write scheme://host[:port] "
            "(e.g. http://localhost:3000, no path) or * for any"
        )
    return f"{scheme.lower()}://{rest.lower()}"


class Settings(BaseSettings):
    """Everything configurable. Nested sections mirror the YAML file."""

    model_config = SettingsConfigDict(
        env_prefix="ARTIFACTFLOW_", env_nested_delimiter="__", extra="ignore"
    )

    config_dir: Path = Path("config")
    # Unknown keys in artifactflow.yaml are an error naming the nearest valid key; `strict:
    # false` makes them warnings (a file shared with a newer or older version).
    strict: bool = True
    data_dir: Path = Field(default_factory=default_data_dir)  # the user's data folder (data_dir.py)
    model: str | None = None
    # The project new conversations belong to unless the caller names one (settings/projects.py).
    project: str | None = None
    database_url: str | None = None
    database_pool_size: int = Field(default=10, ge=1)  # PostgreSQL connections per pool (app store, checkpoints)
    # PostgreSQL `synchronous_commit` for our sessions. "off" (like SQLite's synchronous=NORMAL
    # here): a crash of the database server may lose the last fraction of a second of commits;
    # a commit no longer waits for a disk flush (measured here: 3.8 ms → 0.07 ms). "on": full.
    database_synchronous_commit: Literal["on", "off", "local", "remote_write", "remote_apply"] = "off"
    plugins: list[str] = []
    permissions: dict[str, Permission] = {}
    llm: LLMSettings = LLMSettings()
    tools: ToolSettings = ToolSettings()
    checkpoints: CheckpointSettings = CheckpointSettings()
    web: WebSettings = WebSettings()
    run: RunSettings = RunSettings()
    context: ContextSettings = ContextSettings()
    budget: BudgetSettings = BudgetSettings()
    auth: AuthSettings = AuthSettings()
    server: ServerSettings = ServerSettings()
    hooks: HooksSettings = HooksSettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    mcp_servers: dict[str, McpServerConfig] = {}
    memory: MemorySettings = MemorySettings()
    knowledge: KnowledgeSettings = KnowledgeSettings()
    webhooks: WebhookSettings = WebhookSettings()  # settings/platform.py
    crons: CronSettings = CronSettings()
    store_ttl: StoreTTLSettings = StoreTTLSettings()

    @field_validator("project")
    @classmethod
    def _check_project(cls, value: str | None) -> str | None:
        if not value:  # ARTIFACTFLOW_PROJECT= (empty): no project
            return None
        problem = project_name_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: str | None) -> str | None:
        if value and value.startswith("postgres"):
            missing = [m for m in ("psycopg", "asyncpg") if importlib.util.find_spec(m) is None]
            if missing:
                raise ValueError(
                    f"names PostgreSQL, but its drivers ({', '.join(missing)}) are not "
                    "installed: pip install 'artifactflow[postgres]'"
                )
        return value

    @field_validator("mcp_servers")
    @classmethod
    def _check_mcp_installed(cls, value: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        if value and importlib.util.find_spec("mcp") is None:
            raise ValueError(
                "names MCP servers, but the MCP client (the `mcp` package) is not installed: "
                "pip install 'artifactflow[mcp]'"
            )
        return value

    @field_validator("permissions", mode="before")
    @classmethod
    def _parse_permissions(cls, value: Any) -> Any:
        return parse_permissions(value, "tool names")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The YAML file arrives as init kwargs; the environment must win over it.
        return (env_settings, init_settings)

    @property
    def app_db_path(self) -> Path:
        return self.data_dir / "artifactflow.db"

    @property
    def checkpoint_db_path(self) -> Path:
        return self.data_dir / "checkpoints.db"


def resolve_config_dir(explicit: str | Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    raw = explicit or env.get("ARTIFACTFLOW_CONFIG_DIR") or "config"
    path = Path(raw).expanduser()
    if path.is_dir():
        return path.resolve()
    if explicit:
        raise ConfigError(f"config folder {path} does not exist")
    if env.get("ARTIFACTFLOW_CONFIG_DIR"):
        raise ConfigError(f"config folder {path} does not exist (ARTIFACTFLOW_CONFIG_DIR)")
    return packaged_config_dir()


def read_config_text(path: Path) -> str:
    """A config file's text; a file that is not UTF-8 is a `ConfigError` naming it."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset "
            f"{exc.start}); save the file as UTF-8"
        ) from None


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(read_config_text(path)) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def load_settings(
    config_dir: str | Path | None = None,
    data_dir: str | Path | None = None,
    **overrides: Any,
) -> Settings:
    """Build settings from the config folder, the environment and explicit overrides."""
    folder = resolve_config_dir(config_dir)
    yaml_path = folder / "artifactflow.yaml"
    data = _read_yaml(yaml_path)
    data.pop("config_dir", None)
    unknown = problems.unknown_keys(Settings, data)
    if unknown and data.get("strict") is False:  # `strict: false`: warned, then left out
        for path, line in unknown:
            log.warning("%s: %s (ignored: strict is false)", yaml_path, line)
            problems.drop(data, path)
        unknown = []
    lines = [line for _, line in unknown]
    settings: Settings | None = None
    try:
        settings = Settings(**data)
    except ValidationError as exc:
        lines += problems.validation_lines(exc, [path for path, _ in unknown])
    if lines or settings is None:
        raise ConfigError(_listed(yaml_path, lines))
    updates: dict[str, Any] = {"config_dir": folder}
    if data_dir is not None:
        updates["data_dir"] = Path(data_dir)
    elif "data_dir" not in settings.model_fields_set:  # neither the file nor the environment
        notice_legacy_data_dir(settings.data_dir)
    updates.update({k: v for k, v in overrides.items() if v is not None})
    settings = _override(settings, updates)
    settings.data_dir = Path(settings.data_dir).expanduser().resolve()
    return settings


def _listed(path: Path, lines: list[str]) -> str:
    """One problem: `path: problem`; several: a count, then one per line."""
    if len(lines) == 1:
        return f"{path}: {lines[0]}"
    return f"{path}: {len(lines)} problems:\n" + "\n".join(f"  - {line}" for line in lines)


def _override(settings: Settings, updates: Mapping[str, Any]) -> Settings:
    """A copy of `settings` with `updates` validated like any other source (a bad value is a
    `ConfigError` naming the field). A mapping for a section merges into it:
    `run={"lease_seconds": 10}` keeps the section's other values."""
    result = settings.model_copy(deep=True)
    for key, value in updates.items():
        if key not in Settings.model_fields:
            known = ", ".join(sorted(Settings.model_fields))
            raise ConfigError(f"unknown setting '{key}' (known settings: {known})")
        current = getattr(result, key)
        if isinstance(value, Mapping) and isinstance(current, BaseModel):
            value = _merged(current.model_dump(), value)
        try:
            Settings.__pydantic_validator__.validate_assignment(result, key, value)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or key
            raise ConfigError(f"setting '{where}' (passed to load_settings): {err['msg']}") from None
    return result


def _merged(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out
