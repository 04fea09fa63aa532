"""Headless runs on the real process (SPEC 15): exit status 3, the ``--json`` ``result`` line,
dollars, the context meter and ``--max-cost``.

Every run here is a child ``dsh`` against the stub over loopback. Dollars are checked against
the tokens the log recorded times DeepSeek's published prices as this file states them (not as
``dsh_core.model.prices`` does: the test must not trust the table it checks).
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from dsh_core.testing import Answer, Held, HttpError, StubServer
from tests.support import DSH, HANG_GUARD, Run, read_events, single_log, wait_until

pytestmark = pytest.mark.slow

FLASH = (0.006, 0.30, 1.20)
"""deepseek-v4-flash (billed as deepseek-flash), USD per 1M tokens at the peak rate: input cache
hit, input cache miss, output (https://api-docs.deepseek.com/quick_start/pricing, 2026-11-15)."""

RESULT_KEYS = {
    "type",
    "session",
    "outcome",
    "exit_status",
    "turns",
    "steps",
    "tokens",
    "cost_usd",
    "refused",
    "changed",
    "checkpoint",
}


def dsh(env: dict[str, str], cwd: Path, *args: str, stdin: bytes = b"") -> Run:
    """Run the real ``dsh args...`` on pipes to its end."""
    done = subprocess.run(
        [*DSH, *args], env=env, cwd=cwd, input=stdin, capture_output=True, timeout=HANG_GUARD
    )
    return Run(done.returncode, done.stdout, done.stderr, Path(env["DSH_HOME"]), 0.0)


def result_of(run: Run) -> dict[str, Any]:
    """The run's ``result`` line: there is exactly one, and it is the last line of stdout."""
    objects = [json.loads(line) for line in run.stdout.splitlines()]
    results = [value for value in objects if value.get("type") == "result"]
    assert len(results) == 1, run.stdout
    assert objects[-1] is results[0], "the result line is not the last one"
    assert set(results[0]) - {"error"} == RESULT_KEYS
    assert results[0]["exit_status"] == run.returncode
    result: dict[str, Any] = results[0]
    return result


def usages(run: Run) -> list[dict[str, Any]]:
    return run.of_type("usage")


def dollars(usage: dict[str, Any], prices: tuple[float, float, float]) -> float:
    """What one request cost: its tokens times ``prices`` (hit, miss, output per 1M)."""
    hit: int = usage["cached_tokens"]
    miss: int = usage["prompt_tokens"] - hit
    out: int = usage["completion_tokens"]
    return (hit * prices[0] + miss * prices[1] + out * prices[2]) / 1e6


def shown(amount: float) -> str:
    """An amount as the usage line writes it (``$0.001583``), read from SPEC 15's examples."""
    if amount >= 1:
        return f"${amount:,.2f}"
    return f"${amount:.4f}" if amount >= 0.01 else f"${amount:.6f}"


def write_config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


# -- exit status 3 ------------------------------------------------------------------------------


def test_a_call_refused_on_a_pipe_exits_3(dsh_env: dict[str, str], workdir: Path) -> None:
    run = dsh(dsh_env, workdir, "toolbash")
    assert run.returncode == 3, run.stderr
    assert 'tool "bash" needs approval and stdin is not a terminal' in run.stderr
    assert [d["outcome"] for d in run.of_type("approval/decided")] == ["unavailable"]


def test_a_refusal_in_pipe_mode_exits_3(dsh_env: dict[str, str], workdir: Path) -> None:
    run = dsh(dsh_env, workdir, stdin=b"hello\ntoolbash\n")
    assert run.returncode == 3, run.stderr
    assert [end["kind"] for end in run.turn_ends()] == ["completed", "completed"]


def test_a_failed_turn_outranks_a_refusal(
    dsh_env: dict[str, str], workdir: Path, stub: StubServer
) -> None:
    stub.enqueue(HttpError(400, "invalid request: bad field"))
    run = dsh(dsh_env, workdir, stdin=b"hello\ntoolbash\n")
    assert run.returncode == 1, run.stderr
    assert [end["kind"] for end in run.turn_ends()] == ["error", "completed"]


def test_a_call_granted_by_flag_is_no_refusal(dsh_env: dict[str, str], workdir: Path) -> None:
    run = dsh(dsh_env, workdir, "--allow", "shell", "toolbash")
    assert run.returncode == 0, run.stderr


# -- the result line ----------------------------------------------------------------------------


OUTCOMES = [
    # (name, arguments, behaviours queued, stdin, outcome, exit status)
    ("completed", ["hello"], [], b"", "completed", 0),
    ("error", ["hello"], [HttpError(400, "invalid request: bad field")], b"", "error", 1),
    ("rejected", ["hello"], [], b"x" * (300 * 1024), "rejected", 1),
    ("max-tokens", ["hello"], [Answer("cut sh", finish_reason="length")], b"", "max-tokens", 0),
    ("max-steps", ["--max-steps", "1", "toolread"], [], b"", "max-steps", 0),
    ("max-cost", ["--max-cost", "0", "hello"], [], b"", "max-cost", 0),
    ("refused", ["toolbash"], [], b"", "refused", 3),
]


@pytest.mark.parametrize(
    ("arguments", "behaviours", "stdin", "outcome", "status"),
    [case[1:] for case in OUTCOMES],
    ids=[case[0] for case in OUTCOMES],
)
def test_the_result_line_ends_every_outcome(
    dsh_env: dict[str, str],
    workdir: Path,
    stub: StubServer,
    arguments: list[str],
    behaviours: list[Any],
    stdin: bytes,
    outcome: str,
    status: int,
) -> None:
    stub.enqueue(*behaviours)
    run = dsh(dsh_env, workdir, "--json", *arguments, stdin=stdin)
    result = result_of(run)
    assert (result["outcome"], run.returncode) == (outcome, status), run.stderr
    assert result["session"] == single_log(run.home).parent.name
    assert result["turns"] == 1
    assert result["steps"] == len(run.of_type("assistant/message"))
    recorded = usages(run)
    assert result["tokens"] == {
        "in": sum(u["prompt_tokens"] for u in recorded),
        "cached": sum(u["cached_tokens"] for u in recorded),
        "out": sum(u["completion_tokens"] for u in recorded),
    }
    assert result["cost_usd"] == pytest.approx(sum(dollars(u, FLASH) for u in recorded))
    refused = result["refused"]
    assert [r["tool"] for r in refused] == (["bash"] if outcome == "refused" else [])
    if outcome == "error":
        assert result["error"]["code"] == "INVALID_REQUEST"


def test_the_result_line_names_what_changed_and_the_checkpoint(
    dsh_env: dict[str, str], workdir: Path
) -> None:
    run = dsh(dsh_env, workdir, "--json", "--allow", "write", "tooledit")
    result = result_of(run)
    assert (result["outcome"], result["changed"]) == ("completed", ["demo.txt"])
    (checkpoint,) = run.of_type("checkpoint")
    assert result["checkpoint"] == checkpoint["id"]


def test_sigterm_still_ends_with_the_result_line(
    dsh_env: dict[str, str], workdir: Path, stub: StubServer
) -> None:
    gate = threading.Event()
    stub.enqueue(Held(gate, Answer("too late")))
    before = len(stub.requests)
    child = subprocess.Popen(
        [*DSH, "--json", "hello"],
        env=dsh_env,
        cwd=workdir,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: len(stub.requests) > before, "the request at the stub")
        child.send_signal(signal.SIGTERM)
        stdout, stderr = child.communicate(timeout=HANG_GUARD)
    finally:
        gate.set()
        if child.poll() is None:
            child.kill()
    run = Run(child.returncode, stdout, stderr, Path(dsh_env["DSH_HOME"]), 0.0)
    assert run.returncode == 143, run.stderr
    result = result_of(run)
    assert result["outcome"] == "aborted"
    assert run.turn_ends() == [{"kind": "aborted", "reason": "shutdown"}]


@pytest.mark.parametrize(
    ("key", "said", "code"),
    [
        (None, "DEEPSEEK_API_KEY is not set", "MISSING_CREDENTIAL"),
        ("sk-two words", "The DeepSeek API key contains spaces", "MISSING_CREDENTIAL"),
    ],
    ids=["no key", "a key that cannot be sent"],
)
def test_a_missing_key_still_ends_with_the_result_line(
    dsh_env: dict[str, str], workdir: Path, key: str | None, said: str, code: str
) -> None:
    env = {k: v for k, v in dsh_env.items() if k != "DEEPSEEK_API_KEY"}
    env["DEEPSEEK_BASE_URL"] = "https://api.deepseek.com"  # not loopback: a key is needed
    if key is not None:
        env["DEEPSEEK_API_KEY"] = key
    run = dsh(env, workdir, "--json", "hello")
    assert run.returncode == 2
    assert run.stderr.startswith(f"dsh: startup failed: {said}")
    result = result_of(run)
    assert (result["outcome"], result["session"]) == ("startup-failed", None)
    assert result["error"]["code"] == code


# -- money --------------------------------------------------------------------------------------


def test_dollars_are_tokens_times_prices(dsh_env: dict[str, str], workdir: Path) -> None:
    run = dsh(dsh_env, workdir, "toolread")
    assert run.returncode == 0, run.stderr
    recorded = usages(run)
    assert len(recorded) == 2 and recorded[1]["cached_tokens"] > 0  # the cache served some
    cost = sum(dollars(u, FLASH) for u in recorded)
    saved = sum(u["cached_tokens"] * (FLASH[1] - FLASH[0]) / 1e6 for u in recorded)
    (line,) = [line for line in run.stderr.splitlines() if line.startswith("dsh: tokens in")]
    assert f", {shown(cost)} (cache saved {shown(saved)}), session {shown(cost)}, " in line


def test_the_config_file_gives_a_model_its_prices(
    dsh_env: dict[str, str], workdir: Path, home: Path
) -> None:
    prices = (1.5, 20.0, 40.0)
    write_config(
        home,
        "[models.qwen3-32b]\ninput_cache_hit = 1.5\ninput_cache_miss = 20\noutput = 40\n",
    )
    run = dsh(dsh_env, workdir, "--json", "--model", "qwen3-32b", "hello")
    result = result_of(run)
    assert result["cost_usd"] == pytest.approx(sum(dollars(u, prices) for u in usages(run)))


def test_a_model_without_prices_shows_tokens_only(dsh_env: dict[str, str], workdir: Path) -> None:
    run = dsh(dsh_env, workdir, "--model", "qwen3-32b", "hello")
    assert run.returncode == 0, run.stderr
    (line,) = [line for line in run.stderr.splitlines() if line.startswith("dsh: tokens in")]
    assert "$" not in line
    json_run = dsh(dsh_env, workdir, "--json", "--model", "qwen3-32b", "hello")
    assert result_of(json_run)["cost_usd"] is None


def test_the_usage_line_shows_the_context_meter(dsh_env: dict[str, str], workdir: Path) -> None:
    run = dsh(dsh_env, workdir, "hello")
    (line,) = [line for line in run.stderr.splitlines() if line.startswith("dsh: tokens in")]
    prompt = usages(run)[0]["prompt_tokens"]
    assert prompt < 1_048_576 // 100  # the stub's prompt: under 1% of the window
    assert ", ctx 0% of 1M, " in line


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ('input_cache_hit = 0.1\ninput_cache_miss = 1\noutput = "cheap"\n', "output"),
        ("input_cache_hit = -0.1\n", "input_cache_hit"),
        ("input_cache_miss = true\n", "input_cache_miss"),
        ("input = 1\n", "input"),
    ],
    ids=["a string", "negative", "a boolean", "an unknown key"],
)
def test_a_price_that_is_not_a_number_is_a_startup_failure(
    dsh_env: dict[str, str], workdir: Path, home: Path, table: str, key: str
) -> None:
    write_config(home, f"[models.deepseek-v4-flash]\n{table}")
    run = dsh(dsh_env, workdir, "hello")
    assert run.returncode == 2
    (line,) = run.stderr.splitlines()
    assert line.startswith("dsh: startup failed: ") and "config.toml" in line
    assert f"models.deepseek-v4-flash.{key}" in line


