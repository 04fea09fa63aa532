"""The everyday tools' parts in-process (SPEC 16): addresses, search answers, Markdown, the
checklist and questions parsed, and what the history keeps of them. The real process runs them
in ``tests/dsh_stdio/test_everyday_*.py`` and ``tests/security/test_r18_web_fetch.py``."""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Any

import httpcore
import pytest

from dsh_core.agent.history import History
from dsh_core.model.seam import UserMessage
from dsh_core.session.events import (
    JobEnded,
    Record,
    SessionEvent,
    Todo,
    TodoWrite,
    TurnStart,
    UserText,
)
from dsh_core.tools import search_endpoint
from dsh_core.tools.base import ToolError
from dsh_core.tools.interaction.ask import UserAnswer, UserQuestion, parse_questions
from dsh_core.tools.interaction.todo import parse_todos, todo_counts
from dsh_core.tools.web.addresses import BlockedAddress, CheckedBackend, refusal
from dsh_core.tools.web.fetch import parse_url
from dsh_core.tools.web.markdown import to_markdown
from dsh_core.tools.web.search import NO_RESULT_BLOCKS, parse_search_response
from dsh_stdio.terminal.approve import parse_user_reply

REFUSED = [
    ("127.0.0.1", "a loopback address (this machine)"),
    ("::1", "a loopback address (this machine)"),
    ("::ffff:127.0.0.1", "a loopback address (this machine)"),
    ("64:ff9b::7f00:1", "a loopback address (this machine)"),
    ("10.1.2.3", "a private address"),
    ("192.168.0.1", "a private address"),
    ("172.20.0.1", "a private address"),
    ("fc00::1", "a private address"),
    ("169.254.10.1", "a link-local address"),
    ("fe80::1", "a link-local address"),
    ("100.64.0.1", "a shared (carrier-grade NAT) address"),
    ("0.0.0.0", "an unspecified address (this machine)"),
    ("224.0.0.1", "a multicast address"),
    ("169.254.169.254", "a cloud metadata address"),
    ("fd00:ec2::254", "a cloud metadata address"),
    ("100.100.100.200", "a cloud metadata address"),
]


@pytest.mark.parametrize(("address", "why"), REFUSED)
def test_addresses_that_web_fetch_refuses(address: str, why: str) -> None:
    assert refusal(ipaddress.ip_address(address)) == why


@pytest.mark.parametrize("address", ["8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert refusal(ipaddress.ip_address(address)) is None


def test_allowing_private_addresses_never_allows_the_metadata_endpoint() -> None:
    allowed = [a for a, _ in REFUSED if refusal(ipaddress.ip_address(a), allow_private=True)]
    assert set(allowed) == {
        "169.254.169.254",
        "fd00:ec2::254",
        "100.100.100.200",
        "0.0.0.0",
        "224.0.0.1",
    }


def test_a_name_with_one_private_address_among_public_ones_is_refused() -> None:
    """DNS rebinding's other form: a public address to pass a check, a private one to use."""

    async def resolve(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "10.0.0.5"]

    backend = CheckedBackend(resolve=resolve)
    with pytest.raises(BlockedAddress) as caught:
        asyncio.run(backend.connect_tcp("rebind.example", 80))
    assert str(caught.value).startswith("refused: rebind.example resolves to 10.0.0.5")
    assert backend.connected == []


def test_the_connection_goes_to_the_address_that_was_checked() -> None:
    """The name is resolved once, by dsh; the connection is to that address, never the name."""
    seen: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        return ["93.184.216.34"]

    async def connect() -> None:
        backend = CheckedBackend(resolve=resolve, allow_private=False)
        backend._network = _Recorder(seen)  # type: ignore[assignment]
        await backend.connect_tcp("example.test", 80)

    with pytest.raises(httpcore.ConnectError, match="recorded"):
        asyncio.run(connect())
    assert seen == ["93.184.216.34"]  # the address, not "example.test" (no second lookup)


class _Recorder(httpcore.AsyncNetworkBackend):
    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    async def connect_tcp(self, host: str, port: int, *args: object, **kwargs: object) -> None:  # type: ignore[override]
        self.seen.append(host)
        raise httpcore.ConnectError("recorded")


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("file:///etc/passwd", "fetches http and https URLs only, not file:"),
        ("ftp://example.com/", "not ftp:"),
        ("https://user:pw@example.com/", "must not hold a user name"),
        ("   ", "url must be a non-empty"),
    ],
)
def test_urls_refused_before_anything_is_sent(url: str, said: str) -> None:
    with pytest.raises(ToolError) as caught:
        parse_url(url)
    assert said in caught.value.message


def test_the_host_always_covers_includes_a_port_that_is_not_the_schemes() -> None:
    assert parse_url("https://Example.COM/a").host == "example.com"
    assert parse_url("http://example.com:8080/").host == "example.com:8080"
    assert parse_url("http://[::1]:80/").host == "[::1]"


