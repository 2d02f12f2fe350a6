"""Plugins without import-time side effects: config-folder files loaded by path (no
`sys.path` edits), tools from installed packages through the `artifactflow.tools` entry-point
group, no environment variables set on import, and strict checkpoint deserialization."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import make_config
from scripted_llm import Call, Text, ToolCalls

from artifactflow import ConfigError, load_settings
from artifactflow.core.checkpoints import CompressingSerializer
from artifactflow.core.engine import build_registry

TOOL_FILE = '''
from artifactflow import tool

@tool
def {name}(text: str) -> str:
    """{doc}"""
    return text.{method}()
'''


def plugin(name: str, doc: str = "Change the text.", method: str = "upper") -> str:
    return TOOL_FILE.format(name=name, doc=doc, method=method)


def test_config_plugins_load_by_path_without_touching_sys_path(tmp_path: Path):
    # Two config folders with a plugin file of the same name: each gets its own module.
    first = make_config(tmp_path / "a", yaml_text="plugins: [tools]\n",
                        plugin_files={"tools.py": plugin("shout")})
    second = make_config(tmp_path / "b", yaml_text="plugins: [tools]\n",
                         plugin_files={"tools.py": plugin("whisper", method="lower")})
    path_before = list(sys.path)
    one = build_registry(load_settings(first, tmp_path / "data"))
    two = build_registry(load_settings(second, tmp_path / "data"))
    assert sys.path == path_before
    assert "shout" in one and "whisper" not in one
    assert "whisper" in two and "shout" not in two
    modules = {one.get("shout").func.__module__, two.get("whisper").func.__module__}
    assert len(modules) == 2 and "tools" not in modules
    assert "tools" not in sys.modules


def test_config_plugin_package_with_relative_import(tmp_path: Path):
    config = make_config(tmp_path, yaml_text="plugins: [kit]\n")
    (config / "kit").mkdir()
    (config / "kit" / "helpers.py").write_text("SUFFIX = '!'\n", encoding="utf-8")
    (config / "kit" / "__init__.py").write_text(textwrap.dedent('''
        from artifactflow import tool
        from .helpers import SUFFIX

        @tool
        def exclaim(text: str) -> str:
            """Add emphasis."""
            return text + SUFFIX
    '''), encoding="utf-8")
    registry = build_registry(load_settings(config, tmp_path / "data"))
    assert registry.get("exclaim").func("hi") == "hi!"


def test_missing_and_broken_config_plugins_are_config_errors(tmp_path: Path):
    config = make_config(tmp_path / "missing", yaml_text="plugins: [nowhere]\n")
    with pytest.raises(ConfigError, match=r"no file .*nowhere\.py and no installed module 'nowhere'"):
        build_registry(load_settings(config, tmp_path / "data"))
    config = make_config(tmp_path / "broken", yaml_text="plugins: [broken]\n",
                         plugin_files={"broken.py": "import not_a_real_module_xyz\n"})
    with pytest.raises(ConfigError, match="plugin 'broken' .* failed to import: No module named"):
        build_registry(load_settings(config, tmp_path / "data"))


def test_installed_module_still_works_as_a_plugin_name(tmp_path: Path):
    # Not a file in the config folder: imported by name (here a module of this package).
    config = make_config(tmp_path, yaml_text="plugins: [artifactflow.tools.builtin.subagent]\n")
    registry = build_registry(load_settings(config, tmp_path / "data"))
    assert "call_subagent" in registry


def install_package(root: Path, dist: str, module: str, source: str, entry_points: str) -> Path:
    """A package as `pip install` leaves it: the module plus a `*.dist-info` folder."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = root / f"{dist}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points), encoding="utf-8")
    return root


async def test_entry_point_plugins_from_an_installed_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_client, llm
):
    site = install_package(
        tmp_path / "site",
        "af-extra-tools",
        "af_extra_tools",
        plugin("reverse_words", doc="Reverse the word order.", method="title") + textwrap.dedent('''
            @tool
            def count_chars(text: str) -> int:
                """Count characters."""
                return len(text)

            HELPERS = [count_chars]
        '''),
        """
        [artifactflow.tools]
        whole_module = af_extra_tools
        one_list = af_extra_tools:HELPERS
        """,
    )
    monkeypatch.syspath_prepend(str(site))
    client = await make_client(lead_tools=["reverse_words", "count_chars"])
    assert {"reverse_words", "count_chars"} <= set(client.admin.services.tools.names())
    llm.script(ToolCalls([Call("count_chars", {"text": "four"})]), Text("it has 4"))
    result = await client.run("count")
    assert result.status == "completed"
    tool_message = next(m for m in llm.requests[1]["messages"] if m["role"] == "tool")
    assert tool_message["content"] == "4"


def test_broken_entry_point_is_a_config_error_naming_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    site = install_package(
        tmp_path / "site", "af-broken-tools", "af_broken_tools", "X = 1\n",
        "[artifactflow.tools]\nbad = af_broken_tools:missing\n",
    )
    monkeypatch.syspath_prepend(str(site))
    config = make_config(tmp_path)
    with pytest.raises(ConfigError, match=r"'bad = af_broken_tools:missing' .*af-broken-tools"):
        build_registry(load_settings(config, tmp_path / "data"))


def test_importing_the_package_sets_no_environment_variable(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k != "LANGGRAPH_STRICT_MSGPACK"}
    code = "import os, sys, artifactflow; print(os.environ.get('LANGGRAPH_STRICT_MSGPACK')); print(len(sys.path))"
    baseline = "import sys; print(None); print(len(sys.path))"
    out = [
        subprocess.run([sys.executable, "-c", c], env=env, cwd=tmp_path, capture_output=True,
                       text=True, check=True).stdout
        for c in (code, baseline)
    ]
    assert out[0] == out[1]
    assert out[0].splitlines()[0] == "None"


@dataclass
class Unlisted:
    value: int


def test_checkpoint_serializer_is_strict_without_the_environment_variable():
    assert "LANGGRAPH_STRICT_MSGPACK" not in os.environ
    strict = CompressingSerializer()
    back = strict.loads_typed(strict.dumps_typed({"x": Unlisted(3), "plain": [1, "a"]}))
    assert back == {"x": {"value": 3}, "plain": [1, "a"]}  # raw data, never constructed
    allowing = CompressingSerializer([Unlisted])
    back = allowing.loads_typed(allowing.dumps_typed({"x": Unlisted(3)}))
    assert back == {"x": Unlisted(3)}
    big = {"text": "y" * 5000}
    type_, data = strict.dumps_typed(big)
    assert type_.startswith(CompressingSerializer.PREFIX) and len(data) < 500
    assert strict.loads_typed((type_, data)) == big
