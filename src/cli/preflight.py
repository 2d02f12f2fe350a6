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
    from collections.abc import Mapping

    from ..agents.spec import AgentSpec
    from ..settings import Settings



def before_run(
    settings: Settings,
    *,
    conversation: str | None = None,
    message: str | None = None,
    notice: bool = False,
) -> str | None:
    """Raise the error the engine would raise later (exit 2), or return: the run may start;
    with `notice`, what is returned is a first-run note to show (`search_notice`), if any."""
    from .app import check_config_files

    agents = check_config_files(settings)
    lead = next((spec for spec in agents.values() if spec.role == "lead"), None)
    if lead is not None:
        check_model(settings, lead.model)
    if conversation is not None:
        _check_known(settings, "conversation", conversation)
    if message is not None:
        _check_known(settings, "message", message)
    return search_notice(settings, agents) if notice else None


SEARCH_NOTICE = (
    "note: web search is not configured, so the agents cannot search the web (web_search "
    "answers that it is not configured). Set web.search.provider in config/artifactflow.yaml: "
    "searxng (with web.search.searxng_url, a SearXNG you run: no key), brave (BRAVE_API_KEY) or "
    "tavily (TAVILY_API_KEY). This note is shown once per data folder."
)
NOTICE_MARK = ".search-notice-shown"


def search_notice(settings: Settings, agents: Mapping[str, AgentSpec]) -> str | None:
    """The first-run note for a config whose agents may call `web_search` while no search
    provider is set (the packaged defaults: the research path), once per data folder; None
    otherwise. Showing it leaves a mark in the data folder."""
    if settings.web.search.provider or not any("web_search" in a.tools for a in agents.values()):
        return None
    mark = settings.data_dir / NOTICE_MARK
    if mark.exists():
        return None
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    mark.touch()
    return SEARCH_NOTICE


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
