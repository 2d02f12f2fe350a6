"""Configuration for long runs: model windows and prices, `context:` / `budget:` settings and
the per-agent `max_tokens` budget, read from real files as a user writes them."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write_agent

from artifactflow import ConfigError, load_settings
from artifactflow.agents.model import ModelRegistry
from artifactflow.agents.spec import load_agents
from artifactflow.core.window.limits import context_window


def test_profiles_carry_window_and_prices_and_default_window_applies(tmp_path: Path):
    models = tmp_path / "models.yaml"
    models.write_text(
        "profiles:\n"
        "  small:\n    model: tiny\n    context_window: 8192\n"
        "    input_per_mtok: 0.15\n    output_per_mtok: 0.6\n"
        "  plain:\n    model: other\n"
    )
    registry = ModelRegistry.from_file(models, env={"OPENAI_API_KEY": "k"})
    small, plain, bare = registry.resolve("small"), registry.resolve("plain"), registry.resolve("gpt-x")
    assert (small.context_window, small.input_per_mtok, small.output_per_mtok) == (8192, 0.15, 0.6)
    assert (plain.context_window, plain.input_per_mtok, plain.output_per_mtok) == (None, None, None)
    assert small.params == {}  # window and prices are never sent to the provider as parameters
    (tmp_path / "config").mkdir()
    settings = load_settings(tmp_path / "config", tmp_path / "data")
    assert context_window(small, settings.context) == 8192
    assert context_window(plain, settings.context) == 32_768
    assert context_window(bare, settings.context) == 32_768


def test_bad_window_or_price_names_profile_and_field(tmp_path: Path):
    models = tmp_path / "models.yaml"
    models.write_text("profiles:\n  small:\n    model: tiny\n    context_window: 100\n")
    with pytest.raises(ConfigError, match="profile 'small', field 'context_window'"):
        ModelRegistry.from_file(models)
    models.write_text("profiles:\n  small:\n    model: tiny\n    input_per_mtok: -1\n")
    with pytest.raises(ConfigError, match="profile 'small', field 'input_per_mtok'"):
        ModelRegistry.from_file(models)


def test_context_and_budget_settings_from_yaml_and_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    config = tmp_path / "config"
    config.mkdir()
    (config / "artifactflow.yaml").write_text(
        "context:\n  compact_at: 0.7\n  keep_recent_rounds: 2\n  summary_model: cheap\n"
        "budget:\n  max_tokens: 50000\n"
    )
    monkeypatch.setenv("ARTIFACTFLOW_CONTEXT__DEFAULT_WINDOW", "8192")
    monkeypatch.setenv("ARTIFACTFLOW_BUDGET__MAX_COST_USD", "0.25")
    settings = load_settings(config, tmp_path / "data")
    assert settings.context.compact_at == 0.7 and settings.context.keep_recent_rounds == 2
    assert settings.context.summary_model == "cheap" and settings.context.compaction is True
    assert settings.context.default_window == 8192
    assert settings.budget.max_tokens == 50_000 and settings.budget.max_cost_usd == 0.25
    (config / "artifactflow.yaml").write_text("context:\n  compact_at: 1.5\n")
    with pytest.raises(ConfigError, match="field 'context.compact_at'"):
        load_settings(config, tmp_path / "data")
    (config / "artifactflow.yaml").write_text("budget:\n  max_tokens: 0\n")
    with pytest.raises(ConfigError, match="field 'budget.max_tokens'"):
        load_settings(config, tmp_path / "data")


def test_packaged_defaults_document_every_context_and_budget_key(tmp_path: Path):
    settings = load_settings(Path(__file__).parent.parent / "config", tmp_path / "data")
    assert settings.context.model_dump() == type(settings.context)().model_dump()
    assert settings.budget.model_dump() == {"max_tokens": None, "max_cost_usd": None, "max_seconds": None}
    text = (Path(__file__).parent.parent / "config" / "artifactflow.yaml").read_text()
    for key in [*settings.context.model_dump(), *settings.budget.model_dump()]:
        assert f"  {key}:" in text, key


def test_agent_max_tokens_budget_in_front_matter(tmp_path: Path):
    folder = tmp_path / "agents"
    write_agent(folder, "lead_agent", role="lead", extra="max_tokens: 40000\n")
    write_agent(folder, "helper")
    agents = load_agents(folder)
    assert agents["lead_agent"].max_tokens == 40_000 and agents["helper"].max_tokens is None
    write_agent(folder, "helper", extra="max_tokens: -5\n")
    with pytest.raises(ConfigError, match=r"helper\.md: field 'max_tokens'"):
        load_agents(folder)
