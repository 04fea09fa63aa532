"""One run of dsh: the session log it writes, the model, and the conversation tying them.

The modes (``pipe.py``, ``repl.py``) differ only in where input comes from and how much
decoration a turn gets; opening and resuming the session, running and showing a turn, and the
exit status a turn asks for live here.
"""

from __future__ import annotations

import contextlib
import functools
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
from dsh_core.extensions.subagent import CHILD_TOOLS, SUBAGENT_WINDOW_ADVICE, SubagentTool
from dsh_core.model.deepseek import (
    CHAT_PATH,
    CONNECT_TIMEOUT,
    IDLE_TIMEOUT,
    READ_TIMEOUT,
    DeepSeekAdapter,
)
from dsh_core.model.seam import ChatModel, ToolCall
from dsh_core.model.urls import redact_url
from dsh_core.session import LoadReport, SessionLog, SessionStore, cwd_key
from dsh_core.session.events import TurnEnd
from dsh_core.tools import Launcher, Tool, Toolbox, Workspace, builtin_tools
from dsh_core.trust.workspace import child_environment

from .config import Config, StartupError
from .jsonout import JsonView
from .render import INTERRUPTED_LINE, neutralise
from .status import EXIT_FAILED, turn_status
from .tty import STDIN, colour_wanted, quiet_terminal
from .view import TurnView

if TYPE_CHECKING:
    from dsh_core.extensions.mcp.servers import McpServers
    from dsh_core.trust.policy import Kept

__all__ = ["OUTPUT_CLOSED", "TOOL_OUTPUT_DIR", "Runtime", "shown_url"]

