"""Load hooks named in config, and assemble the process's `HookRunner`.

`module:object` follows the plugin rules: a module in the config folder wins over an
installed one of the same name. Unlike the old plugin loader, nothing is added to
`sys.path`: a config-folder module is loaded from its file with `importlib.util`
(`my_hooks:Audit` → `config/my_hooks.py`, a package folder works too), and
`path/to/file.py:Audit` names a file relative to the config folder (or absolute). Without
`:object` the module itself is the hook (its functions named like hook points).

The object may be a class (instantiated with `options`), an instance, or a factory function
(called with `options`, returning the hook).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, UserError
from ..settings.hooks import HookSpec
from .dedupe import HookLedger
from .dispatch import HookRunner, implemented_points

if TYPE_CHECKING:
    from ..settings import Settings

PRIVATE_PREFIX = "artifactflow_config__"


def _load_file(name: str, path: Path) -> types.ModuleType:
    """Import `path` as module `name` (a folder: as a package)."""
    existing = sys.modules.get(name)
    target = path / "__init__.py" if path.is_dir() else path
    if existing is not None and getattr(existing, "__file__", None) == str(target):
        return existing
    locations = [str(path)] if path.is_dir() else None
    spec = importlib.util.spec_from_file_location(name, target, submodule_search_locations=locations)
    if spec is None or spec.loader is None:  # pragma: no cover - not a Python file
        raise ImportError(f"cannot load {target}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # so dataclasses, pickling and submodules resolve it
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def import_module(module_ref: str, config_dir: Path) -> types.ModuleType:
    """A module by file path (`x.py`, `dir/x.py`), by name from the config folder, or
    installed."""
    if module_ref.endswith(".py") or "/" in module_ref:
        path = Path(module_ref).expanduser()
        path = path if path.is_absolute() else config_dir / path
        if not path.exists():
            raise ImportError(f"no file {path}")
        stem = path.stem if path.name != "__init__.py" else path.parent.name
        return _load_file(f"{PRIVATE_PREFIX}{stem}", path)
    top, _, rest = module_ref.partition(".")
    for candidate in (config_dir / f"{top}.py", config_dir / top):
        if candidate.is_file() or (candidate / "__init__.py").is_file():
            # A private name: a config file never replaces an installed module of its name.
            module = _load_file(f"{PRIVATE_PREFIX}{top}", candidate)
            return importlib.import_module(f"{module.__name__}.{rest}") if rest else module
    return importlib.import_module(module_ref)


def import_object(ref: str, config_dir: Path) -> Any:
    """`module:attr.path` → the object; `module` alone → the module."""
    module_ref, _, attr_path = ref.partition(":")
    value: Any = import_module(module_ref, config_dir)
    for part in filter(None, attr_path.split(".")):
        if not hasattr(value, part):
            names = ", ".join(n for n in dir(value) if not n.startswith("_"))
            raise AttributeError(f"{module_ref} has no attribute '{part}' (it has: {names})")
        value = getattr(value, part)
    return value


def instantiate(obj: Any, options: dict[str, Any]) -> Any:
    if inspect.isclass(obj):
        return obj(**options)
    if inspect.isfunction(obj):
        return obj(**options)
    if options:
        raise TypeError("options are given but the object is neither a class nor a factory")
    return obj


def load_configured_hooks(specs: Sequence[HookSpec], config_dir: Path) -> list[tuple[str, Any]]:
    """Import and build each `hooks.load` entry; errors name the file, field and entry."""
    where = config_dir / "artifactflow.yaml"
    hooks: list[tuple[str, Any]] = []
    for index, spec in enumerate(specs):
        field = f"hooks.load[{index}]"
        try:
            obj = import_object(spec.use, config_dir)
        except Exception as exc:
            raise ConfigError(f"{where}: field '{field}': '{spec.use}' failed to import: {exc}") from exc
        try:
            hook = instantiate(obj, dict(spec.options))
        except Exception as exc:
            raise ConfigError(
                f"{where}: field '{field}': could not build '{spec.use}' with options "
                f"{spec.options}: {type(exc).__name__}: {exc}"
            ) from exc
        try:
            implemented_points(hook, spec.use)
        except UserError as exc:
            raise ConfigError(f"{where}: field '{field}': {exc}") from None
        hooks.append((spec.use, hook))
    return hooks


def build_runner(
    settings: Settings,
    *,
    extra: Sequence[Any] = (),
    ledger: HookLedger | None = None,
    tracing: Any = None,
) -> HookRunner:
    """The process's runner, in the documented order: `hooks.load`, the tool policy, the
    redaction hook, hooks from Python (`extra`), then tracing (`tracing`, or the one
    `telemetry:` configures)."""
    cfg = settings.hooks
    hooks: list[Any] = load_configured_hooks(cfg.load, Path(settings.config_dir))
    if cfg.tool_policy is not None:
        from .policy import ToolPolicyHooks

        hooks.append(("tool_policy", ToolPolicyHooks(cfg.tool_policy)))
    if cfg.redaction is not None and cfg.redaction.patterns:
        from .redaction import RedactionHooks

        hooks.append(("redaction", RedactionHooks(cfg.redaction.patterns, cfg.redaction.replacement)))
    hooks.extend(extra)
    if tracing is None:
        from .telemetry import tracing_from_settings

        tracing = tracing_from_settings(settings.telemetry)
    if tracing is not None:
        hooks.append(("tracing", tracing))
    return HookRunner(hooks, on_error=cfg.on_error, ledger=ledger)
