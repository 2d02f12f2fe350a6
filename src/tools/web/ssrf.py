"""Server-side request forgery (SSRF) guard for the web tools.

The model chooses the URLs that `fetch_urls` downloads, and the model reads whatever comes
back. Without a guard, a prompt-injected page could make the agent read cloud metadata
(`http://169.254.169.254/...`), an admin panel on `localhost`, or a service on the office
network. `check_url` refuses such targets *before* any connection is opened.

Policy (unless ``allow_private_networks=True``):

* only ``http`` and ``https`` URLs with a host are allowed (no ``file:``, ``ftp:``,
  ``gopher:``, ``data:`` ...);
* names that are internal by convention are refused without a DNS lookup: ``localhost``
  and ``*.localhost``, ``*.internal`` (e.g. ``metadata.google.internal``), ``*.local``,
  ``*.home.arpa``, and single-label names such as ``intranet`` or ``metadata`` (they resolve
  through the resolver's search domains to internal hosts);
* IP literals, including the odd IPv4 spellings that the C resolver accepts (``127.1``,
  ``2130706433``, ``0x7f.1``), and *every* A/AAAA record of a hostname must be globally
  routable: loopback, RFC 1918 private ranges, ``fc00::/7``, link-local (``169.254/16``,
  ``fe80::/10``), CGNAT ``100.64/10``, unspecified, multicast, reserved and documentation
  ranges are refused, as are IPv6 addresses that embed such an IPv4 address (IPv4-mapped,
  IPv4-compatible, 6to4, Teredo, NAT64).

A host whose name cannot be resolved is refused too (fail closed, with a clear message).

DNS rebinding: a checked name may resolve differently when the HTTP client looks it up
again a moment later. `resolve_and_check` therefore returns the addresses it approved and
`fetch_urls` connects to one of *those* addresses (the URL's host is replaced by the IP while
the ``Host`` header and the TLS SNI/certificate check keep the original name), so the address
that was checked is the address that is contacted. Residual risks, accepted and documented:

* when an HTTP proxy is configured through the environment, the proxy makes the final
  connection; it receives the pinned IP, but its own network position decides what that IP
  reaches;
* with ``allow_private_networks=True`` nothing is resolved or pinned: that switch is meant
  for trusted, local deployments;
* the check is about network addresses only; it does not judge the content of a public site.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from urllib.parse import unquote

import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: A DNS hook: ``await resolver(host, port)`` returns the host's IP addresses as strings.
#: The default uses the event loop's ``getaddrinfo``; tests and deployments with their own
#: DNS (e.g. DNS-over-HTTPS) can pass another one.
Resolver = Callable[[str, int], Awaitable[list[str]]]

ALLOWED_SCHEMES = frozenset({"http", "https"})

# Names that point inside the network by convention. Matching is on the lower-cased name
# without a trailing dot; an entry matches the name itself and every sub-domain.
BLOCKED_NAME_SUFFIXES = ("localhost", "internal", "local", "home.arpa", "localdomain")

# Explicit list on top of `ipaddress`'s flags, because the flags' exact coverage has changed
# between Python releases (e.g. 3.11 vs 3.12.4); an explicit list keeps the policy stable.
BLOCKED_NETWORKS: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",  # "this network", unspecified
        "10.0.0.0/8",  # RFC 1918 private
        "100.64.0.0/10",  # carrier-grade NAT
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local, cloud metadata (169.254.169.254)
        "172.16.0.0/12",  # RFC 1918 private
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation
        "192.88.99.0/24",  # 6to4 relay anycast (deprecated)
        "192.168.0.0/16",  # RFC 1918 private
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation
        "203.0.113.0/24",  # documentation
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, incl. broadcast 255.255.255.255
        "::/128",  # unspecified
        "::1/128",  # loopback
        "::ffff:0:0/96",  # IPv4-mapped (the embedded address is judged separately)
        "64:ff9b:1::/48",  # local-use NAT64
        "100::/64",  # discard-only
        "2001:db8::/32",  # documentation
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated)
        "ff00::/8",  # multicast
    )
)

_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class BlockedAddressError(Exception):
    """The URL may not be fetched: bad scheme, no host, or a non-public destination."""


class DNSResolutionError(BlockedAddressError):
    """The host name could not be resolved, so its destination could not be checked."""


async def default_resolver(host: str, port: int) -> list[str]:
    """All A/AAAA addresses of `host`, via the event loop's (threaded) ``getaddrinfo``."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def _parse_ip(text: str) -> IPAddress | None:
    """Parse an IP literal, including IPv4 shorthands that ``inet_aton`` accepts.

    ``127.1``, ``2130706433`` and ``0x7f.0.0.1`` all mean 127.0.0.1 to the C resolver, so
    they must be judged as IP addresses rather than looked up as names.
    """
    candidate = text.strip("[]")
    try:
        return ipaddress.ip_address(candidate)
    except ValueError:
        pass
    if candidate and all(c in "0123456789abcdefxABCDEFX." for c in candidate):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(candidate))
        except OSError:
            return None
    return None


