"""Base URLs as people see them and as requests use them: user info never shown, never sent,
the API key never shown.

    >>> redact_url("https://user:secret@proxy.example:3128/v1")
    'https://***@proxy.example:3128/v1'
    >>> without_user_info("https://user:secret@api.example/v1")
    'https://api.example/v1'

A base URL may carry ``user:password@``. httpx would turn it into Basic auth (replacing the
Bearer key) and print it in its request log line, so the adapter strips it from what it sends,
and every message shows it as ``***@``. A key carried in the URL itself (``?key=...``, for a
proxy that wants it there) is shown as ``[DEEPSEEK_API_KEY]`` (:mod:`dsh_core.masking`).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit, urlunsplit

from ..masking import mask

__all__ = ["UNPARSABLE_URL", "is_local", "redact_url", "without_user_info"]

UNPARSABLE_URL = "<unparsable URL>"
"""Shown instead of a URL that ``urlsplit`` refuses: its text may hold a password."""


def redact_url(url: str) -> str:
    """``url`` as people may see it: user info (``user:password@``) replaced by ``***``, the
    API key masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return UNPARSABLE_URL
    if "@" not in parts.netloc:
        return mask(url)
    host = parts.netloc.rpartition("@")[2]
    return mask(urlunsplit(parts._replace(netloc=f"***@{host}")))


def without_user_info(url: str) -> str:
    """``url`` without its user info; an unparsable URL is returned as is (httpx refuses it
    later, and says why)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def is_local(url: str) -> bool:
    """Whether ``url`` points at this machine or a private network: ``localhost``, or a
    loopback, private or link-local address. Names other than ``localhost`` are not looked up.

    A server there (vLLM, SGLang) is the user's own, and often runs without a key.
    """
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    if not host:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local
