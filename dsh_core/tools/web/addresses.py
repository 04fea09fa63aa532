"""Where ``web_fetch`` may connect: the address it connects to is the address it checked (SPEC 16).

    backend = CheckedBackend(allow_private=False)      # httpcore's network backend
    transport = checked_transport(backend)             # an httpx transport that uses it

A page the model names must not reach what only this machine, or its network, can: a service
on loopback, a router's page, the cloud's metadata endpoint (``169.254.169.254`` hands out
credentials). The check cannot be made on the URL's text: ``2130706433``, ``0177.0.0.1``,
``127.1`` and ``[::ffff:127.0.0.1]`` are all 127.0.0.1, and a name can resolve to anything.
So the check is made where the connection is: :class:`CheckedBackend` resolves the host itself,
refuses it when *any* of its addresses is not public (:func:`refusal`), and connects to the
address it checked, never to the name, so a DNS answer that changes between the check and the
connection (rebinding) cannot slip in. Every redirect is a new request, and so a new check.

``allow_private_addresses`` (``[web]`` in ``config.toml``: a test's loopback server, a
documentation server on the local network) lifts the refusal for loopback, private,
link-local and shared addresses, never for the metadata endpoints.

No proxy: a proxy resolves the name itself, and the check would be on the proxy's address.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

import httpcore
import httpx

if TYPE_CHECKING:
    from httpcore import AsyncNetworkStream

__all__ = ["METADATA_ADDRESSES", "BlockedAddress", "CheckedBackend", "checked_transport", "refusal"]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES: frozenset[Address] = frozenset(
    ipaddress.ip_address(text)
    for text in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle
        "169.254.170.2",  # AWS ECS task credentials
        "169.254.169.253",  # AWS DNS
        "169.254.169.123",  # AWS time
        "100.100.100.200",  # Alibaba Cloud
        "fd00:ec2::254",  # AWS over IPv6
        "fd00:ec2::23",
    )
)
"""Cloud metadata endpoints: refused even with ``allow_private_addresses``."""

_NAT64 = ipaddress.ip_network("64:ff9b::/96")

Resolve = Callable[[str, int], Awaitable[list[str]]]
"""A host's addresses, as text (the default asks the system's resolver)."""


class BlockedAddress(httpcore.ConnectError):
    """The host resolves to an address ``web_fetch`` does not connect to."""


def _embedded(address: Address) -> Address:
    """The IPv4 address an IPv6 one carries (mapped ``::ffff:a.b.c.d``, NAT64), else itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address.sixtofour is not None:
            return address.sixtofour
    return address


def refusal(address: Address, *, allow_private: bool = False) -> str | None:
    """Why ``web_fetch`` does not connect to ``address``, as a few words; None when it may.

    An IPv6 address that carries an IPv4 one (``::ffff:127.0.0.1``, NAT64) is judged by it.
    """
    inner = _embedded(address)
    if address in METADATA_ADDRESSES or inner in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if inner.is_unspecified:
        return "an unspecified address (this machine)"
    if inner.is_multicast:
        return "a multicast address"
    if allow_private:
        return None
    if inner.is_loopback:
        return "a loopback address (this machine)"
    if inner.is_link_local:
        return "a link-local address"
    if isinstance(inner, ipaddress.IPv4Address) and inner in _SHARED:
        return "a shared (carrier-grade NAT) address"
    if inner.is_private:
        return "a private address"
    if inner.is_reserved or not inner.is_global:
        return "a reserved address"
    return None


_SHARED = ipaddress.ip_network("100.64.0.0/10")


async def _system_resolve(host: str, port: int) -> list[str]:
    import asyncio

    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class CheckedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network, but a host is resolved here, checked, and connected to by address."""

    def __init__(self, *, allow_private: bool = False, resolve: Resolve | None = None) -> None:
        self.allow_private = allow_private
        self._resolve = resolve or _system_resolve
        self._network = httpcore.AnyIOBackend()
        self.connected: list[str] = []
        """The addresses connected to, in order (what a test checks)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> AsyncNetworkStream:
        host = host.strip("[]")
        try:
            found = await self._resolve(host, port)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        addresses = [ipaddress.ip_address(text.split("%", 1)[0]) for text in found]
        if not addresses:
            raise httpcore.ConnectError(f"{host} has no address")
        for address in addresses:
            why = refusal(address, allow_private=self.allow_private)
            if why is not None:
                said = host if host == str(address) else f"{host} resolves to {address}, which"
                raise BlockedAddress(
                    f"refused: {said} is {why}; web_fetch reaches public addresses only"
                    + ("" if self.allow_private or why == "a cloud metadata address" else _HINT)
                )
        last: Exception | None = None
        for address in addresses:  # the checked address itself: no second lookup
            try:
                stream = await self._network.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
                continue
            self.connected.append(str(address))
            return stream
        assert last is not None
        raise last

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> AsyncNetworkStream:
        raise BlockedAddress("refused: web_fetch does not connect to unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._network.sleep(seconds)


_HINT = " (a page on this machine or your network: [web] allow_private_addresses in config.toml)"


def checked_transport(backend: CheckedBackend) -> httpx.AsyncHTTPTransport:
    """An httpx transport whose connections all go through ``backend``: no proxy, no
    environment (no ``.netrc`` credentials), the system's CA bundle as httpx reads it."""
    transport = httpx.AsyncHTTPTransport(trust_env=False)
    # httpx builds its pool without a way to name the network backend: the same pool with
    # ours. (The SSRF tests fail if this stops taking effect: nothing else resolves names.)
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=_ssl_context(),
        max_connections=4,
        network_backend=backend,
    )
    return transport


def _ssl_context() -> ssl.SSLContext:
    return httpx.create_ssl_context(trust_env=False)
