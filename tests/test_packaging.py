"""Every subpackage of `src/` ships in the distribution: `pyproject.toml` lists packages by
hand (the `src/` → `artifactflow` mapping), and a package left out is missing from a
non-editable install (`pip install artifactflow`) while an editable checkout still works."""

from __future__ import annotations

import tomllib
from pathlib import Path

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