TOOL_OUTPUT_DIR = "tool-output"
"""Beside the session log: the whole output of commands whose result was cut (0700, 0600)."""
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
    launcher: Launcher | None = None
    """How ``bash`` runs in this session (sandboxed or not), once a command asked; None
    before that, and with ``--no-tools``."""
    _choose_launcher: Callable[[], Launcher] | None = None
    """Chooses :attr:`launcher` for this session's tools; None with ``--no-tools``."""
    said_unsandboxed: bool = False
    """The one notice per run that commands run without a sandbox was given."""
    log_failed: bool = False
    """A turn could not be written to the session log."""
    output_failed: bool = False
    """Standard output refused a write (a full disk, a closed descriptor)."""
    servers: McpServers | None = None
    """The MCP servers of this run (started before the first session's tools are made)."""

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
            adapter = _adapter(config, terminal=terminal, clock=clock)
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
            from .commands.sessions import session_id

            log, report = store.open(session_id(store, config.resume))
            if log.parent is None:  # a subagent's is refused below, whatever its directory
                _enter_its_directory(log, err, stdin)
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
            for warning in await servers.start():
                err.write(f"dsh: {neutralise(warning)}\n")  # a server's words
        runtime = cls(config, store, model, log, err, stdin, window_advice, servers=servers)
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

    def new(self) -> SessionLog:
        """Start a fresh session (``/new``), keeping the model and its settings."""
        old = self.conversation
        log = self.store.create(Path.cwd())
        self.conversation = self._conversation(log, old.model_name)
        self.conversation.thinking = old.thinking  # as /think left it
        self._close_log(old.log)
        return log

    def resume(self, reference: str) -> tuple[SessionLog, LoadReport]:
        """Switch to the stored session ``reference`` (an id or its start) of this directory
        (``/resume ID``), keeping the model and its settings; raises HarnessError, with the
        way on, for one that cannot be resumed here."""
        from .commands.sessions import session_id

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
        self.launcher = None
        self._choose_launcher = None
        if config.tools:
            output_dir = log.path.parent / TOOL_OUTPUT_DIR
            workspace = Workspace.at(
                cwd, output_dir, dsh_home=config.home, started=self._servers_run_from()
            )
            self._choose_launcher = functools.partial(self._launcher_for, workspace)
            skills = discover_skills(cwd)
            self._warn(skills.warnings)
            tools: list[Tool] = builtin_tools(workspace, launcher=self._launcher_now)
            if skills.skills:
                tools.append(SkillTool(skills, workspace))
            tools.append(SubagentTool(lambda call: self._child(log, call, skills), output_dir))
            if self.servers is not None:
                tools += self.servers.tools(output_dir)
            toolbox = Toolbox(tools)
        prompt: str | None = None
        if not log.events:  # a resumed session keeps the system prompt it recorded
            prompt = self._system_prompt(cwd, toolbox, skills, warn=True)
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
        )

    def _servers_run_from(self) -> tuple[Kept, ...]:
        """What the configured MCP servers run from: protected where inside, whether they
        started or not (the next start, from elsewhere, would run them)."""
        if not self.config.servers:
            return ()
        from dsh_core.extensions.mcp.launch import server_files

        return server_files(self.config.servers, child_environment(), Path.home())

    def _system_prompt(
        self, cwd: Path, toolbox: Toolbox, skills: SkillCatalog, *, warn: bool
    ) -> str | None:
        context = system_prompt(cwd, tools=toolbox.names, first_part=self.config.system)
        if warn:
            self._warn(context.warnings)
        return (context.text + skills_section(skills)) or None

    def _warn(self, warnings: tuple[str, ...]) -> None:
        for warning in warnings:
            self.err.write(f"dsh: {neutralise(warning)}\n")  # file names from a repository

    def _child(self, parent: SessionLog, call: ToolCall, skills: SkillCatalog) -> Conversation:
        """A subagent's conversation for ``call`` of the session ``parent`` (SPEC 13)."""
        config = self.config
        cwd = Path.cwd()
        log = self.store.create(cwd, parent=parent, call_id=call.id)
        workspace = Workspace.at(cwd, log.path.parent / TOOL_OUTPUT_DIR, dsh_home=config.home)
        tools = [tool for tool in builtin_tools(workspace) if tool.spec.name in CHILD_TOOLS]
        if skills.skills:
            tools.append(SkillTool(skills, workspace))
        toolbox = Toolbox(tools)
        parent_now = self.conversation  # /model and /think apply to its subagents too
        return Conversation(
            self.model,
            log,
            model_name=parent_now.model_name,
            max_tokens=config.max_tokens,
            max_steps=config.max_steps,
            context_window=parent_now.context_window,
            auto_compact=parent_now.auto_compact,
            window_advice=SUBAGENT_WINDOW_ADVICE,  # read by the parent's model
            thinking=parent_now.thinking,
            reasoning_effort=parent_now.reasoning_effort,
            toolbox=toolbox,
            # Nobody can be asked from inside a call: what needs a question is refused.
            approval=ApprovalPolicy(
                config.allow & {"read"}, None, unattended="a subagent cannot ask anyone"
            ),
            system_prompt=self._system_prompt(cwd, toolbox, skills, warn=False),
        )

    def _close_log(self, log: SessionLog) -> bool:
        # An unused session is not kept: --continue should find the conversation before it.
        if log.discard_if_empty():
            return False
        log.close()
        return True

    def _sandbox_chosen(self, launcher: Launcher) -> None:
        """``--sandbox auto`` chose at the first command: say it once per run if it is none."""
        from dsh_core.trust.sandbox import INSTALL_HINT, Bwrap

        if isinstance(launcher, Bwrap) or self.said_unsandboxed:
            return
        self.said_unsandboxed = True
        why = launcher.note.removeprefix("(not sandboxed: ").removesuffix(")")
        text = f"commands run without a sandbox: {why}; to have one: {INSTALL_HINT}"
        if self.current_view is not None:
            self.current_view.notice(text)
        else:
            self.err.write(f"dsh: {neutralise(text)}\n")

    def _launcher_for(self, workspace: Workspace) -> Launcher:
        """How ``bash`` runs in this session: chosen (and the sandbox's code loaded) when a
        command first needs it, so that a turn without commands costs none of it."""
        from dsh_core.trust.sandbox import choose_launcher

        return choose_launcher(
            self.config.sandbox,
            workspace=workspace,
            network="network" in self.config.allow,
            on_chosen=self._sandbox_chosen,
        )

    def _launcher_now(self) -> Launcher:
        if self.launcher is None:
            assert self._choose_launcher is not None  # set with the session's tools
            self.launcher = self._choose_launcher()
        return self.launcher

    def sandbox_state(self) -> str:
        """For ``/session``: whether commands run sandboxed, and how."""
        from dsh_core.trust.sandbox import AutoSandbox

        if self._choose_launcher is None:
            return "no tools (--no-tools)"
        launcher = self._launcher_now()
        if isinstance(launcher, AutoSandbox) and launcher.chosen is None:
            return f"auto: {launcher.note} (checked now; it is decided at the first command)"
        return launcher.note

    def cancel_turn(self, reason: str) -> bool:
        """Cancel the running turn with ``reason``; False when no turn is running."""
        if not self.conversation.running:
            return False
        self.conversation.cancel(reason)
        return True

    def view(self, out: TextIO, *, terminal: bool) -> TurnView:
        """A TurnView for the next turn, wired so that a stdout that fails cancels the turn."""

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
                )
            return self.json_view
        colour = terminal and colour_wanted(out)
        markdown = None
        if colour and not self.config.plain:
            from .terminal.markdown import AnswerMarkdown, terminal_size, warm_up

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
        """Close the log and the model; True when the session was kept (it has turns)."""
        kept = self._close_log(self.conversation.log)
        if self.servers is not None:
            await self.servers.close()
        await self.model.close()
        return kept