def _embedded_ipv4(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address tunnels to, if any (mapped, compat, 6to4, ...)."""
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr.sixtofour is not None:
        return addr.sixtofour
    if addr.teredo is not None:
        return addr.teredo[1]  # (server, client): the client is the real destination
    if addr in _NAT64:
        return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    # Deprecated IPv4-compatible form ::a.b.c.d (excluding :: and ::1, judged on their own).
    if int(addr) >> 32 == 0 and int(addr) > 1:
        return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    return None


def blocked_reason(addr: IPAddress) -> str | None:
    """Why `addr` is not a public destination, or None when it is globally routable."""
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.scope_id:
            addr = ipaddress.IPv6Address(str(addr).split("%", 1)[0])
        inner = _embedded_ipv4(addr)
        if inner is not None:
            reason = blocked_reason(inner)
            if reason is not None:
                return f"an IPv6 address embedding {inner}, which is {reason}"
    checks: tuple[tuple[bool, str], ...] = (
        (addr.is_loopback, "a loopback address"),
        (addr.is_unspecified, "the unspecified address"),
        (addr.is_link_local, "a link-local address (this includes cloud metadata endpoints)"),
        (addr.is_multicast, "a multicast address"),
        (addr.is_private, "a private-network address"),
        (addr.is_reserved, "a reserved address"),
    )
    for flag, reason in checks:
        if flag:
            return reason
    if isinstance(addr, ipaddress.IPv4Address) and addr in ipaddress.ip_network("100.64.0.0/10"):
        return "a carrier-grade NAT (shared) address"
    for net in BLOCKED_NETWORKS:
        if addr.version == net.version and addr in net:
            return f"in the non-public range {net}"
    if not addr.is_global:
        return "not a globally routable address"
    return None


def _blocked_name_reason(host: str) -> str | None:
    """Why a host *name* is internal by convention, or None."""
    for suffix in BLOCKED_NAME_SUFFIXES:
        if host == suffix or host.endswith("." + suffix):
            return f"'{host}' is an internal host name (*.{suffix})"
    if "." not in host:
        return f"'{host}' is a single-label host name, which resolves inside the local network"
    return None


def _parse(url: str) -> httpx.URL:
    """Parse `url` and check scheme and host; the network policy is applied by the callers."""
    if not isinstance(url, str) or not url.strip():
        raise BlockedAddressError("empty URL")
    try:
        parsed = httpx.URL(url.strip())
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise BlockedAddressError(f"invalid URL {url!r}: {exc}") from None
    scheme = parsed.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        if not scheme:
            raise BlockedAddressError(
                f"refused {url!r}: the URL has no scheme; use an http:// or https:// URL"
            )
        raise BlockedAddressError(
            f"refused {url!r}: the '{scheme}:' scheme is not allowed; only http:// and "
            "https:// URLs can be fetched"
        )
    if not parsed.host:
        raise BlockedAddressError(f"refused {url!r}: the URL has no host")
    return parsed


def _host_of(parsed: httpx.URL) -> str:
    return unquote(parsed.host).lower().rstrip(".")


async def resolve_and_check(
    url: str,
    *,
    allow_private_networks: bool,
    resolver: Resolver | None = None,
) -> list[IPAddress]:
    """Check `url` like `check_url` and return the approved addresses to connect to.

    Returns an empty list when nothing needs pinning: with ``allow_private_networks=True``
    (nothing is resolved). For an IP-literal host the list holds that one address. Raises
    `BlockedAddressError` (or its subclass `DNSResolutionError`) otherwise.
    """
    parsed = _parse(url)
    if allow_private_networks:
        return []
    host = _host_of(parsed)
    literal = _parse_ip(host)
    if literal is not None:
        reason = blocked_reason(literal)
        if reason is not None:
            raise BlockedAddressError(
                f"refused {url!r}: {literal} is {reason}; fetching private or local "
                "network addresses is disabled (web.allow_private_networks)"
            )
        return [literal]
    name_reason = _blocked_name_reason(host)
    if name_reason is not None:
        raise BlockedAddressError(
            f"refused {url!r}: {name_reason}; fetching private or local network addresses "
            "is disabled (web.allow_private_networks)"
        )
    port = parsed.port or (443 if parsed.scheme.lower() == "https" else 80)
    try:
        raw = await (resolver or default_resolver)(host, port)
    except (OSError, UnicodeError) as exc:  # socket.gaierror is an OSError
        raise DNSResolutionError(f"could not resolve host '{host}' for {url!r}: {exc}") from None
    addresses: list[IPAddress] = []
    for item in raw:
        addr = _parse_ip(str(item).split("%", 1)[0])
        if addr is None:
            raise DNSResolutionError(
                f"could not resolve host '{host}' for {url!r}: unexpected address {item!r}"
            )
        if addr not in addresses:
            addresses.append(addr)
    if not addresses:
        raise DNSResolutionError(f"could not resolve host '{host}' for {url!r}: no addresses")
    for addr in addresses:
        reason = blocked_reason(addr)
        if reason is not None:
            raise BlockedAddressError(
                f"refused {url!r}: host '{host}' resolves to {addr}, which is {reason}; "
                "fetching private or local network addresses is disabled "
                "(web.allow_private_networks)"
            )
    return addresses


async def check_url(
    url: str,
    *,
    allow_private_networks: bool,
    resolver: Resolver | None = None,
) -> None:
    """Raise `BlockedAddressError` unless `url` may be fetched under the SSRF policy.

    All A/AAAA records must be public: one private record is enough to refuse, because the
    client could connect to any of them. See the module docstring for the full policy and
    the DNS-rebinding caveat; `fetch_urls` uses `resolve_and_check` to pin the connection.
    """
    await resolve_and_check(url, allow_private_networks=allow_private_networks, resolver=resolver)
