"""Command line and environment, resolved once into a :class:`Config`.

A flag beats the environment, which beats the default (SPEC section 2). The API key comes only
from ``DEEPSEEK_API_KEY``: keys never go on a command line, where ``ps`` would show them.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NoReturn, TypeVar
from urllib.parse import urlsplit

from dsh_core.agent.approval import ALL_GRANTS, TOOL_GRANTS, Grant
from dsh_core.agent.loop import DEFAULT_MAX_STEPS
from dsh_core.errors import MISSING_CREDENTIAL, STARTUP, Code, HarnessError
from dsh_core.extensions.mcp.spec import SERVER_NAME, ServerSpec
from dsh_core.masking import hide
from dsh_core.model.deepseek import API_KEY_VARIABLE, DEFAULT_BASE_URL
from dsh_core.model.urls import is_local, redact_url

from .terminal.bell import Notify

if TYPE_CHECKING:
    from dsh_core.model.prices import Prices
    from dsh_core.trust.sandbox import SandboxMode

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "SANDBOX_MODES",
    "SEARCH_URL_VARIABLE",
    "Action",
    "Config",
    "StartupError",
    "parse_config",
    "with_servers",
]

SEARCH_URL_VARIABLE = "DEEPSEEK_SEARCH_BASE_URL"
"""Where ``web_search`` goes, as the reference harness names it (not ``DEEPSEEK_BASE_URL``:
search speaks the Anthropic-compatible Messages API)."""

DEFAULT_MODEL = "deepseek-v4-flash"
SANDBOX_MODES = ("auto", "on", "off")
"""``--sandbox``'s values: the sandbox's ``SandboxMode`` (tests/dsh_stdio/test_config.py holds
them equal), spelled here so that reading flags does not load the sandbox's code."""

T = TypeVar("T")

Action = Literal["chat", "sessions", "show", "undo", "changes"]
"""What this run does: talk to the model, list sessions, print one, undo its last change
(``--undo``), or print what its turns changed (``--changes``)."""


