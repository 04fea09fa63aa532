"""One run of dsh: the session log it writes, the model, and the conversation tying them.

The modes (``pipe.py``, ``repl.py``) differ only in where input comes from and how much
decoration a turn gets; opening and resuming the session, running and showing a turn, and the
exit status a turn asks for live here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from dsh_core.agent.approval import ApprovalPolicy, Asker
from dsh_core.agent.compaction import REPL_WINDOW_ADVICE, WindowAdvice
from dsh_core.agent.context import system_prompt
from dsh_core.agent.loop import Conversation
from dsh_core.chain import error_chain
from dsh_core.clock import LOOP_CLOCK, Clock
from dsh_core.errors import FailureRecord, SessionLogError
from dsh_core.extensions.skills import SkillCatalog, SkillTool, discover_skills, skills_section
from dsh_core.extensions.subagent import SubagentTool
from dsh_core.masking import mask
from dsh_core.model.deepseek import CHAT_PATH
from dsh_core.model.seam import ChatModel, Usage
from dsh_core.model.urls import redact_url
from dsh_core.session import TOOL_OUTPUT_DIR, LoadReport, SessionLog, SessionStore
from dsh_core.session.events import JobEnded, JobStarted, Record, TurnEnd
from dsh_core.tools import Tool, Toolbox, Workspace, builtin_tools, everyday_tools, search_endpoint
from dsh_core.trust.workspace import child_environment

from ..config import Config, StartupError
from ..jsonout import JsonView
from ..render import INTERRUPTED_LINE, neutralise
from ..status import EXIT_FAILED, turn_status
from ..tty import STDIN, colour_wanted, quiet_terminal
from ..view import TurnView
from .checkpointing import CHECKPOINTS_DIR, open_checkpoints
from .libraries import show_library_logs
from .model import deepseek_adapter
from .resume import enter_its_directory
from .sandboxing import SessionLaunchers
from .spending import session_spending, turn_meter
from .subagents import subagent

if TYPE_CHECKING:
    from collections.abc import Sequence

    from dsh_core.checkpoints.turns import Checkpoints
    from dsh_core.extensions.mcp.servers import McpServers
    from dsh_core.session.tally import Tally
    from dsh_core.tools.interaction.ask import UserAsker
    from dsh_core.tools.jobs.table import JobTable
    from dsh_core.trust.policy import Kept

    from .servers import StartingServers

__all__ = [
    "OUTPUT_CLOSED",
    "TOOL_OUTPUT_DIR",
    "Runtime",
    "shown_url",
]


OUTPUT_CLOSED = "output closed"
"""The abort reason when stdout's reader went away (SPEC section 12)."""


