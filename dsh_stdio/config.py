"""Command line and environment, resolved once into a :class:`Config`.

A flag beats the environment, which beats the default (SPEC section 2). The API key comes only
from ``DEEPSEEK_API_KEY``: keys never go on a command line, where ``ps`` would show them.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit

from dsh_core.deepseek import API_KEY_VARIABLE, DEFAULT_BASE_URL, redact_url
from dsh_core.errors import MISSING_CREDENTIAL, HarnessError

__all__ = ["DEFAULT_BASE_URL", "DEFAULT_MODEL", "Config", "StartupError", "parse_config"]

DEFAULT_MODEL = "deepseek-v4-flash"


class StartupError(HarnessError):
    """dsh cannot start: a bad flag or setting, no key, an unusable home or session log."""

    def __init__(self, message: str, code: str = "STARTUP") -> None:
        super().__init__(message, code)


@dataclass(frozen=True)
class Config:
    """Everything the front door needs to start, already validated."""

    base_url: str
    model: str
    home: Path
    max_tokens: int | None
    timeout: float | None
    """Seconds to wait for a response and between stream events; None: the adapter's own."""
    continue_session: bool
    resume: str | None
    show_reasoning: bool
    question: str | None
    """The one-shot question, or None for a session (REPL or pipe)."""
    api_key: str = field(repr=False)
    """From the environment only; kept out of ``repr`` so it cannot leak into a message."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors become one startup-failure line instead of usage text."""

    def error(self, message: str) -> NoReturn:
        raise StartupError(f"{message} (see dsh --help)")


def _build_parser() -> _Parser:
    parser = _Parser(
        prog="dsh",
        description="Chat with a DeepSeek model: a REPL on a terminal, one turn per line on a "
        "pipe, or one question as arguments.",
        epilog=f"The API key is read from {API_KEY_VARIABLE}. Offline demo without a key: "
        "python scripts/demo_repl.py",
    )
    parser.add_argument("question", nargs="*", help="ask one question and exit (one-shot mode)")
    parser.add_argument("--base-url", metavar="URL", help="API base URL [DEEPSEEK_BASE_URL]")
    parser.add_argument("--model", metavar="NAME", help="model name [DSH_MODEL]")
    parser.add_argument("--home", metavar="DIR", help="sessions and history [DSH_HOME, ~/.dsh]")
    parser.add_argument("--max-tokens", metavar="N", help="output token limit [DSH_MAX_TOKENS]")
    parser.add_argument(
        "--timeout",
        metavar="SECONDS",
        help="wait this long for a response and between stream events "
        "(default 60 s for the response, 120 s between events) [DSH_TIMEOUT]",
    )
    resume = parser.add_mutually_exclusive_group()
    resume.add_argument(
        "--continue",
        dest="continue_session",
        action="store_true",
        help="resume the newest session of this directory",
    )
    resume.add_argument("--resume", metavar="ID", help="resume the session with this id")
    parser.add_argument(
        "--show-reasoning", action="store_true", help="print reasoning on a pipe (to stderr)"
    )
    parser.add_argument("--version", action="version", version=f"dsh {_version()}")
    return parser


def _version() -> str:
    from dsh_core import __version__

    return __version__


def _max_tokens(text: str | None, source: str) -> int | None:
    if text is None or text.strip() == "":
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0  # reported below, outside the except: int()'s complaint would repeat ours
    if value <= 0:
        raise StartupError(f"{source} must be a positive integer, not {text!r}")
    return value


def _timeout(text: str | None, source: str) -> float | None:
    if text is None or text.strip() == "":
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise StartupError(f"{source} must be a positive number of seconds, not {text!r}")
    return value


def _base_url(text: str, source: str) -> str:
    url = text.strip().rstrip("/")
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - the property raises for a port that is not 0-65535
    except ValueError as exc:
        raise StartupError(f"{source} is not a usable URL: {shown!r}") from exc
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise StartupError(f"{source} must be an http:// or https:// URL, not {shown!r}")
    return url


def parse_config(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> Config:
    """Resolve flags and environment; raises :class:`StartupError` with a one-line reason."""
    env = os.environ if environ is None else environ
    refused: str | None = None
    try:
        args = _build_parser().parse_args(list(argv))
    except StartupError as exc:
        refused = exc.message
    if refused is not None:
        # Raised out here: inside the except, argparse's own ArgumentError would become the
        # context, and error_chain would print its words a second time.
        raise StartupError(refused)

    if args.base_url is not None:
        base_url = _base_url(args.base_url, "--base-url")
    elif env.get("DEEPSEEK_BASE_URL"):
        base_url = _base_url(env["DEEPSEEK_BASE_URL"], "DEEPSEEK_BASE_URL")
    else:
        base_url = DEFAULT_BASE_URL

    if args.max_tokens is not None:
        max_tokens = _max_tokens(args.max_tokens, "--max-tokens")
    else:
        max_tokens = _max_tokens(env.get("DSH_MAX_TOKENS"), "DSH_MAX_TOKENS")

    if args.timeout is not None:
        timeout = _timeout(args.timeout, "--timeout")
    else:
        timeout = _timeout(env.get("DSH_TIMEOUT"), "DSH_TIMEOUT")

    model = args.model or env.get("DSH_MODEL") or DEFAULT_MODEL
    home = Path(args.home or env.get("DSH_HOME") or Path.home() / ".dsh").expanduser()

    api_key = env.get(API_KEY_VARIABLE, "").strip()
    if not api_key:
        raise StartupError(
            f"{API_KEY_VARIABLE} is not set: export your DeepSeek API key, "
            "or try the offline demo: python scripts/demo_repl.py",
            MISSING_CREDENTIAL,
        )

    question = " ".join(args.question) if args.question else None
    return Config(
        base_url=base_url,
        model=model,
        home=home,
        max_tokens=max_tokens,
        timeout=timeout,
        continue_session=args.continue_session,
        resume=args.resume,
        show_reasoning=args.show_reasoning,
        question=question,
        api_key=api_key,
    )