# -- --max-cost ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "variable", "named"),
    [
        (["--max-cost", "-1"], None, "--max-cost"),
        (["--max-cost", "ten"], None, "--max-cost"),
        ([], "abc", "DSH_MAX_COST"),
        ([], "nan", "DSH_MAX_COST"),
    ],
)
def test_a_bad_cost_limit_is_a_startup_failure(
    dsh_env: dict[str, str], workdir: Path, arguments: list[str], variable: str | None, named: str
) -> None:
    env = dict(dsh_env, DSH_MAX_COST=variable) if variable is not None else dsh_env
    run = dsh(env, workdir, *arguments, "hello")
    assert run.returncode == 2
    (line,) = run.stderr.splitlines()
    assert line.startswith(f"dsh: startup failed: {named} must be a number of US dollars")


def test_no_request_is_sent_past_the_limit(
    dsh_env: dict[str, str], workdir: Path, stub: StubServer
) -> None:
    before = len(stub.served)
    run = dsh(dsh_env, workdir, "--max-cost", "0", "hello")
    assert run.returncode == 0, run.stderr
    assert len(stub.served) == before
    assert run.stdout.startswith("[turn stopped at the cost limit] the limit is $0, $0 spent, ")
    assert "(next: raise --max-cost)" in run.stdout
    (end,) = run.turn_ends()
    assert end["kind"] == "max-cost" and "the limit is $0" in end["reason"]


