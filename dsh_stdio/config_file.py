"""``$DSH_HOME/config.toml``: the user's own settings file (SPEC 13), read with ``tomllib``.

    notify = "bell"                      # when a question waits or a long turn ends:
                                         # "bell", "osc9" (a notification) or "off"
    checkpoints = true                   # false: no checkpoints, no undo (SPEC 14)

    [mcp.servers.files]                  # a server run as a command, spoken to on stdio
    command = "uvx"
    args = ["mcp-server-filesystem", "/home/ann/notes"]
    env = { LOG_LEVEL = "warn" }
    cwd = "~/notes"                      # default: your home directory
    startup_timeout_s = 10
    tool_timeout_s = 120                 # one call's answer, at most; then an Error: result
    tools = ["read_file", "search"]      # only these of its tools are offered (default: all)

    [mcp.servers.tracker]                # a server at a URL (streamable HTTP)
    url = "https://mcp.example.com/mcp"
    headers = { Authorization = "Bearer ${TRACKER_TOKEN}" }

    [web]                                # web_fetch and web_search (SPEC 16)
    allow_private_addresses = true       # web_fetch may reach this machine and private networks
    search_base_url = "https://gateway.example.com/anthropic/v1"   # where web_search goes

    [models.deepseek-v4-pro]             # prices, US dollars per million tokens (SPEC 15),
    input_cache_hit = 0.022              # here DeepSeek's off-peak ones; a key left out keeps
    input_cache_miss = 0.66              # DeepSeek's published (peak) price; a model dsh has
    output = 1.98                        # no price for needs all three

Keys outside a table (``notify``, ``checkpoints``) come before the first one, as TOML reads
them; ``checkpoints = false`` is ``--no-checkpoints``.

Only this file starts processes: nothing in a project (a ``.dsh/config.toml`` the model could
have written) is read for it. A file that is not what is described here is a startup failure
whose message names the file, the line and the key (:class:`ConfigFileError`); a missing file
is no servers. ``${VAR}`` in ``env``, ``headers`` and ``url`` takes the variable's value from
dsh's environment, and a variable that is not set is an error, not an empty string.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh_core.errors import STARTUP, HarnessError
from dsh_core.extensions.mcp.spec import (
    DEFAULT_STARTUP_TIMEOUT_S,
    DEFAULT_TOOL_TIMEOUT_S,
    SERVER_NAME,
    ServerSpec,
)

from .terminal.bell import NOTIFY_WAYS, Notify

if TYPE_CHECKING:
    from dsh_core.model.prices import Prices

__all__ = [
    "CONFIG_FILE",
    "ConfigFileError",
    "FileSettings",
    "WebSettings",
    "read_config_file",
    "read_settings",
]

CONFIG_FILE = "config.toml"

_SERVER_KEYS = (
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "startup_timeout_s",
    "tool_timeout_s",
    "tools",
)
_WEB_KEYS = ("allow_private_addresses", "search_base_url")
_TOP_KEYS = ("checkpoints", "mcp", "models", "notify", "web")
"""The file's top-level keys and tables."""


@dataclass(frozen=True, slots=True)
class WebSettings:
    """``[web]``: what ``web_fetch`` may reach, and where ``web_search`` goes."""

    allow_private_addresses: bool = False
    """``web_fetch`` may reach loopback, private and link-local addresses (never the cloud's
    metadata endpoints): a documentation server on this machine, a test's server."""
    search_base_url: str | None = None
    """An Anthropic-compatible Messages endpoint for ``web_search`` (``/messages`` is added)."""


@dataclass(frozen=True, slots=True)
class FileSettings:
    """What ``config.toml`` sets."""

    servers: tuple[ServerSpec, ...] = ()
    checkpoints: bool = True
    """``checkpoints = false``: no checkpoints, no undo (as ``--no-checkpoints``)."""
    web: WebSettings = WebSettings()
    notify: Notify = "bell"
    """How dsh calls the person back (``dsh_stdio.terminal.bell``)."""
    prices: tuple[tuple[str, Prices], ...] = ()
    """``[models.NAME]``: each model's prices, where the file gives them."""


_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ConfigFileError(HarnessError):
    """``$DSH_HOME/config.toml`` cannot be used: its message names the file, line and key."""

    def __init__(self, message: str) -> None:
        super().__init__(message, STARTUP)


def read_config_file(
    home: Path, environ: Mapping[str, str] | None = None
) -> tuple[ServerSpec, ...]:
    """The MCP servers ``home/config.toml`` configures; none when there is no such file."""
    reader = _load(home / CONFIG_FILE, environ)
    return reader.servers() if reader is not None else ()


def read_settings(home: Path, environ: Mapping[str, str] | None = None) -> FileSettings:
    """Everything ``home/config.toml`` sets; the defaults when there is no such file."""
    reader = _load(home / CONFIG_FILE, environ)
    if reader is None:
        return FileSettings()
    checkpoints = reader.data.get("checkpoints", True)
    if not isinstance(checkpoints, bool):
        raise reader.fail("checkpoints", "must be true or false")
    notify = reader.data.get("notify", "bell")
    if notify not in NOTIFY_WAYS:
        raise reader.fail("notify", f"must be one of {', '.join(map(repr, NOTIFY_WAYS))}")
    return FileSettings(reader.servers(), checkpoints, reader.web(), notify, reader.prices())


