"""Error codes are a closed type: the constants, the ``Literal``, and mypy refusing a typo."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import get_args

import pytest

from dsh_core import errors
from dsh_core.errors import ErrorCode, HarnessError, LlmError, http_status_code


def test_every_code_has_its_constant_and_no_constant_is_missing_from_the_type() -> None:
    constants = {
        name: getattr(errors, name) for name in errors.__all__ if name.isupper() and name != "Code"
    }
    assert all(name == value for name, value in constants.items())
    assert set(constants.values()) == set(get_args(ErrorCode))


def test_http_status_codes_are_made_apart() -> None:
    assert http_status_code(404) == "HTTP_404"
    assert LlmError("x", http_status_code(418), status=418).code == "HTTP_418"


@pytest.mark.slow  # mypy from a cold cache checks typeshed first: seconds, once
def test_mypy_rejects_a_code_that_does_not_exist(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    mypy_api = pytest.importorskip("mypy.api")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        textwrap.dedent(
            """\
            from dsh_core.errors import HarnessError, LlmError, http_status_code

            LlmError("x", "ABORTD")
            HarnessError("x", "TIMEOUTT")
            LlmError("x", "HTTP_404")
            LlmError("x", "ABORTED")
            LlmError("x", http_status_code(404))
            HarnessError("x")
            """
        )
    )
    cache = getattr(request.config, "cache", None)  # None with -p no:cacheprovider
    cache_dir = cache.mkdir("mypy-snippets") if cache is not None else tmp_path / "cache"
    out, err, status = mypy_api.run(
        [
            str(snippet),
            "--strict",
            "--config-file=",  # not the project's: only this file, only these rules
            "--no-error-summary",
            "--hide-error-context",
            "--follow-imports=silent",
            f"--cache-dir={cache_dir}",
        ]
    )
    assert status == 1, (out, err)
    rejected = sorted(int(line.split(":")[1]) for line in out.splitlines() if ": error:" in line)
    # A typo, another, and HTTP_<status> written by hand rather than made by http_status_code.
    assert rejected == [3, 4, 5], out
    assert all('Argument 2 to "' in line for line in out.splitlines()), out


def test_the_code_a_failure_carries_is_the_one_it_was_given() -> None:
    assert HarnessError("x").code == "UNKNOWN"
    assert repr(LlmError("m", "AUTH", status=401)) == "LlmError('m', code='AUTH', status=401)"
