"""SPEC 16: ``web_fetch`` as a prompt-injected model would use it, on the real ``dsh`` process.

One attack per test: the model asks to fetch (``--allow web`` on a pipe, so nothing but the
tool's own rules stands in the way), and each must end in a clear ``Error:`` result, with the
target never reached when it is refused: the loopback page server counts every request.

- Reaching this machine or its network (SSRF): a name that resolves to 127.0.0.1, ``[::1]``,
  the decimal and octal spellings of 127.0.0.1, a redirect to the cloud's metadata address
  (refused even where private addresses are allowed), a redirect to another host.
- Other schemes: ``file://``.
- Pages that would hang or swamp dsh: a redirect loop, a 50 MB page (with and without its
  Content-Length), bytes that are not the text they claim, an unknown charset, a binary file.

The tests that need to reach the loopback page server at all allow private addresses
(``[web] allow_private_addresses = true``), as the issue says the tests must; the attacks on
address checks run without it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_core.testing import Answer, StubServer, ToolCalls
from tests.pages import PageServer
from tests.support import DSH, HANG_GUARD, assert_no_canary, child_env, read_events, single_log

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


@pytest.fixture(scope="module")
def pages() -> Iterator[PageServer]:
    with PageServer() as server:
        yield server


def fetched(
    stub: StubServer, tmp_path: Path, url: str, *, allow_private: bool = False
) -> dict[str, Any]:
    """One pipe run in which the model fetches ``url`` with ``--allow web``: its result."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    if allow_private:
        (home / "config.toml").write_text("[web]\nallow_private_addresses = true\n")
    stub.enqueue(ToolCalls((("web_fetch", json.dumps({"url": url})),)), Answer("done"))
    run = subprocess.run(
        [*DSH, "--allow", "web"],
        input=b"fetch it\n",
        capture_output=True,
        cwd=work,
        env=child_env(stub.url, home),
        timeout=HANG_GUARD * 2,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert b"Traceback" not in run.stderr
    assert_no_canary(home, run.stdout, run.stderr)
    (result,) = [e["data"] for e in read_events(single_log(home)) if e["type"] == "tool/result"]
    assert isinstance(result, dict)
    return result


def test_a_name_that_resolves_to_loopback_is_refused(
    stub: StubServer, pages: PageServer, tmp_path: Path
) -> None:
    before = len(pages.hits)
    result = fetched(stub, tmp_path, pages.url("/page", host="localhost"))
    assert result["is_error"]
    assert (
        "refused: localhost resolves to 127.0.0.1, which is a loopback address"
        in (result["content"])
    )
    assert "allow_private_addresses" in result["content"]  # the way out, for a local server
    assert len(pages.hits) == before  # nothing connected


def test_ipv6_loopback_is_refused(stub: StubServer, pages: PageServer, tmp_path: Path) -> None:
    result = fetched(stub, tmp_path, f"http://[::1]:{pages.port}/page")
    assert result["is_error"]
    assert "refused: ::1 is a loopback address" in result["content"]


@pytest.mark.parametrize("host", ["2130706433", "0177.0.0.1", "0x7f.0.0.1", "127.1"])
def test_other_spellings_of_loopback_are_refused(
    stub: StubServer, pages: PageServer, tmp_path: Path, host: str
) -> None:
    before = len(pages.hits)
    result = fetched(stub, tmp_path, pages.url("/page", host=host))
    assert result["is_error"]
    # Resolved, then refused as 127.0.0.1; or not even a URL to httpx (a leading-zero octet).
    assert "127.0.0.1, which is a loopback address" in result["content"] or (
        host.startswith("0177") and "not a URL: Invalid IPv4 address" in result["content"]
    )
    assert len(pages.hits) == before


def test_a_redirect_to_the_metadata_address_is_refused_even_where_private_ones_are_allowed(
    stub: StubServer, pages: PageServer, tmp_path: Path
) -> None:
    result = fetched(stub, tmp_path, pages.url("/to-metadata"), allow_private=True)
    assert result["is_error"]
    assert "169.254.169.254 is a cloud metadata address" in result["content"]


def test_a_redirect_to_another_host_is_named_not_followed(
    stub: StubServer, pages: PageServer, tmp_path: Path
) -> None:
    before = len(pages.hits)
    result = fetched(stub, tmp_path, pages.url("/to-other-host"), allow_private=True)
    assert result["is_error"]
    assert f"redirects to another host: http://localhost:{pages.port}/page" in result["content"]
    assert pages.hits[before:] == ["/to-other-host"]


def test_a_file_url_is_refused(stub: StubServer, tmp_path: Path) -> None:
    result = fetched(stub, tmp_path, "file:///etc/passwd")
    assert result["is_error"]
    assert "fetches http and https URLs only, not file:" in result["content"]
    assert "root:" not in result["content"]


def test_a_redirect_loop_is_named(stub: StubServer, pages: PageServer, tmp_path: Path) -> None:
    result = fetched(stub, tmp_path, pages.url("/loop-a"), allow_private=True)
    assert result["is_error"]
    assert "redirect loop: " in result["content"]
    assert "/loop-a -> " in result["content"] and "/loop-b -> " in result["content"]


@pytest.mark.parametrize("path", ["/big", "/big-chunked"])
def test_a_50_mb_page_is_refused_without_reading_it_all(
    stub: StubServer, pages: PageServer, tmp_path: Path, path: str
) -> None:
    result = fetched(stub, tmp_path, pages.url(path), allow_private=True)
    assert result["is_error"]
    assert "5 MiB web_fetch downloads" in result["content"]
    assert len(result["content"]) < 2000  # nothing of the page itself


def test_a_page_in_a_broken_encoding_is_an_error(
    stub: StubServer, pages: PageServer, tmp_path: Path
) -> None:
    result = fetched(stub, tmp_path, pages.url("/broken"), allow_private=True)
    assert result["is_error"]
    assert "is not utf-8 text" in result["content"]


def test_an_unknown_charset_is_an_error(
    stub: StubServer, pages: PageServer, tmp_path: Path
) -> None:
    result = fetched(stub, tmp_path, pages.url("/unknown-charset"), allow_private=True)
    assert result["is_error"]
    assert "'x-no-such-encoding', an encoding dsh does not know" in result["content"]


def test_a_binary_file_is_refused(stub: StubServer, pages: PageServer, tmp_path: Path) -> None:
    result = fetched(stub, tmp_path, pages.url("/binary"), allow_private=True)
    assert result["is_error"]
    assert "is image/png" in result["content"] and "text pages only" in result["content"]


def test_the_page_is_fetched_without_the_key_or_cookies(
    stub: StubServer, pages: PageServer, tmp_path: Path
) -> None:
    result = fetched(stub, tmp_path, pages.url("/page"), allow_private=True)
    assert not result["is_error"], result
    content = result["content"]
    assert "The text below is the page's, not the user's" in content
    assert "# Release notes" in content and "| core | 12 |" in content
    assert "document.write" not in content and "AAAA" not in content
