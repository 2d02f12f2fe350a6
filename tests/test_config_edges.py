"""Config files that cannot be read, and plugins that exit, are config errors (D9).

The README promises: a settings problem prints one line naming the file and exits 2. A file
that is not UTF-8 and a plugin calling `sys.exit()` at import used to escape that promise (a
bare `UnicodeDecodeError` with exit 1; the plugin's own exit code, silently).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_config

from artifactflow import load_settings
from artifactflow.agents.model import ModelRegistry
from artifactflow.agents.spec import parse_agent_file
from artifactflow.cli.main import main
from artifactflow.errors import ConfigError

LATIN1 = "name: caf\xe9\n".encode("latin-1")  # 0xE9 alone is not UTF-8


def run_cli(config: Path, data: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--config-dir", str(config), "--data-dir", str(data), "pending"])
    return code, capsys.readouterr().err


def test_settings_file_not_utf8(tmp_path: Path, llm_env, capsys: pytest.CaptureFixture[str]):
    config = make_config(tmp_path)
    path = config / "artifactflow.yaml"
    path.write_bytes(b"model: gpt\n# " + LATIN1)
    with pytest.raises(ConfigError, match="not valid UTF-8") as caught:
        load_settings(config, tmp_path / "data")
    assert str(path) in str(caught.value)
    code, err = run_cli(config, tmp_path / "data", capsys)
    assert code == 2
    assert "artifactflow.yaml" in err and "UTF-8" in err and "Traceback" not in err


def test_agent_file_not_utf8(tmp_path: Path, llm_env, capsys: pytest.CaptureFixture[str]):
    config = make_config(tmp_path)
    path = config / "agents" / "lead_agent.md"
    path.write_bytes(path.read_bytes().replace(b"You are the lead agent.", b"Caf\xe9 agent."))
    with pytest.raises(ConfigError, match="not valid UTF-8") as caught:
        parse_agent_file(path)
    assert str(path) in str(caught.value)
    code, err = run_cli(config, tmp_path / "data", capsys)
    assert code == 2 and "lead_agent.md" in err


def test_models_file_not_utf8(tmp_path: Path):
    path = tmp_path / "models.yaml"
    path.write_bytes(b"profiles:\n  fast: {model: x}\n# " + LATIN1)
    with pytest.raises(ConfigError, match="not valid UTF-8") as caught:
        ModelRegistry.from_file(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("exit_code", [7, 0, None, "bye"])
def test_plugin_exiting_at_import_is_a_config_error(
    tmp_path: Path, llm_env, capsys: pytest.CaptureFixture[str], exit_code: object
):
    module = f"exits_{abs(hash(str(exit_code)))}"
    config = make_config(
        tmp_path,
        yaml_text=f"plugins: [{module}]\n",
        plugin_files={f"{module}.py": f"import sys\nsys.exit({exit_code!r})\n"},
    )
    code, err = run_cli(config, tmp_path / "data", capsys)
    assert code == 2
    assert f"plugin '{module}'" in err and "sys.exit" in err
