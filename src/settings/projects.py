"""Project names: what `--project`, `"project"` and `ARTIFACTFLOW_PROJECT` accept.

A project groups conversations; their runs recall the project's memories (namespace
`(user, "project", NAME)`) besides the user's global ones. A name is a short identifier, so
it is safe in a memory namespace (whose labels are joined with `.`), a URL and a file name:
1 to 64 letters, digits, `_` or `-`, starting with a letter or digit.
"""

from __future__ import annotations

import re

PROJECT_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
_NAME = re.compile(PROJECT_NAME_PATTERN)


def project_name_problem(name: object) -> str | None:
    """Why `name` is not a valid project name, or None when it is."""
    if not isinstance(name, str) or not _NAME.match(name):
        return (
            f"invalid project name {name!r}: use 1 to 64 letters, digits, '_' or '-', "
            "starting with a letter or digit"
        )
    return None
