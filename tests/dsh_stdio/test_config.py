"""Flags beat the environment, which beats the defaults; bad values are one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_core.chain import error_chain
from dsh_core.errors import MISSING_CREDENTIAL
from dsh_stdio.config import DEFAULT_BASE_URL, DEFAULT_MODEL, StartupError, parse_config

KEY = {"DEEPSEEK_API_KEY": "sk-test"}


def test_defaults() -> None:
    config = parse_config([], {**KEY, "HOME": "/nonexistent"})
    assert config.base_url == DEFAULT_BASE_URL
    assert config.model == DEFAULT_MODEL
    assert config.max_tokens is None
    assert config.question is None
    assert not config.continue_session and config.resume is None


def test_flag_beats_environment() -> None:
    env = {
        **KEY,
        "DEEPSEEK_BASE_URL": "http://env:1/",
        "DSH_MODEL": "env-model",
        "DSH_HOME": "/env-home",
        "DSH_MAX_TOKENS": "5",
    }
    from_env = parse_config([], env)
    assert (from_env.base_url, from_env.model, from_env.home, from_env.max_tokens) == (
        "http://env:1",
        "env-model",
        Path("/env-home"),
        5,
    )
    flags = parse_config(
        ["--base-url", "http://flag:2//", "--model", "m", "--home", "/h", "--max-tokens", "7"], env
    )
    assert (flags.base_url, flags.model, flags.home, flags.max_tokens) == (
        "http://flag:2",
        "m",
        Path("/h"),
        7,
    )


def test_question_words_are_joined() -> None:
    assert parse_config(["review", "this"], KEY).question == "review this"


def test_missing_key_names_the_variable_and_the_demo() -> None:
    with pytest.raises(StartupError) as info:
        parse_config([], {})
    assert info.value.code == MISSING_CREDENTIAL
    assert "DEEPSEEK_API_KEY" in info.value.message
    assert "dsh --demo" in info.value.message


@pytest.mark.parametrize(
    ("argv", "env", "words"),
    [
        (["--max-tokens", "abc"], {}, "--max-tokens must be a positive integer, not 'abc'"),
        (["--max-tokens", "0"], {}, "--max-tokens must be a positive integer"),
        (["--max-tokens", "\u00b2"], {}, "--max-tokens must be a positive integer"),
        ([], {"DSH_MAX_TOKENS": "-3"}, "DSH_MAX_TOKENS must be a positive integer"),
        (["--base-url", "ftp://x"], {}, "--base-url must be an http:// or https:// URL"),
        (["--bogus"], {}, "unrecognized arguments: --bogus"),
        (["--continue", "--resume", "x"], {}, "not allowed with argument"),
    ],
)
def test_bad_values_are_startup_errors(argv: list[str], env: dict[str, str], words: str) -> None:
    with pytest.raises(StartupError) as info:
        parse_config(argv, {**KEY, **env})
    assert words in info.value.message


def test_key_is_not_in_repr() -> None:
    config = parse_config([], {"DEEPSEEK_API_KEY": "sk-secret-value"})
    assert "sk-secret-value" not in repr(config)


@pytest.mark.parametrize("url", ["ftp://user:hunter2@host", "http://user:hunter2@host:99999"])
def test_base_url_password_is_not_echoed(url: str) -> None:
    with pytest.raises(StartupError) as info:
        parse_config(["--base-url", url], KEY)
    assert "hunter2" not in info.value.message
    assert "***@host" in info.value.message


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://127.0.0.1:99999", "--base-url is not a usable URL: 'http://127.0.0.1:99999'"),
        ("http://host:abc", "--base-url is not a usable URL"),
        ("http://[::1", "--base-url is not a usable URL"),
        ("http://:80", "--base-url must be an http:// or https:// URL"),
    ],
)
def test_base_url_must_name_a_host_and_a_valid_port(url: str, words: str) -> None:
    with pytest.raises(StartupError) as info:
        parse_config(["--base-url", url], KEY)
    assert words in info.value.message


def test_timeout_flag_and_environment() -> None:
    assert parse_config([], KEY).timeout is None
    assert parse_config([], {**KEY, "DSH_TIMEOUT": "2.5"}).timeout == 2.5
    assert parse_config(["--timeout", "7"], {**KEY, "DSH_TIMEOUT": "2.5"}).timeout == 7.0


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan", "inf"])
def test_bad_timeout(value: str) -> None:
    with pytest.raises(StartupError) as info:
        parse_config(["--timeout", value], KEY)
    assert info.value.message == f"--timeout must be a positive number of seconds, not {value!r}"


def test_argparse_errors_are_said_once() -> None:
    with pytest.raises(StartupError) as info:
        parse_config(["--continue", "--resume", "x"], KEY)
    assert error_chain(info.value) == (
        "argument -r/--resume: not allowed with argument -c/--continue (see dsh --help)"
    )


def test_allow_names_and_all() -> None:
    assert parse_config([], KEY).allow == frozenset()
    assert parse_config(["--allow", "all"], KEY).allow == {"read", "write", "shell"}
    both = parse_config(["--allow", "write,shell", "--allow", "network"], KEY).allow
    assert both == {"write", "shell", "network"}
    with pytest.raises(StartupError) as info:
        parse_config(["--allow", "everything"], KEY)
    assert info.value.message == (
        "--allow takes mcp, network, read, shell, web, write, all, mcp:NAME; not 'everything'"
    )
    assert parse_config(["--allow", "mcp,mcp:files"], KEY).allow == {"mcp", "mcp:files"}
    with pytest.raises(StartupError, match="not 'mcp:no good'"):
        parse_config(["--allow", "mcp:no good"], KEY)


def test_sandbox_and_steps_settings() -> None:
    assert parse_config([], KEY).sandbox == "auto"
    assert parse_config([], {**KEY, "DSH_SANDBOX": "OFF"}).sandbox == "off"
    assert parse_config(["--sandbox", "on"], {**KEY, "DSH_SANDBOX": "off"}).sandbox == "on"
    assert parse_config([], KEY).max_steps == 50
    assert parse_config(["--max-steps", "3"], {**KEY, "DSH_MAX_STEPS": "9"}).max_steps == 3
    with pytest.raises(StartupError, match="--sandbox must be auto, on or off"):
        parse_config(["--sandbox", "maybe"], KEY)
    with pytest.raises(StartupError, match="--max-steps must be a positive integer"):
        parse_config(["--max-steps", "0"], KEY)


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8000", "http://localhost:8000/v1", "http://192.168.1.20:8000/v1"]
)
def test_a_local_base_url_needs_no_key(url: str) -> None:
    config = parse_config(["--base-url", url], {})
    assert (config.base_url, config.api_key) == (url, "")


def test_quiet_and_a_home_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = parse_config(["-q", "--home", "rel"], KEY)
    assert config.quiet
    assert config.home == tmp_path / "rel"  # a resumed session may change directory
    assert not parse_config([], KEY).quiet


def test_long_session_settings_flag_beats_environment() -> None:
    env = {**KEY, "DSH_CONTEXT_WINDOW": "32768", "DSH_THINKING": "off"}
    from_env = parse_config([], env)
    assert (from_env.context_window, from_env.thinking, from_env.auto_compact) == (
        32768,
        False,
        True,
    )
    flags = parse_config(
        ["--context-window", "20000", "--thinking", "ON", "--no-auto-compact"], env
    )
    assert (flags.context_window, flags.thinking, flags.auto_compact) == (20000, True, False)
    defaults = parse_config([], KEY)
    assert (defaults.context_window, defaults.thinking, defaults.reasoning_effort) == (
        None,
        None,
        None,
    )
    assert parse_config(["--reasoning-effort", "high"], KEY).reasoning_effort == "high"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--context-window", "0"], "--context-window must be a positive integer, not '0'"),
        (["--context-window", "1M"], "--context-window must be a positive integer, not '1M'"),
        (["--thinking", "maybe"], "--thinking must be on or off, not 'maybe'"),
        (["--reasoning-effort", "very high"], "--reasoning-effort takes one word"),
    ],
)
def test_bad_long_session_settings_are_one_line(argv: list[str], said: str) -> None:
    with pytest.raises(StartupError) as info:
        parse_config(argv, KEY)
    assert said in error_chain(info.value)


def test_the_sandbox_modes_are_the_sandboxs_own() -> None:
    """config.py spells them out so that reading flags loads none of the sandbox's code."""
    from typing import get_args

    from dsh_core.trust.sandbox import SandboxMode
    from dsh_stdio.config import SANDBOX_MODES

    assert get_args(SandboxMode) == SANDBOX_MODES