def _enter_its_directory(log: SessionLog, err: TextIO, stdin: int) -> None:
    """Run a resumed session in the directory it was started in, once a person said so when
    that is not here: its tools and its recorded system prompt are about that directory.

    The directory comes only from a header dsh wrote (SPEC 10.14): dsh stores a session under
    the key of the directory its header names, so a header changed since (a command that
    could write ``DSH_HOME`` pointing ``cwd`` at ``/``) is found out and refused. A different
    directory is asked about on a terminal and refused on a pipe, with the way out; one that
    cannot be entered any more is refused too. Raises StartupError.
    """
    if log.path.parent.parent.name != cwd_key(log.cwd):
        log.close()
        raise StartupError(
            f"session {log.id} says it was started in {log.cwd}, but it is not stored as a "
            "session of that directory: its header was changed after dsh wrote it, and dsh "
            "does not run where it says; start a new session (dsh without -r)"
        )
    here = os.path.abspath(Path.cwd())
    if log.cwd == here:
        return
    elsewhere = f"session {log.id} was started in {log.cwd}"
    try:
        directory = os.open(log.cwd, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        log.close()
        raise StartupError(
            f"{elsewhere}, which cannot be entered now; "
            "start a new session (dsh without -r), or restore that directory"
        ) from exc
    try:
        if not os.isatty(stdin) or not _confirmed(
            f"dsh: {elsewhere}: run there? [y/N]: ", stdin, err
        ):
            log.close()
            said = "" if os.isatty(stdin) else " (stdin is not a terminal: nobody to ask)"
            raise StartupError(
                f"{elsewhere}, not here{said}; to resume it there: cd {log.cwd} && dsh -r {log.id}"
            )
        os.fchdir(directory)  # the directory the person was asked about, not a later swap
    finally:
        os.close(directory)
    err.write(neutralise(f"dsh: {elsewhere}: running there") + "\n")


def _confirmed(question: str, stdin: int, err: TextIO) -> bool:
    """Ask ``question`` on the terminal (before any prompt exists: a line, as typed); whether
    the answer was yes. The default, Enter, is no."""
    err.write(neutralise(question))
    err.flush()
    try:
        answer = os.read(stdin, 1024).decode("utf-8", "replace").strip().lower()
    except OSError:
        return False
    return answer in ("y", "yes")


def shown_url(config: Config) -> str:
    """The base URL as dsh shows it: its user info, if any, redacted (as the adapter does)."""
    return redact_url(config.base_url)


def _adapter(config: Config, *, terminal: bool, clock: Clock) -> DeepSeekAdapter:
    wait = config.timeout  # one knob for every wait; connecting keeps its own cap
    return DeepSeekAdapter(
        base_url=config.base_url,
        api_key=config.api_key,
        clock=clock,
        connect_timeout=CONNECT_TIMEOUT if wait is None else min(CONNECT_TIMEOUT, wait),
        read_timeout=READ_TIMEOUT if wait is None else wait,
        idle_timeout=IDLE_TIMEOUT if wait is None else wait,
        # On a pipe reasoning is hidden: a stream cut after reasoning only showed nothing, and
        # may be retried. A terminal shows it; so do --show-reasoning and --json.
        reasoning_shown=terminal or config.show_reasoning or config.json,
    )
