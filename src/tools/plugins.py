"""Find the module behind a name listed under ``plugins:`` in the config.

A plugin in the config folder (``name.py`` or ``name/__init__.py``) is loaded from its file
under a module name unique to that file, so two projects' ``tools.py`` never collide and
`sys.path` is left alone; any other name is imported as an installed module. Registering
what the module defines is the registry's job (`ToolRegistry.load_plugins`).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import types
from pathlib import Path

from ..errors import ConfigError

ENTRY_POINT_GROUP = "artifactflow.tools"  # installed packages publish tools here


def load_plugin_module(name: str, config_dir: Path) -> types.ModuleType:
    """A config-folder plugin loaded from its file, under a module name unique to that file,
    without touching `sys.path`; otherwise the installed module `name`."""
    relative = Path(*name.split("."))
    for path, package in (
        (config_dir / relative.with_suffix(".py"), False),
        (config_dir / relative / "__init__.py", True),
    ):
        if not path.is_file():
            continue
        resolved = path.resolve()
        digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:12]
        unique = f"_artifactflow_plugin_{digest}_{name.replace('.', '_')}"
        if unique in sys.modules:
            return sys.modules[unique]
        spec = importlib.util.spec_from_file_location(
            unique, resolved, submodule_search_locations=[str(resolved.parent)] if package else None
        )
        if spec is None or spec.loader is None:  # pragma: no cover - a .py file always has one
            raise ConfigError(f"plugin '{name}': cannot load {resolved}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[unique] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[unique]
            raise
        return module
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name and not name.startswith(f"{exc.name}."):
            raise
        raise ConfigError(
            f"plugin '{name}' (listed under plugins: in {config_dir / 'artifactflow.yaml'}): "
            f"no file {config_dir / relative.with_suffix('.py')} and no installed module '{name}'"
        ) from None
