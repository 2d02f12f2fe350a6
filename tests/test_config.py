"""Settings, agent files, model profiles and tool definitions: good input works, bad input is
reported with where and what."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from conftest import make_config, write_agent
from langchain_core.tools import StructuredTool
from pydantic import BaseModel
from scripted_llm import Call, Text, ToolCalls

from artifactflow import (
    Client,
    ConfigError,
    MissingCredentialsError,
    Permission,
    load_settings,
    tool,
)
from artifactflow.agents.model import ModelRegistry
from artifactflow.agents.spec import load_agents, parse_agent_file
from artifactflow.settings import packaged_config_dir


def test_packaged_defaults_used_outside_a_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, user_data_home: Path
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ARTIFACTFLOW_CONFIG_DIR", raising=False)
    monkeypatch.delenv("ARTIFACTFLOW_DATA_DIR", raising=False)
    settings = load_settings()
    assert settings.config_dir == packaged_config_dir()
    agents = load_agents(settings.config_dir / "agents")
    assert {"lead_agent", "search_agent", "crawl_agent"} <= set(agents)
    assert agents["lead_agent"].role == "lead"
    assert settings.data_dir == (user_data_home / "artifactflow").resolve()  # not ./data


def test_a_configured_data_dir_wins_and_silences_the_old_folder_notice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ARTIFACTFLOW_DATA_DIR", raising=False)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "artifactflow.db").write_bytes(b"")
    config = tmp_path / "config"
    config.mkdir()
    (config / "artifactflow.yaml").write_text("data_dir: ./kept\n", encoding="utf-8")

    assert load_settings(config).data_dir == (tmp_path / "kept").resolve()
    monkeypatch.setenv("ARTIFACTFLOW_DATA_DIR", str(tmp_path / "from-env"))
    assert load_settings(config).data_dir == (tmp_path / "from-env").resolve()
    assert load_settings(config, tmp_path / "given").data_dir == (tmp_path / "given").resolve()
    assert caplog.records == []
    monkeypatch.delenv("ARTIFACTFLOW_DATA_DIR")
    (config / "artifactflow.yaml").write_text("", encoding="utf-8")

    with caplog.at_level("WARNING", logger="artifactflow.settings"):
        load_settings(config)
        load_settings(config)
    (record,) = caplog.records  # once per process
    assert str((tmp_path / "data").resolve()) in record.getMessage()


def test_explicit_missing_config_dir_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ARTIFACTFLOW_CONFIG_DIR", str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings()


def test_environment_overrides_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    config = make_config(tmp_path, yaml_text="web:\n  allow_private_networks: false\ntools:\n  timeout: 5\n")
    monkeypatch.setenv("ARTIFACTFLOW_WEB__ALLOW_PRIVATE_NETWORKS", "true")
    monkeypatch.setenv("ARTIFACTFLOW_MODEL", "my-model")
    settings = load_settings(config)
    assert settings.web.allow_private_networks is True
    assert settings.tools.timeout == 5
    assert settings.model == "my-model"


def test_bad_yaml_field_names_file_and_field(tmp_path: Path):
    config = make_config(tmp_path, yaml_text="tools:\n  timeout: -3\n")
    with pytest.raises(ConfigError, match=r"artifactflow.yaml: field 'tools.timeout'"):
        load_settings(config)


def test_unknown_permission_level_is_a_startup_error(tmp_path: Path):
    config = make_config(tmp_path, yaml_text="permissions:\n  create_artifact: sometimes\n")
    with pytest.raises(ConfigError, match="unknown permission level 'sometimes'"):
        load_settings(config)


async def test_permission_override_for_unknown_tool_is_an_error(tmp_path: Path, llm_env):
    config = make_config(tmp_path, yaml_text="permissions:\n  no_such_tool: confirm\n")
    with pytest.raises(ConfigError, match="unknown tool"):
        await Client.open(load_settings(config, tmp_path / "data"))


async def test_permission_override_applies(tmp_path: Path, make_client, llm):
    config = make_config(tmp_path, lead_tools=["list_artifacts"], yaml_text="permissions:\n  list_artifacts: confirm\n")
    client = await make_client(config_dir=config)
    assert client.admin.services.tools.permission("list_artifacts") is Permission.CONFIRM
    llm.script(ToolCalls([Call("list_artifacts", {})]))
    result = await client.run("list")
    assert result.status == "waiting" and result.pending_calls[0]["tool"] == "list_artifacts"


def test_malformed_agent_files_report_path_and_field(tmp_path: Path):
    folder = tmp_path / "agents"
    write_agent(folder, "bad", extra="max_tool_rounds_typo: 3\n")
    with pytest.raises(ConfigError, match=r"bad\.md: field 'max_tool_rounds_typo'"):
        parse_agent_file(folder / "bad.md")
    (folder / "worse.md").write_text("---\nname: worse\nrole: boss\n---\nhi\n")
    with pytest.raises(ConfigError, match=r"worse\.md: field 'role'"):
        parse_agent_file(folder / "worse.md")
    (folder / "nofront.md").write_text("just a prompt")
    with pytest.raises(ConfigError, match="missing YAML front matter"):
        parse_agent_file(folder / "nofront.md")
    (folder / "yaml.md").write_text("---\nname: [unclosed\n---\nhi\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        parse_agent_file(folder / "yaml.md")


def test_exactly_one_lead_required(tmp_path: Path):
    folder = tmp_path / "agents"
    write_agent(folder, "a")
    with pytest.raises(ConfigError, match="exactly one agent must have role 'lead'"):
        load_agents(folder)


async def test_agent_listing_unknown_tool_is_reported(tmp_path: Path, llm_env):
    config = make_config(tmp_path, lead_tools=["teleport"])
    with pytest.raises(ConfigError, match=r"lead_agent\.md: field 'tools': unknown tool\(s\) teleport"):
        await Client.open(load_settings(config, tmp_path / "data"))


def test_model_profiles_and_missing_credentials(tmp_path: Path):
    models = tmp_path / "models.yaml"
    models.write_text(
        "profiles:\n  local:\n    base_url: http://127.0.0.1:9/v1\n    api_key_env: LOCAL_KEY\n"
        "    model: tiny\n    params: {temperature: 0.1}\n"
    )
    registry = ModelRegistry.from_file(models, default_model="local", env={"LOCAL_KEY": "k"})
    resolved = registry.resolve(None)
    assert (resolved.model, resolved.base_url, resolved.api_key) == ("tiny", "http://127.0.0.1:9/v1", "k")
    assert resolved.params == {"temperature": 0.1}
    plain = ModelRegistry.from_file(models, env={"OPENAI_API_KEY": "x", "OPENAI_BASE_URL": "http://h/v1"})
    assert plain.resolve("gpt-x").model == "gpt-x" and plain.resolve("gpt-x").base_url == "http://h/v1"
    with pytest.raises(MissingCredentialsError, match="set LOCAL_KEY"):
        ModelRegistry.from_file(models, env={}).resolve("local")
    with pytest.raises(MissingCredentialsError, match="OPENAI_API_KEY"):
        ModelRegistry.from_file(models, env={}).resolve("gpt-x")
    models.write_text("profiles:\n  broken:\n    base_url: x\n")
    with pytest.raises(ConfigError, match="profile 'broken', field 'model'"):
        ModelRegistry.from_file(models)


async def test_missing_credentials_refused_before_anything_is_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = make_config(tmp_path)
    client = await Client.open(load_settings(config, tmp_path / "data"))
    try:
        with pytest.raises(MissingCredentialsError, match="OPENAI_API_KEY"):
            await client.run("hello")
        assert await client.admin.store.list_conversations() == []
    finally:
        await client.aclose()


def test_tool_schema_from_hints_and_docstring():
    @tool(permission="confirm", timeout=3)
    async def search(query: str, limit: int = 5, tags: list[str] | None = None) -> str:
        """Search the archive.

        Args:
            query: What to look for.
            limit: How many results.
            tags: Optional tags
                spanning two lines.
        """
        return query

    schema = search.json_schema()
    assert search.description == "Search the archive."
    assert schema["required"] == ["query"]
    assert schema["properties"]["query"]["description"] == "What to look for."
    assert schema["properties"]["limit"]["default"] == 5
    assert schema["properties"]["tags"]["description"] == "Optional tags spanning two lines."
    assert search.permission is Permission.CONFIRM and search.timeout == 3


async def test_tool_timeout_and_exception_become_tool_errors(make_client, llm):
    @tool(timeout=0.2)
    async def stuck() -> str:
        """Never returns in time."""
        await asyncio.sleep(5)
        return "late"

    @tool
    def broken() -> str:
        """Raises."""
        raise RuntimeError("disk on fire")

    client = await make_client(lead_tools=["stuck", "broken"], extra_tools=[stuck, broken])
    llm.script(ToolCalls([Call("stuck", {}), Call("broken", {})]), Text("handled"))
    result = await client.run("x")
    assert result.status == "completed"
    contents = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert "timed out after 0.2 s" in contents[0]
    assert "RuntimeError: disk on fire" in contents[1]


async def test_langchain_tool_is_accepted(make_client, llm):
    class Args(BaseModel):
        word: str

    lc_tool = StructuredTool.from_function(
        func=lambda word: word[::-1], name="reverse", description="Reverse a word", args_schema=Args
    )
    client = await make_client(lead_tools=["reverse"], extra_tools=[lc_tool])
    llm.script(ToolCalls([Call("reverse", {"word": "flow"})]), Text("ok"))
    await client.run("reverse")
    assert [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"] == ["wolf"]