class StartupError(HarnessError):
    """dsh cannot start: a bad flag or setting, no key, an unusable home or session log."""

    def __init__(self, message: str, code: Code = STARTUP) -> None:
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
    """From the environment only; kept out of ``repr`` so it cannot leak into a message.
    Empty for the actions that need no model (``--sessions``, ``--show``)."""
    max_steps: int = DEFAULT_MAX_STEPS
    """Model requests one turn may make."""
    allow: frozenset[Grant] = frozenset()
    """What ``--allow`` grants without asking."""
    tools: bool = True
    """False with ``--no-tools``: no tools are offered to the model."""
    sandbox: SandboxMode = "auto"
    """Whether ``bash`` runs under bubblewrap."""
    system: str | None = None
    """``-s``: replaces the first part of the system prompt."""
    json: bool = False
    """``--json``: stdout is one JSON object per line."""
    action: Action = "chat"
    show: str | None = None
    """The session ``--show`` prints: an id, or ``last``."""
    all_directories: bool = False
    """``--sessions --all``: every working directory's sessions."""
    quiet: bool = False
    """``--quiet``: no usage line after a turn, no session id when the run ends."""
    context_window: int | None = None
    """``--context-window``: tokens a request may hold; None: the model's own, if known."""
    auto_compact: bool = True
    """False with ``--no-auto-compact``."""
    thinking: bool | None = None
    """``--thinking on|off``; None: the model's default."""
    reasoning_effort: str | None = None
    """``--reasoning-effort``: sent as it is; None sends none."""
    servers: tuple[ServerSpec, ...] = ()
    """The MCP servers ``$DSH_HOME/config.toml`` configures (read for a chat only)."""
    allow_private_addresses: bool = False
    """``[web] allow_private_addresses``: ``web_fetch`` may reach this machine and private
    networks (never the cloud's metadata endpoints)."""
    search_base_url: str | None = None
    """Where ``web_search`` goes: ``DEEPSEEK_SEARCH_BASE_URL``, else ``[web]
    search_base_url``; None: DeepSeek's own when the base URL is DeepSeek's, else no search."""
    checkpoints: bool = True
    """Checkpoints before a turn's changes, and undo (SPEC 14); False with
    ``--no-checkpoints`` or ``checkpoints = false`` in ``config.toml``."""
    target: str | None = None
    """The session ``--undo`` or ``--changes`` is about: an id, or ``last`` (the newest here)."""
    plain: bool = False
    """``--plain``: answers shown as they came, no Markdown rendering (SPEC 17)."""
    notify: Notify = "bell"
    """``notify`` in ``config.toml``: how the REPL calls the person back (SPEC 17)."""
    max_cost: float | None = None
    """``--max-cost``: US dollars the session may spend; None: no limit (SPEC 15)."""
    prices: tuple[tuple[str, Prices], ...] = ()
    """``[models.NAME]`` in ``config.toml``: prices that replace or add to DeepSeek's."""

    def price(self, model: str) -> Prices | None:
        """The prices of ``model``, the file's first; None when none are known."""
        from dsh_core.model.prices import price_of  # at the first usage line, not at start

        return price_of(model, dict(self.prices))


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
        "dsh --demo",
    )
    parser.add_argument("question", nargs="*", help="ask one question and exit (one-shot mode)")
    parser.add_argument("--base-url", metavar="URL", help="API base URL [DEEPSEEK_BASE_URL]")
    parser.add_argument("-m", "--model", metavar="NAME", help="model name [DSH_MODEL]")
    parser.add_argument("--home", metavar="DIR", help="sessions and history [DSH_HOME, ~/.dsh]")
    parser.add_argument("--max-tokens", metavar="N", help="output token limit [DSH_MAX_TOKENS]")
    parser.add_argument(
        "--max-steps",
        metavar="N",
        help=f"model requests per turn (default {DEFAULT_MAX_STEPS}) [DSH_MAX_STEPS]",
    )
    parser.add_argument(
        "--max-cost",
        metavar="USD",
        help="stop a turn before the request that would take the session's cost past this "
        "many US dollars [DSH_MAX_COST]",
    )
    parser.add_argument(
        "--timeout",
        metavar="SECONDS",
        help="wait this long for a response and between stream events "
        "(default 60 s for the response, 120 s between events) [DSH_TIMEOUT]",
    )
    parser.add_argument(
        "-s", "--system", metavar="TEXT", help="replace the first part of the system prompt"
    )
    parser.add_argument(
        "--context-window",
        metavar="N",
        help="tokens a request may hold (default: the model's known window; for other models "
        "the server's refusal decides) [DSH_CONTEXT_WINDOW]",
    )
    parser.add_argument(
        "--no-auto-compact",
        action="store_true",
        help="never compact the conversation on its own (/compact still does)",
    )
    parser.add_argument(
        "--thinking", metavar="on|off", help="thinking mode (default: the model's) [DSH_THINKING]"
    )
    parser.add_argument(
        "--reasoning-effort", metavar="LEVEL", help="sent as reasoning_effort (low, high, ...)"
    )
    parser.add_argument(
        "--allow",
        action="append",
        metavar="WHAT",
        help="let tools run without asking: read (outside this directory), write, shell, "
        "all (those three), network (for sandboxed commands), mcp (every MCP server's tools), "
        "mcp:NAME (one server's); comma-separated, repeatable",
    )
    parser.add_argument("--no-tools", action="store_true", help="offer the model no tools")
    parser.add_argument(
        "--plain",
        action="store_true",
        help="show answers as they came, without rendering their Markdown on a colour terminal",
    )
    parser.add_argument(
        "--sandbox",
        metavar="MODE",
        help="run bash under bubblewrap: auto (when it works), on, off [DSH_SANDBOX]",
    )
    resume = parser.add_mutually_exclusive_group()
    resume.add_argument(
        "-c",
        "--continue",
        dest="continue_session",
        action="store_true",
        help="resume the newest session of this directory",
    )
    resume.add_argument("-r", "--resume", metavar="ID", help="resume the session with this id")
    parser.add_argument(
        "--show-reasoning", action="store_true", help="print reasoning on a pipe (to stderr)"
    )
    parser.add_argument(
        "--json", action="store_true", help="stdout: one JSON object per event (pipe, one-shot)"
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no usage line after each turn, no session id at the end",
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument(
        "--sessions", action="store_true", help="list this directory's sessions, newest first"
    )
    what.add_argument("--show", metavar="ID", help="print a session as a transcript (last: newest)")
    what.add_argument(
        "--undo",
        metavar="ID",
        nargs="?",
        const="last",
        help="undo the last turn's changes to files in a session (default: the newest here)",
    )
    what.add_argument(
        "--changes",
        metavar="ID",
        nargs="?",
        const="last",
        help="print the files each turn of a session changed, with a diff (default: the newest)",
    )
    parser.add_argument(
        "--no-checkpoints",
        action="store_true",
        help="take no checkpoints before a turn changes files: no undo (config: checkpoints)",
    )
    parser.add_argument(
        "--all",
        dest="all_directories",
        action="store_true",
        help="with --sessions: every directory",
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help="run the offline demo against the bundled stub server (no key, no network)",
    )
    parser.add_argument("--version", action="version", version=f"dsh {_version()}")
    return parser


def _version() -> str:
    from dsh_core import __version__

    return __version__


def _setting(
    flag: str | None,
    flag_name: str,
    env: Mapping[str, str],
    variable: str,
    read: Callable[[str | None, str], T],
) -> T:
    """A setting read from its flag when given, else from the environment (SPEC section 2)."""
    if flag is not None:
        return read(flag, flag_name)
    return read(env.get(variable), variable)


def _positive(text: str | None, source: str) -> int | None:
    if text is None or text.strip() == "":
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0  # reported below, outside the except: int()'s complaint would repeat ours
    if value <= 0:
        raise StartupError(f"{source} must be a positive integer, not {text!r}")
    return value


_EFFORT = re.compile(r"[a-z][a-z_-]{0,31}")
"""What a reasoning effort may look like: a word the server knows (it judges the word)."""


def _on_off(text: str | None, source: str) -> bool | None:
    if text is None or text.strip() == "":
        return None
    value = text.strip().lower()
    if value not in ("on", "off"):
        raise StartupError(f"{source} must be on or off, not {text!r}")
    return value == "on"


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


def _dollars(text: str | None, source: str) -> float | None:
    if text is None or text.strip() == "":
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise StartupError(f"{source} must be a number of US dollars, 0 or more, not {text!r}")
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

    api_key = env.get(API_KEY_VARIABLE, "").strip()
    hide(api_key)  # first: a message about a bad base URL may quote the key in it
    if args.base_url is not None:
        base_url = _base_url(args.base_url, "--base-url")
    elif env.get("DEEPSEEK_BASE_URL"):
        base_url = _base_url(env["DEEPSEEK_BASE_URL"], "DEEPSEEK_BASE_URL")
    else:
        base_url = DEFAULT_BASE_URL

    max_tokens = _setting(args.max_tokens, "--max-tokens", env, "DSH_MAX_TOKENS", _positive)
    timeout = _setting(args.timeout, "--timeout", env, "DSH_TIMEOUT", _timeout)
    max_cost = _setting(args.max_cost, "--max-cost", env, "DSH_MAX_COST", _dollars)

    model = args.model or env.get("DSH_MODEL") or DEFAULT_MODEL
    # Absolute: a resumed session runs in the directory it was started in (dsh changes to it).
    home = Path(args.home or env.get("DSH_HOME") or Path.home() / ".dsh").expanduser().absolute()
    max_steps = _setting(args.max_steps, "--max-steps", env, "DSH_MAX_STEPS", _positive)
    window = _setting(args.context_window, "--context-window", env, "DSH_CONTEXT_WINDOW", _positive)
    thinking = _setting(args.thinking, "--thinking", env, "DSH_THINKING", _on_off)
    effort = args.reasoning_effort
    if effort is not None and not _EFFORT.fullmatch(effort):
        raise StartupError(f"--reasoning-effort takes one word (low, medium, high), not {effort!r}")
    if args.sandbox is not None:
        sandbox = _sandbox(args.sandbox, "--sandbox")
    else:
        sandbox = _sandbox(env.get("DSH_SANDBOX") or "auto", "DSH_SANDBOX")
    if args.json and args.show_reasoning:
        raise StartupError(
            "--json and --show-reasoning cannot be used together: with --json, reasoning is "
            "in the output as reasoning/delta events"
        )
    if args.all_directories and not args.sessions:
        raise StartupError("--all only goes with --sessions (see dsh --help)")
    action: Action = "chat"
    flag = ""
    for name, value in (
        ("sessions", args.sessions or None),
        ("show", args.show),
        ("undo", args.undo),
        ("changes", args.changes),
    ):
        if value is not None:
            action, flag = name, f"--{name}"  # type: ignore[assignment]
    if action != "chat" and (args.question or args.json):
        raise StartupError(f"{flag} takes no question and no --json (see dsh --help)")

    # A server on this machine or a private network is the user's own: it may need no key.
    if not api_key and action == "chat" and not is_local(base_url):
        raise StartupError(
            f"{API_KEY_VARIABLE} is not set: export your DeepSeek API key, "
            "or try the offline demo: dsh --demo",
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
        max_steps=max_steps or DEFAULT_MAX_STEPS,
        allow=_grants(args.allow or []),
        tools=not args.no_tools,
        sandbox=sandbox,
        system=args.system,
        json=args.json,
        action=action,
        show=args.show,
        all_directories=args.all_directories,
        quiet=args.quiet,
        context_window=window,
        auto_compact=not args.no_auto_compact,
        thinking=thinking,
        reasoning_effort=effort,
        checkpoints=not args.no_checkpoints,
        target=args.undo if action == "undo" else args.changes if action == "changes" else None,
        plain=args.plain,
        max_cost=max_cost,
    )


def with_servers(config: Config, environ: Mapping[str, str] | None = None) -> Config:
    """``config`` with the MCP servers of ``$DSH_HOME/config.toml``; ``--allow mcp:NAME`` must
    name one of them. Raises :class:`~.config_file.ConfigFileError` for a bad file.

    Its ``[web]`` settings too; ``DEEPSEEK_SEARCH_BASE_URL`` beats the file's
    ``search_base_url``."""
    from .config_file import read_settings

    environ = os.environ if environ is None else environ
    settings = read_settings(config.home, environ)
    servers, web = settings.servers, settings.web
    search = environ.get(SEARCH_URL_VARIABLE, "").strip().rstrip("/") or web.search_base_url
    known = [server.name for server in servers]
    for grant in sorted(config.allow):
        if grant.startswith("mcp:") and grant[4:] not in known:
            raise StartupError(
                f"--allow {grant}: no MCP server {grant[4:]!r} in {config.home}/config.toml "
                f"(configured: {', '.join(known) or 'none'})"
            )
    prices = settings.prices
    config = dataclasses.replace(config, prices=prices)
    if config.max_cost is not None and config.price(config.model) is None:
        raise StartupError(
            f"--max-cost needs the prices of model {config.model}, and dsh knows none: give them "
            f"in {config.home}/config.toml [models.{config.model}]"
        )
    return dataclasses.replace(
        config,
        servers=servers,
        allow_private_addresses=web.allow_private_addresses,
        search_base_url=search,
        checkpoints=config.checkpoints and settings.checkpoints,
        notify=settings.notify,
    )


def _grants(values: Sequence[str]) -> frozenset[Grant]:
    grants: set[Grant] = set()
    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    for name in names:
        if name == "all":
            grants |= TOOL_GRANTS
        elif name in ALL_GRANTS or (name.startswith("mcp:") and SERVER_NAME.fullmatch(name[4:])):
            grants.add(name)  # the server's name is checked against the file (with_servers)
        else:
            choices = ", ".join(sorted(ALL_GRANTS)) + ", all, mcp:NAME"
            raise StartupError(f"--allow takes {choices}; not {name!r}")
    return frozenset(grants)


def _sandbox(text: str, source: str) -> SandboxMode:
    value = text.strip().lower()
    if value not in SANDBOX_MODES:
        raise StartupError(f"{source} must be auto, on or off, not {text!r}")
    return value  # type: ignore[return-value]
