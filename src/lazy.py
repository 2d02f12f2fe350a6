"""Re-exports imported on first use (PEP 562), shared by the packages that re-export heavy names
(the package root, `client`, `events`): importing a package then costs only what is used.

The lowest layer: it imports nothing of artifactflow, so any package may use it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, module_of: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: a name in `module_of` is imported from its module
    (relative to `package`) the first time it is asked for and kept on the package, so later
    lookups are plain attribute reads."""

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
