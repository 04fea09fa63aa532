"""``web_search {queries}``: DeepSeek searches the web, dsh lists what it found (SPEC 16).

    tool = WebSearchTool("https://api.deepseek.com/anthropic/v1", api_key=key,
                         model=lambda: "deepseek-v4-flash")
    output = await tool.prepare({"queries": ["httpx 1.0 release"]}).run()

DeepSeek has no search endpoint of its own: as the reference harness does
(``packages/web/web-search-deepseek``), each query is one request to its Anthropic-compatible
Messages API (``POST <endpoint>/messages``) with the native ``web_search_20250305`` server
tool, the same key (``x-api-key`` and ``Authorization: Bearer``, as DeepSeek and proxies each
want one). DeepSeek runs the search and answers with ``web_search_tool_result`` blocks
(``web_search_result`` items: ``url``, ``title``, ``page_age``) and text blocks whose
``citations`` carry the snippets (``cited_text``, by URL). Only those structured blocks are
read, never the model's prose: an answer without a result block is an ``Error:`` for that query.

Queries (1 to :data:`~dsh_core.tools.specs.MAX_QUERIES`) run at the same time; their results
are merged, each URL once, and listed: title, URL, snippet. Offered only where it can work
(:func:`dsh_core.tools.search_endpoint`): the base URL is DeepSeek's, or
``DEEPSEEK_SEARCH_BASE_URL`` / ``[web] search_base_url`` names an endpoint (the bundled stub
server answers one, so this is tested offline). It reads nothing of the person's and asks
nothing: the queries go to the provider that already sees the conversation. Redirects are not
followed (the key must not be sent on to another host).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ...chain import error_chain
from ...model.seam import ToolSpec
from ...version import __version__
from .. import specs
from ..base import Access, Invocation, ToolError, ToolOutput
from ..specs import MAX_QUERIES

__all__ = [
    "ANTHROPIC_VERSION",
    "NO_RESULT_BLOCKS",
    "SEARCH_PROMPT",
    "SearchResult",
    "WebSearchTool",
    "parse_search_response",
    "search_body",
]

ANTHROPIC_VERSION = "2023-06-01"
SEARCH_PROMPT = "Perform a web search for the query: "
"""The reference's words to the searching model, with the query after them."""
SEARCH_MODEL = "deepseek-v4-flash"
"""The model that searches when the conversation's is not a DeepSeek one."""
MAX_TOKENS = 4096
MAX_USES = 5
MAX_RESULTS = 8
"""Sources listed per query."""
MAX_QUERY_CHARS = 500
NO_RESULT_BLOCKS = (
    "DeepSeek returned no web_search_tool_result blocks; the request may not have triggered "
    "native web search"
)
"""The reference's words for an answer that did not search."""
TIMEOUT_S = 120.0
"""A search is a whole model turn on DeepSeek's side: a bound, not a measure."""


def search_body(query: str, model: str) -> dict[str, Any]:
    """The Messages request for one query, as the reference sends it."""
    return {
        "model": model,
        "max_tokens": MAX_TOKENS,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": SEARCH_PROMPT + query}]}
        ],
        "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": MAX_USES}],
    }


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One source a search found."""

    url: str
    title: str = ""
    snippet: str = ""
    published: str = ""


def parse_search_response(payload: Any) -> list[SearchResult]:
    """The sources of a Messages answer: its ``web_search_result`` items, each URL once, each
    with the first ``cited_text`` a text block gives for it. ToolError when it holds no
    ``web_search_tool_result`` block (the reference's strict mode: no prose scraping)."""
    blocks = payload.get("content") if isinstance(payload, dict) else None
    blocks = (
        [block for block in blocks if isinstance(block, dict)] if isinstance(blocks, list) else []
    )
    results = [block for block in blocks if block.get("type") == "web_search_tool_result"]
    if not results:
        raise ToolError(NO_RESULT_BLOCKS)
    snippets: dict[str, str] = {}
    for block in blocks:
        if block.get("type") != "text" or not isinstance(block.get("citations"), list):
            continue
        for cite in block["citations"]:
            if isinstance(cite, dict):
                url, text = cite.get("url"), cite.get("cited_text")
                if isinstance(url, str) and isinstance(text, str) and url and text:
                    snippets.setdefault(url, text)
    found: dict[str, SearchResult] = {}
    for block in results:
        items = block.get("content")
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict) or item.get("type") != "web_search_result":
                continue
            url = item.get("url")
            if not isinstance(url, str) or not url or url in found:
                continue
            found[url] = SearchResult(
                url,
                _string(item.get("title")),
                snippets.get(url, ""),
                _string(item.get("page_age")),
            )
    return list(found.values())


def _string(value: Any) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


