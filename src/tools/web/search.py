"""`web_search`: query a configured search engine and return title/url/snippet hits.

The engine is chosen by the operator (``web.search`` in the config), not by the model, so
its URL does not pass the SSRF guard: a self-hosted SearXNG on the local network is a
legitimate setup. API keys never live in the config file; the config names the environment
variable that holds the key (``brave_api_key_env``, ``tavily_api_key_env``), so the file can
be committed and shared safely.

Providers share one small interface (`SearchProvider`) so adding an engine means writing
one class and one branch in `make_provider`. `web_search` is the tool-facing wrapper: it
never raises; configuration mistakes, HTTP errors, timeouts and malformed answers all
become a failed `ToolResult` whose text says what went wrong and, where it can, how to fix
it.
"""

from __future__ import annotations

import html
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

import httpx
from pydantic import BaseModel

from ..base import ToolResult
from .fetch import USER_AGENT

MAX_RESULTS = 20
MAX_QUERY_CHARS = 1000
DEFAULT_TIMEOUT = 15.0
PROVIDERS = ("searxng", "brave", "tavily")
BRAVE_BASE_URL = "https://api.search.brave.com/res/v1"
TAVILY_BASE_URL = "https://api.tavily.com"

# Where the operator sets things; quoted in error messages so they say exactly what to do.
_CONFIG_HINT = "web.search.{key} in config/artifactflow.yaml (or ARTIFACTFLOW_WEB__SEARCH__{env})"


class SearchConfigError(Exception):
    """Web search is not (correctly) configured; the message says what to set."""


class SearchProviderError(Exception):
    """The search engine answered with an error or with something that is not a result list."""


class SearchHit(BaseModel):
    """One search result."""

    title: str
    url: str
    snippet: str = ""


class SearchProvider(ABC):
    """A search engine. `search` returns at most `count` hits or raises.

    Implementations raise `SearchProviderError` for engine-side problems; httpx's own
    exceptions (timeouts, connection errors) may pass through, `web_search` reports them.
    """

    name: str = "search"

    @abstractmethod
    async def search(self, query: str, count: int) -> list[SearchHit]:
        """Run `query` and return up to `count` hits, best first."""


def _hint(key: str) -> str:
    return _CONFIG_HINT.format(key=key, env=key.upper())


_TAGS = re.compile(r"<[^>]+>")


def _clean(text: Any) -> str:
    """Plain text from a snippet: engines put <strong> highlights and entities in them."""
    if not isinstance(text, str):
        return ""
    return " ".join(html.unescape(_TAGS.sub("", text)).split())


def _hits(rows: Any, provider: str, snippet_key: str, count: int) -> list[SearchHit]:
    """Convert the engine's result rows, skipping rows without a URL and duplicates."""
    if not isinstance(rows, list):
        raise SearchProviderError(
            f"{provider} returned an unexpected response: the result list is missing"
        )
    hits: list[SearchHit] = []
    seen: set[str] = set()
    for row in rows:
        if not isinstance(row, Mapping):
            continue
        url = row.get("url")
        if not isinstance(url, str) or not url.strip() or url in seen:
            continue
        seen.add(url)
        title = _clean(row.get("title")) or url
        hits.append(SearchHit(title=title, url=url.strip(), snippet=_clean(row.get(snippet_key))))
        if len(hits) >= count:
            break
    return hits


class _HttpProvider(SearchProvider):
    """Shared plumbing: one short-lived client per search and uniform error reporting."""

    def __init__(
        self,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._transport = transport
        self._timeout = timeout

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=self._transport,
            timeout=httpx.Timeout(self._timeout),
            headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
            follow_redirects=True,
        )

    def _explain_status(self, response: httpx.Response) -> str:
        """Extra advice for an error status; providers override it."""
        return ""

    async def _json(self, response: httpx.Response) -> Any:
        if response.status_code >= 400:
            reason = f" {response.reason_phrase}" if response.reason_phrase else ""
            advice = self._explain_status(response)
            body = " ".join(response.text.split())[:200]
            detail = f": {body}" if body else ""
            raise SearchProviderError(
                f"{self.name} search failed with HTTP {response.status_code}{reason}{detail}"
                + (f" ({advice})" if advice else "")
            )
        try:
            return response.json()
        except ValueError:
            raise SearchProviderError(
                f"{self.name} returned a response that is not valid JSON "
                f"(content type {response.headers.get('content-type', 'unknown')!r})"
            ) from None

    async def _fetch(self, method: str, url: str, **kwargs: Any) -> Mapping[str, Any]:
        """Send one request to the engine; its answer must be a JSON object."""
        async with self._client() as client:
            data = await self._json(await client.request(method, url, **kwargs))
        if not isinstance(data, Mapping):
            raise SearchProviderError(
                f"{self.name} returned an unexpected response: not a JSON object"
            )
        return data


