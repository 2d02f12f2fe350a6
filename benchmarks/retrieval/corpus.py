"""The retrieval benchmark's corpus: passages of Python's own standard-library docstrings.

Text nobody here wrote, shipped with every Python: for each module of `MODULES`, every public
function, class and method with a docstring (at least 20 characters; an object re-exported by
a later module keeps its first name) gives one passage,
`"{qualified name}{signature}: {first paragraph of the docstring}"` (white space collapsed,
at most 700 characters). Built deterministically from the running Python (3.11 here), so the
answer of each question is named by its qualified name (`questions.json`).
"""

from __future__ import annotations

import importlib
import inspect
import re
import warnings

MODULES = [
    "os", "os.path", "shutil", "pathlib", "glob", "fnmatch", "tempfile", "re", "string", "textwrap",
    "json", "csv", "time", "datetime", "calendar", "collections", "heapq", "bisect", "itertools",
    "functools", "operator", "math", "statistics", "random", "subprocess", "logging", "hashlib",
    "base64", "binascii", "zlib", "gzip", "zipfile", "tarfile", "struct", "copy", "pprint", "urllib.parse",
    "html", "difflib", "unicodedata", "secrets", "uuid", "ipaddress", "socket", "select", "threading",
    "queue", "contextlib", "inspect", "typing", "dataclasses", "enum", "fractions", "decimal", "array",
    "weakref", "types", "shlex", "sqlite3", "platform", "signal", "locale", "codecs", "io", "sys",
    "traceback", "warnings", "argparse", "configparser", "email.utils", "mimetypes", "http.client",
]
MAX_CHARS = 700


def _first_paragraph(doc: str) -> str:
    """The first paragraph, or the first two when the first is only a signature line."""
    parts = re.split(r"\n\s*\n", inspect.cleandoc(doc).strip(), maxsplit=2)
    text = " ".join(parts[0].split())
    if len(text) < 60 and len(parts) > 1:
        text += " " + " ".join(parts[1].split())
    return text


def _signature(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""


def passages() -> dict[str, str]:
    """qualified name → passage text, in a stable order."""
    out: dict[str, str] = {}
    seen_text: set[str] = set()
    seen_objects: set[int] = set()  # a function re-exported by another module: its first name

    def add(name: str, obj: object) -> None:
        doc = inspect.getdoc(obj)
        if not doc or len(doc) < 20 or name in out or id(obj) in seen_objects:
            return
        seen_objects.add(id(obj))
        body = _first_paragraph(doc)
        if len(body) < 20:
            return
        text = f"{name}{_signature(obj)}: {body}"[:MAX_CHARS]
        if text in seen_text:
            return
        seen_text.add(text)
        out[name] = text

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for module_name in MODULES:
            module = importlib.import_module(module_name)
            public = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
            for attr in sorted(public):
                obj = getattr(module, attr, None)
                if obj is None or inspect.ismodule(obj):
                    continue
                if getattr(obj, "__module__", None) in ("builtins", "typing") and module_name != "typing":
                    continue
                if inspect.isroutine(obj):
                    add(f"{module_name}.{attr}", obj)
                elif inspect.isclass(obj):
                    add(f"{module_name}.{attr}", obj)
                    for method in sorted(vars(obj)):
                        if method.startswith("_"):
                            continue
                        member = getattr(obj, method, None)
                        if callable(member):
                            add(f"{module_name}.{attr}.{method}", member)
    return out


if __name__ == "__main__":
    found = passages()
    print(len(found), sum(len(t) for t in found.values()) / len(found))