class WebSearchTool:
    """``web_search {queries}`` against ``endpoint``."""

    def __init__(self, endpoint: str, *, api_key: str | None, model: Callable[[], str]) -> None:
        """``model``: the conversation's model now (``/model`` may change it)."""
        self.endpoint = endpoint
        self._api_key = api_key
        self._model = model

    @property
    def spec(self) -> ToolSpec:
        return specs.WEB_SEARCH

    def describe(self, arguments: Mapping[str, Any]) -> str:
        queries = arguments.get("queries")
        if isinstance(queries, list):
            return "; ".join(str(query) for query in queries)
        return str(queries)

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        unknown = sorted(set(arguments) - {"queries"})
        if unknown:
            raise ToolError(f"invalid arguments: web_search takes queries only, not {unknown[0]!r}")
        raw = arguments.get("queries")
        if isinstance(raw, str):  # one query, as some models send it
            raw = [raw]
        if not isinstance(raw, list) or not raw:
            raise ToolError("invalid arguments: queries must be a list of 1 to 4 strings")
        if len(raw) > MAX_QUERIES:
            raise ToolError(f"invalid arguments: at most {MAX_QUERIES} queries, not {len(raw)}")
        queries: list[str] = []
        for query in raw:
            if not isinstance(query, str) or not query.strip():
                raise ToolError("invalid arguments: each query must be a non-empty string")
            if len(query) > MAX_QUERY_CHARS:
                raise ToolError(f"invalid arguments: a query is over {MAX_QUERY_CHARS} characters")
            queries.append(" ".join(query.split()))
        queries = list(dict.fromkeys(queries))

        async def run() -> ToolOutput:
            return await self._search(queries)

        return Invocation(Access("read"), "; ".join(queries), run)

    async def _search(self, queries: list[str]) -> ToolOutput:
        import httpx

        model = self._model()
        model = model if model.startswith("deepseek-") else SEARCH_MODEL
        headers = {
            "anthropic-version": ANTHROPIC_VERSION,
            "content-type": "application/json",
            "accept": "application/json",
            "user-agent": f"dsh/{__version__} (web_search)",
        }
        if self._api_key:
            headers["x-api-key"] = self._api_key
            headers["authorization"] = f"Bearer {self._api_key}"
        timeout = httpx.Timeout(TIMEOUT_S, connect=10.0)
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
            outcomes = await asyncio.gather(
                *(self._one(client, query, model, headers) for query in queries),
                return_exceptions=True,
            )
        sections: list[str] = []
        failures: list[BaseException] = []
        seen: set[str] = set()
        for query, outcome in zip(queries, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    raise outcome  # a cancellation: the turn's, not a result
                failures.append(outcome)
                sections.append(f'Search "{query}": failed: {error_chain(outcome)}')
                continue
            fresh = [result for result in outcome if result.url not in seen]
            seen.update(result.url for result in fresh)
            sections.append(_listing(query, fresh[:MAX_RESULTS], len(outcome)))
        if len(failures) == len(queries):
            if len(queries) == 1:
                raise ToolError(f'web_search "{queries[0]}" failed') from failures[0]
            raise ToolError("every search failed:\n" + "\n".join(sections))
        sections.append("Cite the URLs you use; web_fetch reads a page.")
        return ToolOutput("\n\n".join(sections))

    async def _one(
        self, client: Any, query: str, model: str, headers: dict[str, str]
    ) -> list[SearchResult]:
        import httpx

        endpoint = f"{self.endpoint}/messages"
        try:
            response = await client.post(endpoint, json=search_body(query, model), headers=headers)
        except httpx.HTTPError as exc:
            raise ToolError(f"the search request to {endpoint} failed") from exc
        if response.is_redirect:
            raise ToolError(f"{endpoint} answered with a redirect, which is not followed")
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if response.status_code != 200:
            raise ToolError(
                f"{endpoint} answered HTTP {response.status_code} {response.reason_phrase}"
                + _server_words(payload)
            )
        if payload is None:
            raise ToolError(f"{endpoint} answered with a body that is not JSON")
        return parse_search_response(payload)


def _server_words(payload: Any) -> str:
    """``: <the server's message>`` from an error body, when it has one."""
    error = payload.get("error") if isinstance(payload, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    if not isinstance(message, str) and isinstance(payload, dict):
        message = payload.get("message")
    return f": {' '.join(message.split())[:500]}" if isinstance(message, str) and message else ""


def _listing(query: str, results: list[SearchResult], total: int) -> str:
    """One query's results, numbered: title, URL, snippet (and the date, when given)."""
    if not results:
        said = "no results" if not total else "only sources already listed above"
        return f'Search "{query}": {said}.'
    lines = [f'Search "{query}":']
    for number, result in enumerate(results, 1):
        dated = f" ({result.published})" if result.published else ""
        lines.append(
            f"{number}. {result.title or urlsplit(result.url).hostname or result.url}{dated}"
        )
        lines.append(f"   {result.url}")
        if result.snippet:
            lines.append(f"   {' '.join(result.snippet.split())[:600]}")
    return "\n".join(lines)