def _load(path: Path, environ: Mapping[str, str] | None) -> _Reader | None:
    """The parsed file, ready to read; None when there is none. ConfigFileError when it is not
    UTF-8 TOML, naming the line and key."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigFileError(f"cannot read {path}") from exc
    import tomllib  # only when there is a file

    problem: str | None = None
    text = ""
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError as exc:
        problem = f"{path} is not UTF-8 text (byte {exc.start})"
    except tomllib.TOMLDecodeError as exc:
        # tomllib says where, "(at line 3, column 9)"; the key on that line says what.
        line = re.search(r"at line (\d+)", str(exc))
        key = _key_on_line(text, int(line.group(1))) if line else None
        problem = f"{path}: {exc}" + (f", key {key}" if key else "")
    if problem is not None:
        # Raised out here: inside the except, the parser's own words would follow ours again.
        raise ConfigFileError(problem)
    reader = _Reader(path, text, os.environ if environ is None else environ, data)
    for key in data:
        if key not in _TOP_KEYS:
            raise reader.fail(
                key,
                "unknown key (this dsh reads notify, checkpoints, [mcp.servers.NAME], "
                "[models.NAME] and [web])",
            )
    return reader


class _Reader:
    """Checks the parsed file, naming the line of any key it refuses."""

    def __init__(
        self, path: Path, text: str, environ: Mapping[str, str], data: dict[str, Any]
    ) -> None:
        self.path = path
        self.lines = _key_lines(text)
        self.environ = environ
        self.data = data

    def fail(self, key: str, problem: str) -> ConfigFileError:
        # The key's own line, else its table's (a value inside an inline table has none), else
        # the first line below it (a table only ever named in [a.b] headers).
        parts = key.split(".")
        line = next(
            (
                self.lines[".".join(parts[:n])]
                for n in range(len(parts), 0, -1)
                if ".".join(parts[:n]) in self.lines
            ),
            min((n for k, n in self.lines.items() if k.startswith(key + ".")), default=None),
        )
        where = f", line {line}" if line is not None else ""
        return ConfigFileError(f"{self.path}{where}: {key}: {problem}")

    def web(self) -> WebSettings:
        web = self.table(self.data.get("web", {}), "web")
        for key in web:
            if key not in _WEB_KEYS:
                raise self.fail(f"web.{key}", f"unknown key; [web] takes {', '.join(_WEB_KEYS)}")
        allow = web.get("allow_private_addresses", False)
        if not isinstance(allow, bool):
            raise self.fail("web.allow_private_addresses", "must be true or false")
        url = self.string(web, "web", "search_base_url")
        if url is not None:
            url = self.expand(url, "web.search_base_url")
            if not re.match(r"https?://", url):
                raise self.fail("web.search_base_url", "must be an http:// or https:// URL")
        return WebSettings(allow, url.rstrip("/") if url else None)

    def prices(self) -> tuple[tuple[str, Prices], ...]:
        """``[models.NAME]``: a known model's prices with the keys given replaced; a model with
        no known price must give all three."""
        models = self.table(self.data.get("models", {}), "models")
        if not models:
            return ()
        from dsh_core.model.prices import PRICE_KEYS, Prices, price_of  # only for a [models]

        keys = ", ".join(PRICE_KEYS)
        priced: list[tuple[str, Prices]] = []
        for name, value in models.items():
            prefix = f"models.{name}"
            table = self.table(value, prefix)
            known = price_of(name)
            given: dict[str, float] = {}
            for key in table:
                if key not in PRICE_KEYS:
                    raise self.fail(f"{prefix}.{key}", f"unknown key; a model takes {keys}")
                number = table[key]
                if (
                    not isinstance(number, int | float)
                    or isinstance(number, bool)
                    or not (math.isfinite(number) and number >= 0)
                ):
                    raise self.fail(
                        f"{prefix}.{key}", "must be a number: US dollars per million tokens"
                    )
                given[PRICE_KEYS[key]] = float(number)
            missing = [key for key, field in PRICE_KEYS.items() if field not in given]
            if known is None and missing:
                raise self.fail(
                    f"{prefix}.{missing[0]}",
                    f"missing: dsh knows no price for {name}, so give {keys}",
                )
            if known is not None:
                given = {
                    "cache_hit": known.cache_hit,
                    "cache_miss": known.cache_miss,
                    "output": known.output,
                    **given,
                }
            priced.append((name, Prices(**given)))
        return tuple(priced)

    def servers(self) -> tuple[ServerSpec, ...]:
        mcp = self.table(self.data.get("mcp", {}), "mcp")
        for key in mcp:
            if key != "servers":
                raise self.fail(f"mcp.{key}", "unknown key (did you mean mcp.servers?)")
        servers = self.table(mcp.get("servers", {}), "mcp.servers")
        return tuple(self.server(name, value) for name, value in servers.items())

    def server(self, name: str, value: object) -> ServerSpec:
        prefix = f"mcp.servers.{name}"
        if not SERVER_NAME.fullmatch(name):
            raise self.fail(prefix, "a server's name is 1-32 of A-Z a-z 0-9 _ -")
        table = self.table(value, prefix)
        for key in table:
            if key not in _SERVER_KEYS:
                raise self.fail(f"{prefix}.{key}", f"unknown key; a server takes {_SERVER_KEYS}")
        command = self.string(table, prefix, "command")
        url = self.string(table, prefix, "url")
        if (command is None) == (url is None):
            raise self.fail(prefix, "give either command (run it) or url (connect to it)")
        args = table.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise self.fail(f"{prefix}.args", "must be a list of strings")
        if command is not None and "/" in command and not os.path.isabs(command):
            raise self.fail(f"{prefix}.command", "a path must be absolute (or give a name)")
        cwd = self.string(table, prefix, "cwd")
        timeout = self.seconds(table, prefix, "startup_timeout_s", DEFAULT_STARTUP_TIMEOUT_S)
        tool_timeout = self.seconds(table, prefix, "tool_timeout_s", DEFAULT_TOOL_TIMEOUT_S)
        tools = table.get("tools")
        if tools is not None and (
            not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools)
        ):
            raise self.fail(f"{prefix}.tools", "must be a list of the server's tool names")
        if url is not None:
            url = self.expand(url, f"{prefix}.url")
            if not re.match(r"https?://", url):
                raise self.fail(f"{prefix}.url", "must be an http:// or https:// URL")
        return ServerSpec(
            name=name,
            command=command,
            args=tuple(args),
            env=self.strings(table, prefix, "env"),
            cwd=os.path.expanduser(cwd) if cwd is not None else None,
            url=url,
            headers=self.strings(table, prefix, "headers"),
            startup_timeout_s=timeout,
            tool_timeout_s=tool_timeout,
            tools=tuple(tools) if tools is not None else None,
        )

    def seconds(self, table: dict[str, Any], prefix: str, key: str, default: float) -> float:
        value = table.get(key, default)
        if (
            not isinstance(value, int | float)
            or isinstance(value, bool)
            or not (math.isfinite(value) and value > 0)
        ):
            raise self.fail(f"{prefix}.{key}", "must be a positive number of seconds")
        return float(value)

    def table(self, value: object, key: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(key, "must be a table")
        return value

    def string(self, table: dict[str, Any], prefix: str, key: str) -> str | None:
        value = table.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise self.fail(f"{prefix}.{key}", "must be a non-empty string")
        return value

    def strings(self, table: dict[str, Any], prefix: str, key: str) -> dict[str, str]:
        """A table of strings (``env``, ``headers``), ``${VAR}`` expanded."""
        value = self.table(table.get(key, {}), f"{prefix}.{key}")
        expanded: dict[str, str] = {}
        for name, item in value.items():
            if not isinstance(item, str):
                raise self.fail(f"{prefix}.{key}.{name}", "must be a string")
            expanded[name] = self.expand(item, f"{prefix}.{key}.{name}")
        return expanded

    def expand(self, text: str, key: str) -> str:
        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in self.environ:
                raise self.fail(key, f"${{{name}}} is not set in the environment")
            return self.environ[name]

        return _VARIABLE.sub(value, text)


# Where each key is: tomllib gives values, not lines.

_HEADER = re.compile(r"\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")
_ASSIGNMENT = re.compile(
    r"""\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)


