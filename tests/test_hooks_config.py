"""Hooks from config: `module:object` from the config folder or installed, by file path,
options, clear errors, and the runner's documented order."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from artifactflow import load_settings
from artifactflow.errors import ConfigError
from artifactflow.hooks import Hooks, RunInfo
from artifactflow.hooks.loader import build_runner

RUN = RunInfo("c1", "m1", "t1", "lead_agent", "hello")

HOOK_MODULE = """
from artifactflow.hooks import Hooks

class Suffix(Hooks):
    def __init__(self, text="!"):
        self.text = text

    async def before_run(self, run, content):
        return content + self.text

def make(text):
    return Suffix(text)
"""


def config(tmp_path: Path, yaml_text: str, files: dict[str, str] | None = None) -> Path:
    folder = tmp_path / "config"
    folder.mkdir(exist_ok=True)
    (folder / "artifactflow.yaml").write_text(textwrap.dedent(yaml_text), encoding="utf-8")
    for name, source in (files or {}).items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    return folder


def runner_for(tmp_path: Path, yaml_text: str, files: dict[str, str] | None = None, **kwargs):
    settings = load_settings(config(tmp_path, yaml_text, files), tmp_path / "data")
    return build_runner(settings, **kwargs)


async def test_hooks_load_from_the_config_folder_by_name_path_and_module(tmp_path):
    path_before = list(sys.path)
    runner = runner_for(
        tmp_path,
        """
        hooks:
          - my_hooks:Suffix
          - {use: "my_hooks:make", options: {text: "?"}}
          - {use: "checks/extra.py:Suffix", options: {text: "#"}}
          - plain_module
          - pkg.sub:HOOK
        """,
        {
            "my_hooks.py": HOOK_MODULE,
            "checks/extra.py": HOOK_MODULE,
            "plain_module.py": "async def before_run(run, content):\n    return content + '~'\n",
            "pkg/__init__.py": "",
            "pkg/helper.py": "MARK = '@'\n",
            "pkg/sub.py": "from .helper import MARK\nclass H:\n    def before_run(self, run, content):\n        return content + MARK\nHOOK = H()\n",
        },
    )
    assert sys.path == path_before  # nothing was added to the import path
    assert [name for name, _ in runner.hooks] == [
        "my_hooks:Suffix", "my_hooks:make", "checks/extra.py:Suffix", "plain_module", "pkg.sub:HOOK",
    ]
    assert await runner.before_run(RUN, "hi") == "hi!?#~@"
    assert runner.on_error_mode == "raise"


async def test_a_config_module_never_replaces_an_installed_one(tmp_path):
    import json

    runner = runner_for(tmp_path, "hooks: [json:Suffix]\n", {"json.py": HOOK_MODULE})
    assert sys.modules["json"] is json
    assert await runner.before_run(RUN, "a") == "a!"


async def test_installed_modules_load_and_python_hooks_come_after_config_hooks(tmp_path):
    order: list[str] = []

    class FromPython(Hooks):
        async def before_run(self, run, content):
            order.append("python")

    runner = runner_for(
        tmp_path,
        "hooks:\n  load: [my_hooks:Suffix]\n  on_error: log\n",
        {"my_hooks.py": HOOK_MODULE},
        extra=[FromPython()],
    )
    assert runner.on_error_mode == "log"
    assert [name for name, _ in runner.hooks] == ["my_hooks:Suffix", "FromPython"]
    assert await runner.before_run(RUN, "x") == "x!" and order == ["python"]


@pytest.mark.parametrize(
    ("yaml_text", "files", "message"),
    [
        ("hooks: [missing_mod:X]\n", {}, r"field 'hooks.load\[0\]': 'missing_mod:X' failed to import: No module named 'missing_mod'"),
        ("hooks: [my_hooks:Nope]\n", {"my_hooks.py": HOOK_MODULE}, r"has no attribute 'Nope' \(it has: Hooks, Suffix, make\)"),
        ("hooks: [gone.py:X]\n", {}, r"failed to import: no file .*gone.py"),
        ("hooks: [broken:X]\n", {"broken.py": "raise RuntimeError('bad module')\n"}, r"failed to import: bad module"),
        ("hooks: [{use: 'my_hooks:Suffix', options: {nope: 1}}]\n", {"my_hooks.py": HOOK_MODULE}, r"could not build 'my_hooks:Suffix' with options \{'nope': 1\}: TypeError"),
        ("hooks: [artifactflow.hooks.base:Hooks]\n", {}, r"field 'hooks.load\[0\]': hook 'artifactflow.hooks.base:Hooks' implements no hook point"),
        ("hooks: [typo:T]\n", {"typo.py": "class T:\n    def after_tool_cal(self, run, call, result):\n        pass\n"}, r"did you mean 'after_tool_call'"),
        ("hooks:\n  on_error: ignore\n", {}, r"field 'hooks.on_error'"),
        ("hooks:\n  redaction: {patterns: ['(unclosed']}\n", {}, r"field 'hooks.redaction.patterns': .*invalid regular expression '\(unclosed'"),
        ("hooks:\n  tool_policy: {rules: [{tool: web_fetch, argument: url, deny: ['[z-a]']}]}\n", {}, r"field 'hooks.tool_policy.rules.0.deny'"),
        ("telemetry:\n  exporter: jaeger\n", {}, r"field 'telemetry.exporter'"),
    ],
)
def test_config_errors_name_the_file_the_field_and_the_problem(tmp_path, yaml_text, files, message):
    with pytest.raises(ConfigError, match=message) as info:
        runner_for(tmp_path, yaml_text, files)
    assert "artifactflow.yaml" in str(info.value)


def test_environment_overrides_the_telemetry_section(tmp_path, monkeypatch):
    monkeypatch.setenv("ARTIFACTFLOW_TELEMETRY__CAPTURE_CONTENT", "true")
    settings = load_settings(config(tmp_path, "telemetry: {exporter: none}\n"), tmp_path / "data")
    assert settings.telemetry.capture_content is True
    assert settings.telemetry.exporter == "none"
    assert settings.hooks.load == [] and settings.hooks.on_error == "raise"


def _readme_block(language: str, first_line: str) -> str:
    readme = (Path(__file__).parent.parent / "docs" / "hooks.md").read_text(encoding="utf-8")
    for block in readme.split(f"```{language}\n")[1:]:
        body = block.split("```", 1)[0]
        if body.startswith(first_line):
            return body
    raise AssertionError(f"docs/hooks.md has no {language} block starting with {first_line!r}")


async def test_the_readme_hook_example_loads_from_config_and_acts(tmp_path, capsys):
    from hooks_sim import fetch_call, model_step, tool_round

    from artifactflow.hooks import AgentStep, Refuse, ToolCall
    from artifactflow.tools.base import ToolResult

    module = _readme_block("python", "# config/my_hooks.py")
    yaml_text = _readme_block("yaml", "hooks:\n  load: [my_hooks:Guard")
    policy = "class Policy:\n    def __init__(self, strict):\n        self.strict = strict\n    def on_run_start(self, run):\n        pass\n"
    runner = runner_for(tmp_path, yaml_text, {"my_hooks.py": module, "checks/policy.py": policy})
    assert [name for name, _ in runner.hooks] == [
        "my_hooks:Guard", "checks/policy.py:Policy", "tool_policy", "redaction",
    ]
    lead = AgentStep("lead_agent", "lead", 1)
    decided = await model_step(runner, RUN, lead, "", [
        fetch_call("c1", "https://docs.python.org/3/"),
        fetch_call("c2", "https://example.com/"),
        fetch_call("c3", "https://evil.example/"),
    ])
    assert isinstance(decided[0], ToolCall) and decided[0].arguments["max_content_length"] == 8000
    assert isinstance(decided[1], Refuse) and decided[1].hook == "my_hooks:Guard"
    assert isinstance(decided[2], Refuse) and decided[2].hook == "tool_policy"
    _, added = await tool_round(runner, RUN, "lead_agent", "lead", 1, decided[:1], {"c1": ToolResult.fail("HTTP 503")})
    assert added == [{"role": "user", "content": "Some tools failed: say so in your answer instead of guessing."}]
    assert "web_fetch ok=False 12 ms" in capsys.readouterr().out