def test_a_resumed_session_at_its_limit_sends_nothing(
    dsh_env: dict[str, str], workdir: Path, stub: StubServer
) -> None:
    first = dsh(dsh_env, workdir, "--json", "hello")
    spent = result_of(first)["cost_usd"]
    before = len(stub.served)
    again = dsh(dsh_env, workdir, "--json", "--continue", "--max-cost", repr(spent), "hello")
    assert len(stub.served) == before
    assert result_of(again)["outcome"] == "max-cost"
    assert f"{shown(spent)} spent" in again.turn_ends()[-1]["reason"]
    # A limit above the spend lets the turn run.
    third = dsh(dsh_env, workdir, "--continue", "--max-cost", "1", "hello")
    assert (third.returncode, len(stub.served)) == (0, before + 1)


def test_the_limit_stops_a_turn_between_steps(
    dsh_env: dict[str, str], workdir: Path, home: Path, tmp_path: Path, stub: StubServer
) -> None:
    # One price for a hit and a miss: what the stub's cache served across runs cannot matter,
    # and the same requests cost the same. Measured first, in a home of its own.
    prices = "[models.deepseek-v4-flash]\ninput_cache_hit = 1\ninput_cache_miss = 1\noutput = 1\n"
    write_config(home, prices)
    write_config(tmp_path / "measuring", prices)
    measuring = dict(dsh_env, DSH_HOME=str(tmp_path / "measuring"))
    measured = dsh(measuring, workdir, "--json", "--max-steps", "3", "toolloop")
    assert result_of(measured)["outcome"] == "max-steps"
    three_steps = result_of(measured)["cost_usd"]
    before = len(stub.served)
    limit = ["--max-cost", repr(three_steps)]
    run = dsh(dsh_env, workdir, "--json", "--max-steps", "50", *limit, "toolloop")
    result = result_of(run)
    assert result["outcome"] == "max-cost", run.stderr
    served = len(stub.served) - before
    assert served == len(usages(run)) and 1 <= served <= 3
    assert result["cost_usd"] <= three_steps


