"""``$DSH_HOME/config.toml``: what it may say, and a refusal that names file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_core.chain import error_chain
from dsh_core.extensions.mcp import ServerSpec
from dsh_stdio.config import StartupError, parse_config, with_servers
from dsh_stdio.config_file import ConfigFileError, read_config_file

GOOD = """\
# two servers
[mcp.servers.files]
command = "uvx"
args = ["mcp-server-filesystem", "/srv"]
env = { LEVEL = "warn", TOKEN = "${FILES_TOKEN}" }
cwd = "~/notes"

[mcp.servers.tracker]
url = "https://${HOST}/mcp"
headers = { Authorization = "Bearer ${TRACKER_TOKEN}" }
startup_timeout_s = 2.5
"""
ENV = {"FILES_TOKEN": "f1", "HOST": "mcp.example.com", "TRACKER_TOKEN": "t1"}


def written(tmp_path: Path, text: str) -> Path:
    (tmp_path / "config.toml").write_text(text)
    return tmp_path


def test_no_file_is_no_servers(tmp_path: Path) -> None:
    assert read_config_file(tmp_path, {}) == ()


def test_servers_of_both_kinds_with_variables_expanded(tmp_path: Path) -> None:
    files, tracker = read_config_file(written(tmp_path, GOOD), ENV)
    assert files == ServerSpec(
        name="files",
        command="uvx",
        args=("mcp-server-filesystem", "/srv"),
        env={"LEVEL": "warn", "TOKEN": "f1"},
        cwd=str(Path("~/notes").expanduser()),
    )
    assert files.transport == "stdio"
    assert tracker.transport == "http" and tracker.url == "https://mcp.example.com/mcp"
    assert tracker.headers == {"Authorization": "Bearer t1"}
    assert tracker.startup_timeout_s == 2.5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[mcp.servers.a]\ncommand = "x"\nargs = "no"\n',
            "line 3: mcp.servers.a.args: must be a list of strings",
        ),
        (
            '[mcp.servers.a]\ncommand = "x"\nurl = "http://h"\n',
            "line 1: mcp.servers.a: give either command (run it) or url (connect to it)",
        ),
        (
            '[mcp.servers.a]\ncommand = "x"\ncomand = "y"\n',
            "line 3: mcp.servers.a.comand: unknown key; a server takes",
        ),
        (
            '[mcp.servers.a]\ncommand = "x"\nstartup_timeout_s = 0\n',
            "line 3: mcp.servers.a.startup_timeout_s: must be a positive number of seconds",
        ),
        (
            '[mcp.servers.a]\nurl = "http://h"\nheaders = { X = "${NOPE}" }\n',
            "line 3: mcp.servers.a.headers.X: ${NOPE} is not set in the environment",
        ),
        (
            '[mcp.servers.a]\ncommand = "./server"\n',
            "line 2: mcp.servers.a.command: a path must be absolute (or give a name)",
        ),
        (
            '[mcp.servers."bad name"]\ncommand = "x"\n',
            "line 1: mcp.servers.bad name: a server's name is 1-32 of A-Z a-z 0-9 _ -",
        ),
        ("[servers.a]\ncommand = 1\n", "line 1: servers: unknown key"),
        (
            '[mcp.servers.a]\ncommand = "x"\ncommand = "y"\n',
            "Cannot overwrite a value (at line 3, column 14), key mcp.servers.a.command",
        ),
    ],
)
def test_a_bad_file_names_the_line_and_the_key(tmp_path: Path, text: str, message: str) -> None:
    home = written(tmp_path, text)
    with pytest.raises(ConfigFileError) as info:
        read_config_file(home, {})
    shown = error_chain(info.value)
    assert shown.startswith(str(home / "config.toml"))
    assert message in shown
    assert shown.count(message) == 1  # the parser's words once, not again in the chain


def test_allow_names_a_configured_server(tmp_path: Path) -> None:
    home = written(tmp_path, GOOD)
    environ = {"DEEPSEEK_API_KEY": "sk-test", "DSH_HOME": str(home), **ENV}
    config = with_servers(parse_config(["--allow", "mcp:files"], environ), environ)
    assert [server.name for server in config.servers] == ["files", "tracker"]
    with pytest.raises(StartupError, match=r"no MCP server 'web' in .*\(configured: files, tr"):
        with_servers(parse_config(["--allow", "mcp:web"], environ), environ)