def _dotted(key: str) -> str:
    """``mcp . "my server"`` as ``mcp.my server``."""
    parts = re.findall(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""", key)
    return ".".join(part.strip("\"'") for part in parts)


def _keys(text: str) -> Iterator[tuple[int, str]]:
    """Each table header and key assignment: its line (from 1) and its dotted name.

    Good enough to point at a line: it skips the inside of multi-line strings, and reads only
    lines that begin a header or an assignment.
    """
    table = ""
    in_string = False
    for number, line in enumerate(text.splitlines(), start=1):
        if in_string:
            in_string = line.count('"""') % 2 == 0 and line.count("'''") % 2 == 0
            continue
        if (header := _HEADER.match(line)) is not None:
            table = _dotted(header.group(1))
            yield number, table
        elif (assignment := _ASSIGNMENT.match(line)) is not None:
            key = _dotted(assignment.group(1))
            yield number, f"{table}.{key}" if table else key
        in_string = (line.count('"""') % 2 == 1) or (line.count("'''") % 2 == 1)


def _key_lines(text: str) -> dict[str, int]:
    """The line where each table and key is first written, by its dotted name."""
    lines: dict[str, int] = {}
    for number, key in _keys(text):
        lines.setdefault(key, number)
    return lines


def _key_on_line(text: str, number: int) -> str | None:
    return next((key for line, key in _keys(text) if line == number), None)
