"""Web tools: fetch pages/PDFs behind an SSRF guard, and search through a configured engine."""

from .fetch import (
    DEFAULT_MAX_DOWNLOAD_BYTES,
    MAX_URLS,
    USER_AGENT,
    FetchError,
    fetch_urls,
    html_to_markdown,
    pdf_to_text,
)
from .search import (
    MAX_RESULTS,
    BraveSearchProvider,
    SearchConfigError,
    SearchHit,
    SearchProvider,
    SearchProviderError,
    SearxngProvider,
    TavilyProvider,
    make_provider,
    web_search,
)
from .ssrf import (
    BlockedAddressError,
    DNSResolutionError,
    Resolver,
    blocked_reason,
    check_url,
    default_resolver,
    resolve_and_check,
)

__all__ = [
    "DEFAULT_MAX_DOWNLOAD_BYTES",
    "MAX_RESULTS",
    "MAX_URLS",
    "USER_AGENT",
    "BlockedAddressError",
    "BraveSearchProvider",
    "DNSResolutionError",
    "FetchError",
    "Resolver",
    "SearchConfigError",
    "SearchHit",
    "SearchProvider",
    "SearchProviderError",
    "SearxngProvider",
    "TavilyProvider",
    "blocked_reason",
    "check_url",
    "default_resolver",
    "fetch_urls",
    "html_to_markdown",
    "make_provider",
    "pdf_to_text",
    "resolve_and_check",
    "web_search",
]