def test_a_search_answer_is_read_from_its_blocks_only() -> None:
    answer = {
        "content": [
            {"type": "text", "text": "see https://prose.example", "citations": [
                {"url": "https://a.test", "cited_text": "about A"},
                {"url": "https://a.test", "cited_text": "second"},
            ]},
            {"type": "web_search_tool_result", "content": [
                {"type": "web_search_result", "url": "https://a.test", "title": "A"},
                {"type": "web_search_result", "url": "https://a.test", "title": "again"},
                {"type": "web_search_result_error", "url": "https://err.test"},
                {"type": "web_search_result", "url": "https://b.test", "page_age": "2026"},
            ]},
        ]
    }  # fmt: skip
    found = parse_search_response(answer)
    assert [(r.url, r.title, r.snippet, r.published) for r in found] == [
        ("https://a.test", "A", "about A", ""),
        ("https://b.test", "", "", "2026"),
    ]
    with pytest.raises(ToolError) as caught:
        parse_search_response({"content": [{"type": "text", "text": "I know it"}]})
    assert caught.value.message == NO_RESULT_BLOCKS


def test_search_is_offered_for_deepseek_or_a_configured_endpoint() -> None:
    assert search_endpoint("https://api.deepseek.com", None) == (
        "https://api.deepseek.com/anthropic/v1"
    )
    assert search_endpoint("http://127.0.0.1:8000/v1", None) is None
    assert search_endpoint("http://127.0.0.1:8000/v1", "http://x/anthropic/v1/") == (
        "http://x/anthropic/v1"
    )


def test_a_page_nested_too_deep_for_markdown_is_given_as_text_and_said() -> None:
    text, note = to_markdown("<p>before</p>" + "<div>" * 5000 + "deep" + "</div>" * 5000)
    assert "before" in text and "deep" in text
    assert note is not None and "too deeply" in note


def test_markdown_drops_scripts_and_data_uris_and_makes_links_absolute() -> None:
    html = (
        "<title>T</title><script>evil()</script><p><a href='b.html'>b</a> "
        "<a href='javascript:x()'>j</a><img alt=i src='data:image/png;base64,AAAA'></p>"
    )
    text, note = to_markdown(html, "https://e.test/a/")
    assert note is None
    assert text.startswith("# T\n\n")
    assert "[b](https://e.test/a/b.html)" in text
    assert "evil" not in text and "javascript" not in text and "AAAA" not in text


def test_todos_are_checked_and_counted() -> None:
    todos = parse_todos({"todos": [{"content": " a  b ", "status": "in_progress"}]})
    assert todos == (Todo("a b", "in_progress"),)
    assert todo_counts(todos) == "1 todo: 1 in progress"
    for bad in ({"todos": "x"}, {"todos": [{"content": "", "status": "pending"}]}, {"x": 1}):
        with pytest.raises(ToolError):
            parse_todos(bad)


def test_the_persons_reply_to_a_question() -> None:
    (question,) = parse_questions(
        {"questions": [{"id": "q", "question": "?", "options": [{"label": "A"}, {"label": "B"}]}]}
    )
    assert parse_user_reply("2", question).selected == ("B",)  # type: ignore[union-attr]
    assert parse_user_reply("3", question) is None
    assert parse_user_reply("1,2", question) is None  # one choice only
    assert parse_user_reply("  ", question) == UserAnswer("q")
    assert parse_user_reply("neither, use C", question).custom == "neither, use C"  # type: ignore[union-attr]
    multi = UserQuestion("m", "?", options=question.options, multi_select=True)
    assert parse_user_reply("2 1", multi).selected == ("B", "A")  # type: ignore[union-attr]


def test_questions_that_cannot_be_asked_are_errors() -> None:
    bad: dict[str, Any]
    for bad in (
        {"questions": []},
        {"questions": [{"id": "a", "question": "x"}, {"id": "a", "question": "y"}]},
        {"questions": [{"id": "a", "question": "x", "options": [{"label": ""}]}]},
    ):
        with pytest.raises(ToolError):
            parse_questions(bad)


def test_the_history_keeps_the_latest_checklist_and_tells_of_a_jobs_end() -> None:
    records: list[Record] = [
        TurnStart(1, "m"),
        UserText(1, "go"),
        TodoWrite(1, (Todo("a", "pending"),)),
        TodoWrite(1, (Todo("a", "completed"),)),
        JobEnded(1, "bash-1", "exited", "[dsh: background job bash-1 ended]", 0),
    ]
    history = History()
    history.update([SessionEvent(n, "", record) for n, record in enumerate(records)])
    assert history.todos == (Todo("a", "completed"),)
    assert history.messages()[-1] == UserMessage("go\n\n[dsh: background job bash-1 ended]")