def test_a_max_cost_end_is_read_back_and_an_unknown_kind_is_a_normal_end(
    dsh_env: dict[str, str], workdir: Path
) -> None:
    dsh(dsh_env, workdir, "--max-cost", "0", "hello")
    resumed = dsh(dsh_env, workdir, "--continue", "hello")
    assert resumed.returncode == 0, resumed.stderr
    log = single_log(Path(dsh_env["DSH_HOME"]))
    log.write_bytes(log.read_bytes().replace(b'"kind":"max-cost"', b'"kind":"max-future"'))
    events = read_events(log)
    assert [e["data"]["reason"]["kind"] for e in events if e["type"] == "turn/end"] == [
        "max-future",
        "completed",
    ]
    shown_log = dsh(dsh_env, workdir, "--show", "last")
    assert shown_log.returncode == 0, shown_log.stderr
    assert "[turn" not in shown_log.stdout  # no outcome line for a normal end
    again = dsh(dsh_env, workdir, "--continue", "hello")
    assert again.returncode == 0, again.stderr


def test_a_cost_limit_needs_the_models_prices(dsh_env: dict[str, str], workdir: Path) -> None:
    run = dsh(dsh_env, workdir, "--model", "qwen3-32b", "--max-cost", "1", "hello")
    assert run.returncode == 2
    (line,) = run.stderr.splitlines()
    assert line.startswith("dsh: startup failed: --max-cost needs the prices of model qwen3-32b")
    assert "[models.qwen3-32b]" in line