@dataclass
class Runtime:
    """The open session log, the model and the conversation that ties them together."""

    config: Config
    store: SessionStore
    model: ChatModel
    """The DeepSeek adapter the flags describe (or a test's model)."""
    log: InitVar[SessionLog]
    """The session's log: the conversation over it is built from the flags."""
    err: TextIO
    stdin: int = STDIN
    """Input's descriptor: while a turn runs, a terminal there does not echo what is typed."""
    window_advice: WindowAdvice = REPL_WINDOW_ADVICE
    """What this front door can do about a conversation that no longer fits."""
    conversation: Conversation = field(init=False)
    asker: Asker | None = None
    """The terminal's approval question (the REPL, a one-shot run at a terminal); else None."""
    current_view: TurnView | None = None
    """The view of the turn running now."""
    json_view: JsonView | None = None
    """With ``--json``: the one writer of stdout for the whole run."""
    resumed: bool = False
    """The session was loaded (``--continue``, ``--resume``), not created by this run."""
    launchers: SessionLaunchers | None = None
    """How ``bash`` runs in this session (sandboxed or not), chosen when a command first
    asks; None with ``--no-tools``."""
    said_unsandboxed: bool = False
    """The one notice per run that commands run without a sandbox was given."""
    log_failed: bool = False
    """A turn could not be written to the session log."""
    output_failed: bool = False
    """Standard output refused a write (a full disk, a closed descriptor)."""
    servers: McpServers | None = None
    """The MCP servers of this run (started in the background: :attr:`starting`)."""
    starting: StartingServers | None = None
    """The servers' start; the first request waits for it (:meth:`run_turn`)."""
    say: Callable[[str], None] | None = None
    """How a notice is shown between turns (the REPL prints it above its prompt); None:
    a ``dsh:`` line on stderr."""
    _session_tools: list[Tool] = field(default_factory=list)
    """This session's tools but the MCP servers': what their tools join once they are up."""
    _prompt_context: tuple[Path, SkillCatalog] | None = None
    """Where and with which skills the system prompt is made, while it waits for the MCP
    servers' instructions (a new session's first request)."""
    _servers_applied: bool = False
    user_asker: UserAsker | None = None
    """The terminal's way of asking the model's own questions (``ask_user_question``)."""
    jobs: JobTable | None = None
    """This session's background jobs, made at the first (or at a resume that had some)."""
    _closing: list[asyncio.Future[None]] = field(default_factory=list, init=False)
    """Sessions left by ``/new`` whose jobs are still being ended."""
    checkpoints_off: str | None = None
    """Why this session takes no checkpoints (``--no-checkpoints``, ...); None: it does."""
    tally: Tally = field(init=False)
    """What the session spent, and this run's part (usage line, ``--max-cost``, ``result``)."""

    @classmethod
    async def open(
        cls,
        config: Config,
        *,
        out: TextIO,
        err: TextIO,
        terminal: bool,
        stdin: int = STDIN,
        model: ChatModel | None = None,
        clock: Clock = LOOP_CLOCK,
        window_advice: WindowAdvice = REPL_WINDOW_ADVICE,
    ) -> Runtime:
        """Create or resume the session the flags ask for; say what loading repaired; start
        the MCP servers the configuration file names.

        ``model``: talk to it instead of the DeepSeek adapter the flags describe (whose
        timeouts and retry waits follow ``clock``). ``window_advice``: what the mode can do
        about a conversation that no longer fits (a pipe has no ``/compact``).
        """
        if model is None:
            adapter = deepseek_adapter(config, terminal=terminal, clock=clock)
            adapter.check_key()  # a key that cannot be sent fails here, before a session exists
            model = adapter
        if config.base_url.endswith(CHAT_PATH):
            # Said once up front; each failed turn says "check --base-url" too.
            shown = neutralise(shown_url(config))
            err.write(f"dsh: the base URL {shown} ends in {CHAT_PATH}, which dsh adds itself\n")
        if config.tools and config.sandbox == "on":  # likewise a sandbox that cannot run
            path = child_environment().get("PATH", os.defpath)
            from dsh_core.trust.sandbox import require_bwrap

            require_bwrap(path, network="network" in config.allow)
        store = SessionStore(config.home)
        cwd = Path.cwd()
        if config.resume is not None:
            from ..commands.sessions import session_id

            log, report = store.open(session_id(store, config.resume))
            if log.parent is None:  # a subagent's is refused below, whatever its directory
                enter_its_directory(log, err, stdin)
        elif config.continue_session:
            found = store.newest(cwd)
            if found is None:
                log, report = store.create(cwd), None
                err.write(neutralise(f"dsh: no session yet for {cwd}; started {log.id}") + "\n")
            else:
                log, report = found
        else:
            log, report = store.create(cwd), None
        if log.parent is not None:
            log.close()
            parent = log.parent.get("session")
            raise StartupError(
                f"session {log.id} is a subagent's (of session {parent}): it cannot be resumed; "
                f"dsh --show {log.id} shows it, dsh -r {parent} resumes its parent"
            )
        if report is not None:
            for notice in report.notices:
                err.write(f"dsh: {neutralise(notice)}\n")  # paths may hold anything
        servers = None
        if config.servers and config.tools:
            from dsh_core.extensions.mcp.servers import McpServers

            servers = McpServers(
                config.servers,
                stderr_dir=log.path.parent,
                environment=child_environment(),
                workdir=Path.cwd(),
            )
        runtime = cls(config, store, model, log, err, stdin, window_advice, servers=servers)
        show_library_logs(runtime.notice)  # the SDK's and httpx's words: masked, neutralised
        if servers is not None:
            from .servers import StartingServers

            # In the background: the REPL's prompt is up at once; the first request waits.
            runtime.starting = StartingServers(servers, notice=runtime.notice)
        if config.json:
            view = runtime.view(out, terminal=out.isatty())  # it shows the log from here on
            if report is not None and report.appended:
                assert isinstance(view, JsonView)
                view.replay(log.events[-report.appended :])
        elif report is not None and report.interrupted_turn is not None and not terminal:
            # This load found the last turn left open by a process that died, and closed it.
            # (A terminal shows it as the outcome of the last exchange instead.)
            out.write(INTERRUPTED_LINE + "\n")
            out.flush()
        runtime.resumed = report is not None
        return runtime

    def __post_init__(self, log: SessionLog) -> None:
        self.conversation = self._conversation(log, self.config.model)

    def ask_on(self, asker: Asker) -> None:
        """Let tool calls that need approval be asked about (the REPL)."""
        self.asker = asker
        self.conversation.approval.asker = asker

    def ask_user_on(self, asker: UserAsker) -> None:
        """Let the model's own questions be asked (the REPL, a one-shot run at a terminal)."""
        self.user_asker = asker

    def new(self) -> SessionLog:
        """Start a fresh session (``/new``), keeping the model and its settings."""
        old, jobs = self.conversation, self.jobs
        log = self.store.create(Path.cwd())
        self.conversation = self._conversation(log, old.model_name)
        self.conversation.thinking = old.thinking  # as /think left it
        self._close_log(old.log)
        if jobs is not None:  # a session's jobs end with it (they are ended meanwhile)
            self._closing.append(asyncio.ensure_future(jobs.close()))
        if old.checkpoints is not None:
            old.checkpoints.close()
        return log

    def resume(self, reference: str) -> tuple[SessionLog, LoadReport]:
        """Switch to the stored session ``reference`` (an id or its start) of this directory
        (``/resume ID``), keeping the model and its settings; raises HarnessError, with the
        way on, for one that cannot be resumed here."""
        from ..commands.sessions import session_id

        log, report = self.store.open(session_id(self.store, reference))
        here = os.path.abspath(Path.cwd())
        if log.parent is not None or log.cwd != here:
            log.close()
            if log.parent is not None:
                why = f"is a subagent's: it cannot be resumed (dsh --show {log.id} shows it)"
            else:
                why = f"was started in {log.cwd}: dsh -r {log.id} there resumes it"
            raise SessionLogError(f"session {log.id} {why}")
        old = self.conversation
        self.conversation = self._conversation(log, old.model_name)
        self.conversation.thinking = old.thinking
        self._close_log(old.log)
        return log, report

    def _conversation(self, log: SessionLog, model_name: str) -> Conversation:
        """The conversation over ``log``, as the flags configure it.

        Tools, their workspace and the approvals answered "always" belong to one session.
        """
        config = self.config
        cwd = Path.cwd()
        toolbox = Toolbox()
        skills = SkillCatalog()
        self.jobs = None
        self._session_tools = []
        self._prompt_context = None
        self._servers_applied = False
        self.launchers = None
        if config.tools:
            output_dir = log.path.parent / TOOL_OUTPUT_DIR
            workspace = Workspace.at(
                cwd, output_dir, dsh_home=config.home, started=self._servers_run_from()
            )
            launchers = self.launchers = SessionLaunchers(
                config, workspace, on_unsandboxed=self._unsandboxed
            )
            skills = discover_skills(cwd)
            self._warn(skills.warnings)
            if any(isinstance(event.record, JobStarted) for event in log.events):
                self._job_table(log, output_dir)  # a resume: the model hears they ended
            tools: list[Tool] = builtin_tools(
                workspace,
                launcher=launchers.now,
                jobs=lambda: self._job_table(log, output_dir),
            )
            if skills.skills:
                tools.append(SkillTool(skills, workspace))
            tools.append(SubagentTool(lambda call: subagent(self, log, call, skills), output_dir))
            tools += self._everyday_tools(log, output_dir)
            self._session_tools = tools
            toolbox = Toolbox(tools)
        prompt: str | None = None
        if not log.events:  # a resumed session keeps the system prompt it recorded
            if self.servers is not None:
                self._prompt_context = (cwd, skills)  # made with the servers' instructions
            else:
                prompt = self.system_prompt_for(cwd, toolbox, skills, warn=True)
        checkpoints: Checkpoints | None = None
        self.checkpoints_off = None  # without tools: said as "off: no tools"
        if config.tools:
            checkpoints, self.checkpoints_off = open_checkpoints(config, log, workspace, self._warn)
        self.tally, budget = session_spending(config, log)
        return Conversation(
            self.model,
            log,
            model_name=model_name,
            max_tokens=config.max_tokens,
            max_steps=config.max_steps,
            context_window=config.context_window,
            auto_compact=config.auto_compact,
            window_advice=self.window_advice,
            thinking=config.thinking,
            reasoning_effort=config.reasoning_effort,
            toolbox=toolbox,
            approval=ApprovalPolicy(config.allow, self.asker, sandbox_off=config.sandbox == "off"),
            system_prompt=prompt,
            notes=(self._job_notes,),
            checkpoints=checkpoints,
            budget=budget,
        )

    def _everyday_tools(self, log: SessionLog, output_dir: Path) -> list[Tool]:
        """SPEC 16's tools for the session of ``log``."""
        config = self.config
        return everyday_tools(
            log,
            output_dir,
            jobs=lambda: self._job_table(log, output_dir),
            asker=lambda: self.user_asker,
            nobody=ApprovalPolicy().unattended,  # what a refused call says, as its question
            allow_private=config.allow_private_addresses,
            search_endpoint=search_endpoint(config.base_url, config.search_base_url),
            api_key=config.api_key or None,
            model=lambda: self.conversation.model_name,
        )

    def _job_table(self, log: SessionLog, output_dir: Path) -> JobTable:
        """The background jobs of the session of ``log``, made at the first use."""
        if self.jobs is None:
            from dsh_core.tools.jobs.table import JobTable

            self.jobs = JobTable(log, output_dir)
        return self.jobs

    def _job_notes(self, turn: int) -> Sequence[Record]:
        """The jobs that ended since the last request: said to the person, told the model."""
        if self.jobs is None:
            return ()
        records = self.jobs.notes(turn)
        view = self.current_view
        for record in records:
            if view is not None and isinstance(record, JobEnded):
                view.notice(f"background job {record.job_id}: {record.status}")
        return records

    def notice(self, text: str) -> None:
        """A ``dsh:`` notice (a server's warning, a library's log line): in the running turn's
        view, else as :attr:`say` shows it. Neutralised here: it may quote a server's words."""
        text = neutralise(text)
        if self.current_view is not None:
            self.current_view.notice(text)
        elif self.say is not None:
            self.say(text)
        else:
            with contextlib.suppress(OSError, ValueError):
                self.err.write(f"dsh: {text}\n")
                self.err.flush()

    async def servers_ready(self, view: TurnView | None = None) -> None:
        """Before a request: wait for the MCP servers still starting (``view`` shows which),
        then give this session their tools and, for a new session, the system prompt with
        their instructions. Once per session; a server restarted later refreshes its tools."""
        starting = self.starting
        if starting is None or self.servers is None:
            return
        if not starting.ready:
            await starting.wait(show=view.show_status if view is not None else self.notice)
        if starting.ready and not self._servers_applied:
            self._servers_applied = True
            self.refresh_tools()
            context, self._prompt_context = self._prompt_context, None
            if context is not None and not self.conversation.log.events:
                cwd, skills = context
                prompt = self.system_prompt_for(cwd, self.conversation.toolbox, skills, warn=True)
                self.conversation.system_prompt = prompt

    def refresh_tools(self) -> None:
        """This session's tools, with the running MCP servers' as they are now (after a start,
        or ``/mcp restart``)."""
        if self.servers is None or not self.config.tools:
            return
        output_dir = self.conversation.log.path.parent / TOOL_OUTPUT_DIR
        tools = [*self._session_tools, *self.servers.tools(output_dir)]
        self.conversation.toolbox = Toolbox(tools)

    def _servers_run_from(self) -> tuple[Kept, ...]:
        """What the configured MCP servers run from: protected where inside, whether they
        started or not (the next start, from elsewhere, would run them)."""
        if not self.config.servers:
            return ()
        from dsh_core.extensions.mcp.launch import server_files

        return server_files(self.config.servers, child_environment(), Path.home())

    def system_prompt_for(
        self, cwd: Path, toolbox: Toolbox, skills: SkillCatalog, *, warn: bool
    ) -> str | None:
        """The system prompt of a session in ``cwd``: the first part, AGENTS.md, the skills and
        the MCP servers' instructions; ``warn``: say what could not be read."""
        context = system_prompt(cwd, tools=toolbox.names, first_part=self.config.system)
        if warn:
            self._warn(context.warnings)
        servers = self.servers.instructions() if self.servers is not None else ""
        return (context.text + skills_section(skills) + servers) or None

    def _warn(self, warnings: tuple[str, ...]) -> None:
        for warning in warnings:
            self.err.write(f"dsh: {neutralise(warning)}\n")  # file names from a repository

    def _close_log(self, log: SessionLog) -> bool:
        # An unused session is not kept: --continue should find the conversation before it.
        if log.discard_if_empty():
            return False
        log.close()
        return True

    def _unsandboxed(self, text: str) -> None:
        """``--sandbox auto`` found no sandbox at the first command: said once per run."""
        if self.said_unsandboxed:
            return
        self.said_unsandboxed = True
        if self.current_view is not None:
            self.current_view.notice(text)
        else:
            self.err.write(f"dsh: {neutralise(text)}\n")

    @property
    def undo_directory(self) -> str | None:
        """What this session's checkpoints cover (the working directory); None when off."""
        checkpoints = self.conversation.checkpoints
        return checkpoints.root if checkpoints is not None else None

    def undo_state(self) -> str:
        """For ``/session``: whether checkpoints and undo are on, and where the store is."""
        if self.conversation.checkpoints is None:
            return self.checkpoints_off or "off: no tools (--no-tools)"
        store = self.config.home / CHECKPOINTS_DIR
        return f"on: a checkpoint before each turn's first change, in {store} (/undo, /rewind)"

    def sandbox_state(self) -> str:
        """For ``/session``: whether commands run sandboxed, and how."""
        return "no tools (--no-tools)" if self.launchers is None else self.launchers.state()

    def cancel_turn(self, reason: str) -> bool:
        """Cancel the running turn with ``reason``; False when no turn is running."""
        if not self.conversation.running:
            return False
        self.conversation.cancel(reason)
        return True

    def view(self, out: TextIO, *, terminal: bool) -> TurnView:
        """A TurnView for the next turn, wired so that a stdout that fails cancels the turn."""

        def meter(usage: Usage | None) -> list[str]:  # the usage line's dollars (SPEC 15)
            return turn_meter(usage, self.conversation, self.tally, self.config.price)

        def output_failed(exc: OSError) -> None:
            # A reader that went away (`dsh ... | head`) is no failure of ours: say it plainly.
            if isinstance(exc, BrokenPipeError):
                self.conversation.cancel(OUTPUT_CLOSED)
            else:
                self.conversation.cancel(f"standard output failed: {error_chain(exc)}")

        if self.config.json:
            if self.json_view is None:
                self.json_view = JsonView(
                    out,
                    self.err,
                    self.conversation.log,
                    terminal=terminal,
                    on_output_error=output_failed,
                    meter=meter,
                )
            return self.json_view
        colour = terminal and colour_wanted(out)
        markdown = None
        if colour and not self.config.plain:
            from ..terminal.markdown import AnswerMarkdown, terminal_size, warm_up

            warm_up()  # the renderer loads while the request waits for the model
            markdown = AnswerMarkdown(lambda: terminal_size(out))
        return TurnView(
            out,
            self.err,
            terminal=terminal,
            show_reasoning=terminal or self.config.show_reasoning,
            colour=colour,
            on_output_error=output_failed,
            usage=not self.config.quiet,
            markdown=markdown,
            meter=meter,
        )

    @property
    def broken(self) -> bool:
        """The session cannot usefully go on: its log or stdout refused a write."""
        return self.log_failed or self.output_failed

    def status(self, end: TurnEnd) -> int:
        """The exit status this turn asks for, counting a log or stdout that failed."""
        return EXIT_FAILED if self.broken else turn_status(end)

    async def run_turn(self, text: str, view: TurnView) -> TurnEnd:
        """Run one turn and show it; a log that cannot be written fails the turn, not dsh.

        The failure is shown as ``[turn failed SESSION_LOG] ...`` and ``log_failed`` is set: a
        pipe stops there, since nothing more can be stored; the REPL goes on, and the loop
        ends the turn the failure left open before it starts the next. On a terminal, the
        waiting indicator shows until the first token and typing is not echoed meanwhile.
        """
        view.begin()
        view.show_waiting()
        self.current_view = view
        try:
            with quiet_terminal(self.stdin):
                await self.servers_ready(view)
                view.show_waiting()
                end = await self.conversation.run_turn(text, on_event=view.on_event)
        except SessionLogError as exc:
            end = self._unrecorded(exc)
        finally:
            self.current_view = None
        return self._shown(end, view)

    def reject_oversized(self, size: int, view: TurnView) -> TurnEnd:
        """Record and show a turn whose input line was too long to read whole."""
        view.begin()
        try:
            end = self.conversation.reject_oversized(size)
        except SessionLogError as exc:
            end = self._unrecorded(exc)
        return self._shown(end, view)

    def _unrecorded(self, exc: SessionLogError) -> TurnEnd:
        self.log_failed = True
        return TurnEnd(-1, "error", FailureRecord.from_exception(exc))  # -1: not in the log

    def _shown(self, end: TurnEnd, view: TurnView) -> TurnEnd:
        self.tally.update(self.conversation.log.events)  # before a /compact lets go of them
        view.finish(end, steps=self.conversation.max_steps)
        if view.output_error is not None:
            # stdout is what failed, so the one place left to say it is stderr.
            self.output_failed = True
            with contextlib.suppress(OSError, ValueError):
                reason = neutralise(error_chain(view.output_error))
                self.err.write(f"dsh: cannot write to standard output: {reason}\n")
                self.err.flush()
        return end

    async def close(self) -> bool:
        """End the session's jobs; close the log and the model; True when the session was
        kept (it has turns)."""
        if self.jobs is not None:
            self._closing.append(asyncio.ensure_future(self.jobs.close()))
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
        kept = self._close_log(self.conversation.log)
        if self.conversation.checkpoints is not None:
            self.conversation.checkpoints.close()
        if self.starting is not None:
            await self.starting.close()
        elif self.servers is not None:
            await self.servers.close()
        await self.model.close()
        show_library_logs(None)
        return kept


def shown_url(config: Config) -> str:
    """The base URL as dsh shows it: its user info, if any, redacted (as the adapter does),
    and the key masked (``?key=...``, SPEC 10.16)."""
    return mask(redact_url(config.base_url))
