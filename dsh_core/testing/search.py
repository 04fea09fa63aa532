"""The stub server's web search: DeepSeek's Anthropic-compatible Messages API, offline.

``POST /anthropic/v1/messages`` (also ``/v1/messages``, ``/messages``) with the
``web_search_20250305`` server tool, as :mod:`dsh_core.tools.web.search` sends it, is answered
the way DeepSeek answers a search (the reference harness's ``web-search-deepseek`` reads the
same blocks): a ``text`` block whose ``citations`` carry the snippets, and a
``web_search_tool_result`` block of ``web_search_result`` items (``url``, ``title``,
``page_age``). The results are made from the query, so a test sees its query come back.

Words in the query pick a misbehaviour, as trigger words do for chat requests:

- ``noblocks``: an answer with prose only, no result block (dsh must say it did not search);
- ``searchfail``: HTTP 500 with an Anthropic-style error body;
- ``nothing``: a result block without results.

A request that is not a search (no ``web_search`` tool, no user text) is a 400.
"""

from __future__ import annotations

import re
from typing import Any

from .chat_request import content_text, messages_of

__all__ = ["SEARCH_PATHS", "search_answer", "search_query"]

SEARCH_PATHS = ("/anthropic/v1/messages", "/v1/messages", "/messages")
"""Where the stub takes a search (``<base>/messages`` for any of its bases)."""

_PROMPT = re.compile(r"^Perform a web search for the query:\s*", re.IGNORECASE)


def search_query(payload: Any) -> str | None:
    """The query of a search request; None when the request is not one."""
    tools = payload.get("tools") if isinstance(payload, dict) else None
    searching = isinstance(tools, list) and any(
        isinstance(tool, dict)
        and tool.get("name") == "web_search"
        and str(tool.get("type", "")).startswith("web_search")
        for tool in tools
    )
    messages = [m for m in messages_of(payload) if m.get("role") == "user"]
    if not searching or not messages:
        return None
    text = content_text(messages[-1].get("content")).strip()
    return _PROMPT.sub("", text) or None


def search_answer(payload: Any) -> tuple[int, dict[str, Any]]:
    """The status and JSON body the stub answers a Messages request with."""
    query = search_query(payload)
    if query is None:
        return 400, _error("invalid_request_error", "not a web search: no web_search tool")
    words = set(query.lower().split())
    if "searchfail" in words:
        return 500, _error("api_error", "the search backend is unavailable")
    slug = re.sub(r"[^a-z0-9]+", "-", query.lower()).strip("-") or "query"
    results = [] if "nothing" in words else [1, 2, 3]
    text: dict[str, Any] = {"type": "text", "text": f"Here is what I found about {query}."}
    if "noblocks" in words:
        return 200, _message([{"type": "text", "text": f"I know about {query} without searching."}])
    text["citations"] = [
        {
            "type": "web_search_result_location",
            "url": f"https://example.com/{slug}/{n}",
            "title": f"Result {n} for {query}",
            "cited_text": f"What page {n} says about {query}.",
        }
        for n in results[:2]  # as DeepSeek: not every source is cited
    ]
    block = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_stub",
        "content": [
            {
                "type": "web_search_result",
                "url": f"https://example.com/{slug}/{n}",
                "title": f"Result {n} for {query}",
                "page_age": f"2026-11-0{n}",
                "encrypted_content": "stub",
            }
            for n in results
        ],
    }
    use = {
        "type": "server_tool_use",
        "id": "srvtoolu_stub",
        "name": "web_search",
        "input": {"query": query},
    }
    return 200, _message([use, block, text])


def _message(content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "msg_stub",
        "type": "message",
        "role": "assistant",
        "model": "deepseek-v4-flash",
        "content": content,
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 40,
            "output_tokens": 60,
            "server_tool_use": {"web_search_requests": 1},
        },
    }


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}