class SearxngProvider(_HttpProvider):
    """A SearXNG instance through its JSON API: ``GET {base_url}/search?q=...&format=json``.

    The instance must allow the JSON format (``search.formats`` in its settings.yml),
    otherwise it answers 403.
    """

    name = "searxng"

    def __init__(
        self,
        base_url: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(transport=transport, timeout=timeout)
        self.base_url = base_url.rstrip("/")

    def _explain_status(self, response: httpx.Response) -> str:
        if response.status_code == 403:
            return "enable the json format under search.formats in the SearXNG settings.yml"
        if response.status_code == 429:
            return "the instance rate-limited the request; check its limiter settings"
        return ""

    async def search(self, query: str, count: int) -> list[SearchHit]:
        data = await self._fetch(
            "GET", f"{self.base_url}/search", params={"q": query, "format": "json"}
        )
        return _hits(data.get("results"), self.name, "content", count)


class _KeyedProvider(_HttpProvider):
    """An engine reached with an API key, which is kept out of logs and tracebacks."""

    default_base_url = ""
    key_statuses: tuple[int, ...] = (401, 403)
    quota_statuses: tuple[int, ...] = (429,)
    key_advice = ""
    quota_advice = ""

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(transport=transport, timeout=timeout)
        self._api_key = api_key
        self.base_url = (base_url or self.default_base_url).rstrip("/")

    def __repr__(self) -> str:  # keep the key out of logs and tracebacks
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    def _explain_status(self, response: httpx.Response) -> str:
        if response.status_code in self.key_statuses:
            return self.key_advice
        if response.status_code in self.quota_statuses:
            return self.quota_advice
        return ""


class BraveSearchProvider(_KeyedProvider):
    """Brave Search API: ``GET {base_url}/web/search?q=&count=`` with ``X-Subscription-Token``."""

    name = "brave"
    default_base_url = BRAVE_BASE_URL
    key_advice = "check the Brave API key"
    quota_advice = "rate limit or quota of the Brave plan exceeded"

    async def search(self, query: str, count: int) -> list[SearchHit]:
        data = await self._fetch(
            "GET",
            f"{self.base_url}/web/search",
            params={"q": query, "count": count},
            headers={"X-Subscription-Token": self._api_key},
        )
        web = data.get("web")
        if web is None:  # Brave omits the section when nothing matched
            return []
        if not isinstance(web, Mapping):
            raise SearchProviderError(
                "brave returned an unexpected response: 'web' is not an object"
            )
        return _hits(web.get("results", []), self.name, "description", count)


class TavilyProvider(_KeyedProvider):
    """Tavily search API: ``POST {base_url}/search`` with a bearer key; results[].content."""

    name = "tavily"
    default_base_url = TAVILY_BASE_URL
    quota_statuses = (429, 432, 433)
    key_advice = "check the Tavily API key"
    quota_advice = "rate limit or plan quota of Tavily exceeded"

    async def search(self, query: str, count: int) -> list[SearchHit]:
        data = await self._fetch(
            "POST",
            f"{self.base_url}/search",
            json={"query": query, "max_results": count},
            headers={"Authorization": f"Bearer {self._api_key}"},
        )
        return _hits(data.get("results"), self.name, "content", count)


KEYED_PROVIDERS: dict[str, type[_KeyedProvider]] = {
    "brave": BraveSearchProvider,
    "tavily": TavilyProvider,
}


def _api_key(config: Mapping[str, Any], env: Mapping[str, str], provider: str) -> str:
    key = f"{provider}_api_key_env"
    var = config.get(key) or f"{provider.upper()}_API_KEY"
    if not isinstance(var, str):
        raise SearchConfigError(f"{_hint(key)} must be the name of an environment variable")
    value = (env.get(var) or "").strip()
    if not value:
        raise SearchConfigError(
            f"web search provider '{provider}' needs an API key: set the environment variable "
            f"{var} (the variable's name comes from {_hint(key)})"
        )
    return value


def _http_url(value: Any, setting: str, example: str) -> str:
    """Validate an operator-configured engine address; `setting` is how to set it."""
    if not isinstance(value, str) or not value.strip():
        raise SearchConfigError(f"{setting} is not set; set it to the engine's URL, e.g. {example}")
    try:
        parsed: httpx.URL | None = httpx.URL(value.strip())
    except (httpx.InvalidURL, ValueError):
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        raise SearchConfigError(
            f"{setting} must be an http(s) URL such as {example}, got {value!r}"
        )
    return value.strip()


def make_provider(
    config: Mapping[str, Any] | None,
    env: Mapping[str, str],
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> SearchProvider:
    """Build the provider named by ``config["provider"]`` (the ``web.search`` section).

    Keys: ``provider`` (searxng | brave | tavily), ``searxng_url``, ``brave_api_key_env``
    (default BRAVE_API_KEY), ``tavily_api_key_env`` (default TAVILY_API_KEY), optional
    ``brave_base_url`` / ``tavily_base_url`` and ``timeout``. Raises `SearchConfigError`
    whose message names exactly the setting or environment variable to set.
    """
    config = config or {}
    choices = ", ".join(f"'{p}'" for p in PROVIDERS)
    raw = config.get("provider")
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        raise SearchConfigError(
            f"web search is not configured: set {_hint('provider')} to one of {choices}"
        )
    name = str(raw).strip().lower()
    timeout = config.get("timeout") or DEFAULT_TIMEOUT
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise SearchConfigError(
            f"the search timeout must be a positive number of seconds, got {timeout!r}"
        )
    if name == "searxng":
        url = _http_url(
            config.get("searxng_url"),
            f"web search provider 'searxng' needs its address: {_hint('searxng_url')}",
            "http://localhost:8888",
        )
        return SearxngProvider(url, transport=transport, timeout=float(timeout))
    keyed = KEYED_PROVIDERS.get(name)
    if keyed is not None:
        setting = f"{name}_base_url"
        default = keyed.default_base_url
        base = _http_url(config.get(setting) or default, setting, default)
        return keyed(
            _api_key(config, env, name), base_url=base, transport=transport, timeout=float(timeout)
        )
    raise SearchConfigError(
        f"unknown web search provider {raw!r}: set {_hint('provider')} to one of {choices}"
    )


async def web_search(
    query: str,
    count: int = 5,
    *,
    config: Mapping[str, Any] | None,
    env: Mapping[str, str],
    transport: httpx.AsyncBaseTransport | None = None,
) -> ToolResult:
    """Search the web with the configured provider. Never raises.

    Success: ``data`` is a list of ``{"title", "url", "snippet"}`` (possibly empty),
    ``metadata`` holds the provider name and the query.
    """
    if not isinstance(query, str) or not query.strip():
        return ToolResult.fail("query must be a non-empty string")
    query = query.strip()
    if len(query) > MAX_QUERY_CHARS:
        return ToolResult.fail(
            f"query is too long: {len(query)} characters, at most {MAX_QUERY_CHARS}"
        )
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_RESULTS:
        return ToolResult.fail(f"count must be an integer from 1 to {MAX_RESULTS}, got {count!r}")
    try:
        provider = make_provider(config, env, transport=transport)
    except SearchConfigError as exc:
        return ToolResult.fail(str(exc))
    name = provider.name
    try:
        hits = await provider.search(query, count)
    except SearchProviderError as exc:
        return ToolResult.fail(str(exc), provider=name)
    except httpx.TimeoutException:
        return ToolResult.fail(f"{name} search timed out", provider=name)
    except httpx.HTTPError as exc:
        return ToolResult.fail(
            f"{name} search request failed: {type(exc).__name__}: {exc or 'no details'}",
            provider=name,
        )
    except Exception as exc:  # a tool must report, not raise
        return ToolResult.fail(
            f"{name} search failed unexpectedly: {type(exc).__name__}: {exc}", provider=name
        )
    return ToolResult(
        success=True,
        data=[hit.model_dump() for hit in hits],
        metadata={"provider": name, "query": query, "count": len(hits)},
    )
