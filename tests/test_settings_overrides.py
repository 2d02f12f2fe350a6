"""Explicit keyword overrides to `load_settings` are validated like the YAML file and the
environment: a bad value is a `ConfigError` naming the field, never a silently wrong setting."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_config

from artifactflow import ConfigError, Permission, load_settings


def test_overrides_are_validated_and_name_the_field(tmp_path: Path):
    config = make_config(tmp_path)
    cases = {
        "run.lease_seconds": {"run": {"lease_seconds": 0}},
        "llm.max_retries": {"llm": {"max_retries": "many"}},
        "checkpoints.retention_hours": {"checkpoints": {"retention_hours": -1}},
        "permissions": {"permissions": {"echo": "sometimes"}},
        "plugins": {"plugins": "not-a-list"},
    }
    for field, override in cases.items():
        with pytest.raises(ConfigError, match=rf"setting '{field}'"):
            load_settings(config, tmp_path / "data", **override)
    with pytest.raises(ConfigError, match=r"unknown setting 'lease_seconds' \(known settings: .*run"):
        load_settings(config, tmp_path / "data", lease_seconds=5)


def test_valid_overrides_are_coerced_and_merge_into_sections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    config = make_config(tmp_path, yaml_text="run:\n  max_concurrent_runs: 2\n")
    monkeypatch.setenv("ARTIFACTFLOW_MODEL", "from-env")
    settings = load_settings(
        config,
        tmp_path / "data",
        model="explicit",
        run={"lease_seconds": "12"},
        permissions={"echo": "confirm"},
    )
    assert settings.model == "explicit"  # explicit beats the environment
    assert settings.run.lease_seconds == 12.0  # coerced by validation
    assert settings.run.max_concurrent_runs == 2  # the YAML's other values stay
    assert settings.permissions == {"echo": Permission.CONFIRM}
    assert settings.data_dir == (tmp_path / "data").resolve()
    assert load_settings(config, tmp_path / "data", model=None).model == "from-env"
