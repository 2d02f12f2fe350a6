"""Every subpackage of `src/` ships in the distribution: `pyproject.toml` lists packages by
hand (the `src/` → `artifactflow` mapping), and a package left out is missing from a
non-editable install (`pip install artifactflow`) while an editable checkout still works.
The run-time install leaves out what a first run does not use (the extras), and each extra is
named by the feature that needs it when it is missing."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from artifactflow.api.mcp_optional import McpMissing, mcp_endpoint
from artifactflow.cli.main import main
from artifactflow.errors import ConfigError
from artifactflow.settings import load_settings

ROOT = Path(__file__).resolve().parent.parent


def test_every_subpackage_of_src_is_listed() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    src = ROOT / "src"
    on_disk = {
        ".".join(("artifactflow", *init.parent.relative_to(src).parts))
        for init in src.rglob("__init__.py")
    }
    assert sorted(on_disk - listed) == []


# --- the run-time install: what a first run needs; the rest are extras named when used ----------

HEAVY_OPTIONAL = {"mcp", "jsonschema-rs", "psycopg", "asyncpg", "wordllama", "pyright", "playwright"}


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower()


def test_the_runtime_install_leaves_the_extras_out_and_test_installs_them_all() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = {_name(r) for r in project["dependencies"]}
    extras = project["optional-dependencies"]
    assert sorted(runtime & HEAVY_OPTIONAL) == []
    assert extras["mcp"] == ["mcp>=2.3,<3"]
    bundled = next(r for r in extras["test"] if r.startswith("artifactflow["))
    assert set(bundled[len("artifactflow[") : -1].split(",")) >= {"postgres", "memory", "mcp"}


@pytest.fixture
def without_mcp(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if the `mcp` extra were not installed: `find_spec` and `import` both say so."""
    for name in [m for m in sys.modules if m == "mcp" or m.startswith("mcp.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)


def test_mcp_servers_without_the_extra_name_it(tmp_path: Path, without_mcp: None) -> None:
    (tmp_path / "artifactflow.yaml").write_text("mcp_servers:\n  files:\n    command: npx\n")
    with pytest.raises(ConfigError, match=r"pip install 'artifactflow\[mcp\]'"):
        load_settings(config_dir=tmp_path)


def test_settings_without_mcp_servers_load_without_the_extra(tmp_path: Path, without_mcp: None) -> None:
    (tmp_path / "artifactflow.yaml").write_text("model: gpt-4o\n")
    assert load_settings(config_dir=tmp_path).mcp_servers == {}


async def test_the_mcp_endpoint_without_the_extra_answers_501_naming_it(without_mcp: None) -> None:
    endpoint = mcp_endpoint(state=None)
    assert isinstance(endpoint, McpMissing)
    app = Starlette(routes=[Route("/mcp", endpoint, methods=["POST"])])
    async with endpoint.running(), httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as http:
        answer = await http.post("/mcp", json={})
    assert answer.status_code == 501
    assert "pip install 'artifactflow[mcp]'" in answer.json()["detail"]


def test_the_mcp_command_without_the_extra_exits_2_naming_it(
    without_mcp: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mcp"]) == 2
    assert "pip install 'artifactflow[mcp]'" in capsys.readouterr().err
