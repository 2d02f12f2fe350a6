"""Shape rules that erode without a check (`make check` and `make test` run this).

- No module in the package is longer than `MAX_LINES` lines: split it by job first.
- No import of a dependency's private module (a dotted path with a `_`-prefixed part, such as
  `langgraph._internal._runnable`): it can change in any release without notice.
- Every table is created by a numbered schema step: tables are declared in the schema
  modules and made by the migration runner, never by `create_all` or `CREATE TABLE` elsewhere
  (a table made on first use has no upgrade path and races between processes).

Usage: `python scripts/check_shape.py [ROOT]` (ROOT defaults to the checkout's `src`); prints
one line per problem and exits 1 if there is any.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path

MAX_LINES = 450
OWN_PACKAGE = "artifactflow"
# where tables may be declared (SQLAlchemy `Table(...)`) and made (`create_all`, DDL text)
SCHEMA_MODULES = frozenset({"core/store/schema.py", "core/store/schema_tables.py"})
MIGRATION_MODULES = frozenset({"core/store/migrate.py"})
CREATE_TABLE = re.compile(r"\bCREATE\s+(?:TEMP\w*\s+|UNLOGGED\s+)?TABLE\b", re.IGNORECASE)


def _modules(root: Path) -> Iterator[tuple[str, Path]]:
    for path in sorted(root.rglob("*.py")):
        yield path.relative_to(root).as_posix(), path


def long_modules(root: Path) -> Iterator[str]:
    for name, path in _modules(root):
        lines = path.read_text(encoding="utf-8").count("\n")
        if lines > MAX_LINES:
            yield f"{name}: {lines} lines (at most {MAX_LINES}): split it by job"


def _imported(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
            for alias in node.names:  # `from pkg import _private_module` (a module, not a name)
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    if _is_module(f"{node.module}.{alias.name}"):
                        yield node.lineno, f"{node.module}.{alias.name}"


def _is_module(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except (ImportError, ValueError):
        return False


def private_imports(root: Path) -> Iterator[str]:
    for name, path in _modules(root):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for lineno, module in _imported(tree):
            top = module.split(".")[0]
            if top in (OWN_PACKAGE, "__future__"):
                continue
            parts = module.split(".")
            if any(p.startswith("_") and not p.startswith("__") for p in parts):
                yield f"{name}:{lineno}: imports the private module {module} of a dependency"


def stray_tables(root: Path) -> Iterator[str]:
    for name, path in _modules(root):
        if name in SCHEMA_MODULES or name in MIGRATION_MODULES:
            continue
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(path))
        bare_table = any(  # `from sqlalchemy import Table` (rich has a `Table` too)
            isinstance(n, ast.ImportFrom) and (n.module or "").startswith("sqlalchemy")
            and any(a.name == "Table" for a in n.names)
            for n in ast.walk(tree)
        )
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                if _sqlalchemy_table(node.func, bare_table):
                    yield f"{name}:{node.lineno}: declares a table outside the schema modules"
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if CREATE_TABLE.search(node.value):
                    yield f"{name}:{node.lineno}: CREATE TABLE outside the numbered schema steps"
            elif isinstance(node, ast.Attribute) and node.attr == "create_all":
                yield f"{name}:{node.lineno}: creates tables outside the numbered schema steps"


def _sqlalchemy_table(func: ast.expr, bare_table: bool) -> bool:
    """Whether a call is SQLAlchemy's `Table(...)` (`sa.Table`, `sqlalchemy.Table`, or a bare
    `Table` imported from sqlalchemy)."""
    if isinstance(func, ast.Attribute) and func.attr == "Table":
        return isinstance(func.value, ast.Name) and func.value.id in ("sa", "sqlalchemy")
    return bare_table and isinstance(func, ast.Name) and func.id == "Table"


def problems(root: Path) -> list[str]:
    return [*long_modules(root), *private_imports(root), *stray_tables(root)]


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / "src"
    found = problems(root)
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} shape problem(s) in {root}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
