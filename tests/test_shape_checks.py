"""The shape check (`scripts/check_shape.py`, run by `make check`) finds each kind of problem
it is there for, and nothing in a tree that keeps the rules."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import ceiling

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "check_shape.py"
spec = importlib.util.spec_from_file_location("check_shape", SCRIPT)
assert spec and spec.loader
check_shape = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_shape)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "src"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


CLEAN = {
    "core/store/schema.py": "import sqlalchemy as sa\nm = sa.MetaData()\nt = sa.Table('t', m)\n",
    "core/store/migrate.py": "def up(conn, m):\n    m.create_all(conn)\n    conn.exec_driver_sql('CREATE TABLE x (a int)')\n",
    "core/graph.py": "from langchain_core.runnables import Runnable\nfrom artifactflow.core._x import y\n",
    "api/app.py": "x = 1\n" * check_shape.MAX_LINES,
    "cli/view.py": "from rich.table import Table\nt = Table('a', 'b')\n",  # not a database table
}


def test_a_tree_that_keeps_the_rules_passes(tmp_path: Path) -> None:
    assert check_shape.problems(_tree(tmp_path, CLEAN)) == []


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"core/big.py": "x = 1\n" * (check_shape.MAX_LINES + 1)}, "core/big.py: 451 lines"),
        ({"core/graph.py": "from langgraph._internal._runnable import RunnableCallable\n"},
         "imports the private module langgraph._internal._runnable"),
        ({"tools/c.py": "import mcp.shared._httpx_utils\n"}, "private module mcp.shared._httpx_utils"),
        ({"tools/d.py": "from mcp.shared import _httpx_utils\n"}, "private module mcp.shared._httpx_utils"),
        ({"protocol/records.py": "import sqlalchemy as sa\nt = sa.Table('ap', sa.MetaData())\n"},
         "protocol/records.py:2: declares a table outside the schema modules"),
        ({"protocol/records.py": "async def f(conn, m):\n    await conn.run_sync(m.create_all)\n"},
         "protocol/records.py:2: creates tables outside the numbered schema steps"),
        ({"memory/y.py": "from sqlalchemy import Column, Table\nt = Table('m', None)\n"},
         "memory/y.py:2: declares a table outside the schema modules"),
        ({"memory/x.py": "SQL = '''create table if not exists mem (a int)'''\n"},
         "memory/x.py:1: CREATE TABLE outside the numbered schema steps"),
    ],
)
def test_each_kind_of_problem_is_found(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    found = check_shape.problems(_tree(tmp_path, {**CLEAN, **files}))
    assert any(expected in line for line in found), found


def test_the_command_exits_1_and_names_the_problem(tmp_path: Path) -> None:
    root = _tree(tmp_path, {**CLEAN, "core/big.py": "x = 1\n" * 500})
    proc = subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True,
                          text=True, timeout=ceiling(120))
    assert proc.returncode == 1
    assert "core/big.py: 500 lines (at most 450)" in proc.stdout
    clean = subprocess.run([sys.executable, str(SCRIPT), str(_tree(tmp_path / "ok", CLEAN))],
                           capture_output=True, text=True, timeout=ceiling(120))
    assert clean.returncode == 0, clean.stdout
