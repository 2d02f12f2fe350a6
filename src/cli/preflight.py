"""What a driving command (`run`, `resume`, `retry`) checks before it opens the engine.

Opening the engine imports LangGraph, the OpenAI SDK and the stores (seconds of CPU on a busy
machine) and creates the databases. A mistake found only then costs that time and leaves
files behind, so the cheap checks come first, with the standard library, pydantic and YAML
alone: the config files parse (`check_config_files`), the lead agent's model resolves to an
endpoint with a key (a missing key, an unknown profile), and a conversation or message id
given on the command line is stored (`client.quick.known`, read-only `sqlite3`; a store that
does not exist yet knows no id). `tests/test_first_contact.py` holds these to "no engine
imported, no file created".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import NotFoundError

if TYPE_CHECKING:
    from ..settings import Settings


def before_run(
    settings: Settings, *, conversation: str | None = None, message: str | None = None
) -> None:
    """Raise the error the engine would raise later (exit 2), or return: the run may start."""
    from .app import check_config_files

    agents = check_config_files(settings)
    lead = next((spec for spec in agents.values() if spec.role == "lead"), None)
    if lead is not None:
        check_model(settings, lead.model)
    if conversation is not None:
        _check_known(settings, "conversation", conversation)
    if message is not None:
        _check_known(settings, "message", message)


def check_model(settings: Settings, reference: str | None) -> None:
    """The model `reference` (or the default) resolves: its profile exists and its key is set
    (`MissingCredentialsError` / `ConfigError` otherwise, naming what to set)."""
    from ..agents.model.profiles import ModelRegistry

    registry = ModelRegistry.from_file(
        settings.config_dir / "models.yaml", default_model=settings.model
    )
    registry.resolve(reference)


def _check_known(settings: Settings, kind: str, row_id: str) -> None:
    from ..client import quick

    if quick.known(settings, kind, row_id) is False:
        raise NotFoundError(f"{kind} {row_id} not found")
