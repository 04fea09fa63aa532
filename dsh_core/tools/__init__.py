"""Tools the agent loop runs for the model, and the toolbox that holds them (SPEC section 7).

    workspace = Workspace.at(Path.cwd(), output_dir=log.path.parent / "tool-output")
    toolbox = Toolbox(builtin_tools(workspace, launcher=lambda: UNSANDBOXED))

``read``, ``glob`` and ``grep`` read; ``write`` and ``edit`` change files; ``bash`` runs a
command (or starts one in the background). :func:`everyday_tools` are the reference harness's
others (SPEC 16): ``todo_write`` and ``ask_user_question`` (:mod:`.interaction`), ``web_fetch``
and ``web_search`` (:mod:`.web`), ``job_output``, ``job_list`` and ``job_kill``
(:mod:`.jobs`). What each needs is an :class:`Access`, which the approval policy decides on.
The tools' descriptions (:mod:`.specs`) are all a request needs; each tool's code is imported
when the model first calls it, so that a run that calls none does not pay for them.

May import: the leaves, :mod:`dsh_core.model`, :mod:`dsh_core.session`, :mod:`dsh_core.trust`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..model.seam import ToolSpec
from ..trust.launchers import UNSANDBOXED as UNSANDBOXED
from ..trust.launchers import Launcher as Launcher
from ..trust.workspace import Workspace as Workspace
from . import specs
from .base import Access as Access
from .base import AccessKind as AccessKind
from .base import Invocation as Invocation
from .base import Tool as Tool
from .base import Toolbox as Toolbox
from .base import ToolError as ToolError
from .base import ToolOutput as ToolOutput

if TYPE_CHECKING:
    from ..session import SessionLog
    from .interaction.ask import UserAsker
    from .jobs.table import JobTable

__all__ = [
    "DEEPSEEK_SEARCH_URL",
    "UNSANDBOXED",
    "Access",
    "AccessKind",
    "Invocation",
    "Launcher",
    "Tool",
    "ToolError",
    "ToolOutput",
    "Toolbox",
    "Workspace",
    "builtin_tools",
    "everyday_tools",
    "search_endpoint",
]

DEEPSEEK_SEARCH_URL = "https://api.deepseek.com/anthropic/v1"
"""DeepSeek's Anthropic-compatible base for ``web_search`` (``/messages`` is added), as the
reference harness uses it."""


def search_endpoint(base_url: str, configured: str | None) -> str | None:
    """Where ``web_search`` goes: ``configured`` (``DEEPSEEK_SEARCH_BASE_URL``, ``[web]
    search_base_url``), else DeepSeek's when the chat base URL is DeepSeek's; None: no search.
    Here, not in :mod:`.web.search`: every start asks, and that module costs 4 ms to import."""
    if configured:
        return configured.rstrip("/")
    from urllib.parse import urlsplit

    host = (urlsplit(base_url).hostname or "").lower()
    return DEEPSEEK_SEARCH_URL if host == "api.deepseek.com" else None


class _Deferred:
    """A built-in tool known by its spec; its code is imported at the first call."""

    def __init__(self, spec: ToolSpec, load: Callable[[], Tool]) -> None:
        self.spec = spec
        self._load = load
        self._tool: Tool | None = None

    def _loaded(self) -> Tool:
        if self._tool is None:
            self._tool = self._load()
        return self._tool

    def describe(self, arguments: Mapping[str, Any]) -> str:
        return self._loaded().describe(arguments)

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        return self._loaded().prepare(arguments)


def builtin_tools(
    workspace: Workspace,
    *,
    launcher: Callable[[], Launcher] = lambda: UNSANDBOXED,
    jobs: Callable[[], JobTable] | None = None,
) -> list[Tool]:
    """``read``, ``glob``, ``grep``, ``write``, ``edit`` and ``bash``, working in ``workspace``.

    ``launcher`` gives what runs ``bash`` (a sandbox), asked for when ``bash`` is first used;
    ``jobs`` the session's background jobs (``run_in_background``; None: refused).
    """

    def read() -> Tool:
        from .read import ReadTool

        return ReadTool(workspace)

    def glob() -> Tool:
        from .search import GlobTool

        return GlobTool(workspace)

    def grep() -> Tool:
        from .search import GrepTool

        return GrepTool(workspace)

    def write() -> Tool:
        from .edit import WriteTool

        return WriteTool(workspace)

    def edit() -> Tool:
        from .edit import EditTool

        return EditTool(workspace)

    def bash() -> Tool:
        from .shell import BashTool

        return BashTool(workspace, launcher=launcher(), jobs=jobs)

    return [
        _Deferred(specs.READ, read),
        _Deferred(specs.GLOB, glob),
        _Deferred(specs.GREP, grep),
        _Deferred(specs.WRITE, write),
        _Deferred(specs.EDIT, edit),
        _Deferred(specs.BASH, bash),
    ]


def everyday_tools(
    log: SessionLog,
    output_dir: Path,
    *,
    jobs: Callable[[], JobTable] | None,
    asker: Callable[[], UserAsker | None],
    nobody: str,
    allow_private: bool = False,
    search_endpoint: str | None = None,
    api_key: str | None = None,
    model: Callable[[], str] = lambda: "deepseek-v4-flash",
) -> list[Tool]:
    """The reference harness's everyday tools (SPEC 16), for the session of ``log``.

    ``jobs``: the session's background jobs (None: no job tools); ``asker``: the person's
    question now (None: nobody can be asked, and ``nobody`` says why); ``allow_private``:
    ``web_fetch`` may reach this machine and private networks; ``search_endpoint``: where
    ``web_search`` goes (None: it is not offered), with ``api_key`` and the conversation's
    ``model``. As for the built-in tools, each tool's code is imported at its first call.
    """

    def todo() -> Tool:
        from .interaction.todo import TodoWriteTool

        return TodoWriteTool(log)

    def ask() -> Tool:
        from .interaction.ask import AskUserTool

        return AskUserTool(asker, nobody=nobody)

    def fetch() -> Tool:
        from .web.fetch import WebFetchTool

        return WebFetchTool(output_dir, allow_private=allow_private)

    tools: list[Tool] = [
        _Deferred(specs.TODO_WRITE, todo),
        _Deferred(specs.ASK_USER_QUESTION, ask),
        _Deferred(specs.WEB_FETCH, fetch),
    ]
    if search_endpoint is not None:
        endpoint = search_endpoint

        def search() -> Tool:
            from .web.search import WebSearchTool

            return WebSearchTool(endpoint, api_key=api_key, model=model)

        tools.append(_Deferred(specs.WEB_SEARCH, search))
    if jobs is not None:
        table = jobs

        def job_tool(name: str) -> Callable[[], Tool]:
            def load() -> Tool:
                from .jobs.tools import job_tools

                (tool,) = (tool for tool in job_tools(table()) if tool.spec.name == name)
                return tool

            return load

        for spec in (specs.JOB_OUTPUT, specs.JOB_LIST, specs.JOB_KILL):
            tools.append(_Deferred(spec, job_tool(spec.name)))
    return tools
