"""Terminal mode: one prompt_toolkit ``PromptSession`` and ``await prompt_async()`` in a loop.

Enter sends, Alt-Enter (Esc then Enter) inserts a newline, history lives in
``$DSH_HOME/history`` (0600). Ctrl-C at the prompt clears the line; Ctrl-C during a turn cancels
only that turn. prompt_toolkit removes the loop's SIGINT handler each time a prompt ends, so the
"cancel the turn" handler is installed for each turn, after ``prompt_async`` returns.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent, merge_key_bindings

from dsh_core.agent.compaction import NotCompacted
from dsh_core.chain import error_chain
from dsh_core.errors import SANDBOX_ESCAPE, HarnessError
from dsh_core.session.events import TurnStart

from ..config import StartupError
from ..render import neutralise
from ..run.runtime import Runtime, shown_url
from ..run.spending import usage_rows
from ..signals import Stopper
from ..status import EXIT_FAILED, EXIT_OK
from ..tty import colour_wanted
from .approve import TerminalQuestion
from .bell import Attention
from .compose import Composer
from .editor import editor_bindings
from .undo import UndoCommands

__all__ = ["COMMANDS", "mcp_text", "run_repl"]

COMMANDS = {
    "/help": "show this help",
    "/exit": "leave; so do /quit, exit or quit alone on a line, and Ctrl-D on an empty line",
    "/new": "start a fresh session",
    "/model NAME": "use another model for the next turns",
    "/think on|off": "thinking mode for the next turns (alone: how it is now)",
    "/compact [FOCUS]": "prune and summarise the conversation now, keeping FOCUS in detail",
    "/usage": "this session's tokens (cache hit / miss), requests, cost, and the context now",
    "/session": "this session: id, log, model, base URL, directory, sandbox, undo, grants",
    "/resume ID": "switch to another session of this directory (Tab lists their ids)",
    "/mcp": "the MCP servers: how each is reached, its state, its tools",
    "/mcp restart NAME": "stop an MCP server and start it again",
    "/jobs": "this session's background jobs: id, state, time, output, command",
    "/undo": "take back what the last turn that changed files did to them",
    "/redo": "put back what the last /undo took back",
    "/rewind [TURN]": "files as before that turn, and it and the later turns withdrawn",
    "//TEXT": "send a message that starts with / (//etc/hosts sends /etc/hosts)",
}

LEAVING = frozenset({"/exit", "/quit", "exit", "quit"})
"""Lines that leave, as ``llm chat`` and shells take them."""
HOW_TO_LEAVE = "dsh: Ctrl-C clears the line; to leave: Ctrl-D on an empty line, /exit or exit"


def _create_prompt_bindings() -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        """Alt-Enter (or Esc then Enter) inserts a newline instead of sending."""
        event.current_buffer.insert_text("\n")

    return bindings


class _History(FileHistory):
    """prompt_toolkit's file history, private (0600), and unable to crash the REPL.

    A history line that cannot be written (a full disk) is reported once, as one line, and
    the REPL goes on: losing the Up-arrow copy of a line is no reason to stop a chat.
    """

    def __init__(self, home: Path, out: TextIO) -> None:
        path = home / "history"
        try:
            home.mkdir(mode=0o700, parents=True, exist_ok=True)
            # Created 0600 before prompt_toolkit opens it for appending with the default mode.
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
            os.chmod(path, 0o600)
        except OSError as exc:
            raise StartupError(f"cannot use the history file {path}") from exc
        super().__init__(str(path))
        self._out = out
        self._failed = False

    def store_string(self, string: str) -> None:
        try:
            super().store_string(string)
        except OSError as exc:
            if not self._failed:
                self._failed = True
                self._out.write(f"dsh: history not saved: {neutralise(error_chain(exc))}\n")


def _help_text() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = [f"  {name.ljust(width)}  {what}" for name, what in COMMANDS.items()]
    return (
        "commands:\n"
        + "\n".join(lines)
        + "\n  Enter sends, Alt-Enter inserts a newline; Ctrl-C cancels a running turn and "
        "clears the line at the prompt."
        "\n  Tab completes commands, their arguments and @paths; @PATH attaches a file to the "
        "message; !COMMAND runs a command of yours and offers its output with the next message "
        "(!!TEXT sends !TEXT); Ctrl-X Ctrl-E edits the message in $EDITOR; a line entered "
        "while a turn runs is queued for the next turn (Ctrl-C drops it)."
    )


class _Commands:
    """The slash commands; each returns False when the REPL should end."""

    def __init__(self, runtime: Runtime, out: TextIO) -> None:
        self._runtime = runtime
        self._out = out
        self.undo = UndoCommands(runtime, out)

    async def run(self, line: str) -> bool:
        name, _, argument = line.strip().partition(" ")
        argument = argument.strip()
        match name:
            case "/exit" | "/quit":
                return False
            case "/help":
                self._say(_help_text())
            case "/new":
                log = self._runtime.new()
                self._say(f"new session {log.id}")
            case "/model":
                if not argument or len(argument.split()) > 1:
                    current = self._runtime.conversation.model_name
                    self._say(f"model: {current} (usage: /model NAME, one word)")
                else:
                    self._runtime.conversation.model_name = argument
                    self._say(f"model: {argument}")
            case "/think":
                conversation = self._runtime.conversation
                if argument in ("on", "off"):
                    conversation.thinking = argument == "on"
                    self._say(f"thinking: {argument} for the next turns")
                else:
                    now = _thinking_text(conversation.thinking)
                    self._say(f"thinking: {now} (usage: /think on, or /think off)")
            case "/compact":
                await self._compact(argument or None)
            case "/usage":
                self._say(_usage_text(self._runtime))
            case "/session":
                self._say(_session_text(self._runtime))
            case "/mcp":
                await self._mcp(argument)
            case "/jobs":
                jobs = self._runtime.jobs
                self._say(jobs.listing() if jobs is not None else "no background jobs yet")
            case "/undo":
                await self.undo.undo()
            case "/redo":
                await self.undo.redo()
            case "/rewind":
                await self.undo.rewind(argument)
            case "/resume":
                await self._resume(argument)
            case _:
                commands = " ".join(c.split()[0] for c in COMMANDS if not c.startswith("//"))
                self._say(f"unknown command {name}; commands: {commands}")
        return True

    def _say(self, text: str) -> None:
        self._out.write(neutralise(text) + "\n")  # it may echo what was typed (/model NAME)
        self._out.flush()

    async def _mcp(self, argument: str) -> None:
        """``/mcp``: the servers; ``/mcp restart NAME``: that server, stopped and started."""
        runtime = self._runtime
        verb, _, name = argument.partition(" ")
        if not argument:
            import shutil  # with bz2 and lzma: kept out of startup

            self._say(mcp_text(runtime, columns=shutil.get_terminal_size().columns))
            return
        servers = runtime.servers
        if verb != "restart" or not name.strip() or servers is None:
            names = ", ".join(servers.names) if servers is not None else "none configured"
            self._say(f"usage: /mcp, or /mcp restart NAME (servers: {names})")
            return
        name = name.strip()
        if name not in servers.names:
            self._say(f"no MCP server {name!r}; the servers: {', '.join(servers.names)}")
            return
        if runtime.starting is not None and not runtime.starting.ready:
            self._say("the MCP servers are still starting; /mcp shows how far")
            return
        self._say(f"restarting MCP server {name} ...")
        for warning in await servers.restart(name):
            self._say(f"dsh: {warning}")
        runtime.refresh_tools()
        (status,) = [status for status in servers.status() if status.name == name]
        self._say(
            f"{name}: {status.state}" + (f", {len(status.tools)} tools" if status.tools else "")
        )

    async def _resume(self, reference: str) -> None:
        """``/resume ID``: this directory's session ``ID`` (or the start of its id)."""
        if not reference or len(reference.split()) > 1:
            self._say("usage: /resume ID (Tab lists this directory's sessions)")
            return
        try:
            _, report = self._runtime.resume(reference)
        except HarnessError as exc:
            self._say(f"dsh: not resumed: {error_chain(exc)}")
            return
        for notice in report.notices:
            self._say(f"dsh: {notice}")
        await _show_resumed(self._runtime, self._out)
        self._out.flush()

    async def _compact(self, focus: str | None) -> None:
        """``/compact [focus]``: its lines (or why not) show as a turn's would; Ctrl-C cancels
        it."""
        runtime = self._runtime
        view = runtime.current_view = runtime.view(self._out, terminal=True)
        view.show_waiting(view.COMPACTING)
        failure: str | None = None
        try:
            done = await runtime.conversation.compact(on_event=view.on_event, focus=focus)
            if isinstance(done, NotCompacted):
                failure = done.reason
        except HarnessError as exc:
            failure = f"not compacted: {error_chain(exc)}"
        finally:
            runtime.current_view = None
            view.pause()
        if failure is not None:
            self._say(f"dsh: {failure}")


def _thinking_text(thinking: bool | None) -> str:
    return "the model's default" if thinking is None else "on" if thinking else "off"


def _usage_text(runtime: Runtime) -> str:
    """``/usage``: the session's tokens over every request (summaries too), and the context."""
    conversation = runtime.conversation
    usage = conversation.keeper.usage
    window, size = conversation.keeper.window, conversation.keeper.size
    compactions = f", {usage.compactions} compacted" if usage.compactions else ""
    context = (
        f"about {size:,} of {window:,} tokens ({size / window:.0%})"
        if window
        else f"about {size:,} tokens (the window is not known: the server decides)"
    )
    rows = [
        (
            "in",
            f"{usage.prompt_tokens:,} tokens (cache hit {usage.cache_hit_tokens:,} / miss "
            f"{usage.cache_miss_tokens:,})",
        ),
        ("out", f"{usage.completion_tokens:,} tokens"),
        ("requests", f"{usage.requests:,}{compactions}"),
        *usage_rows(conversation, runtime.tally, runtime.config.price),  # dollars (SPEC 15)
        ("context", context),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name.ljust(width)}  {value}" for name, value in rows)


def _session_text(runtime: Runtime) -> str:
    """``/session``: what this session talks to, where it works, and what it may do."""
    conversation = runtime.conversation
    config = runtime.config
    granted = ", ".join(sorted(config.allow)) or "none"
    always = (
        ", ".join(
            f'{tool} "{scope} ..."' if scope else tool
            for tool, scope in sorted(conversation.approval.always)
        )
        or "none"
    )
    rows = [
        ("session", conversation.log.id),
        ("log", str(conversation.log.path)),
        ("model", conversation.model_name),
        ("thinking", _thinking_text(conversation.thinking)),
        ("window", _window_text(conversation.keeper.window)),
        ("base URL", shown_url(config)),
        ("directory", os.getcwd()),
        ("sandbox", runtime.sandbox_state()),
        ("undo", runtime.undo_state()),
        ("grants", f"--allow: {granted}; always this session: {always}"),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name.ljust(width)}  {neutralise(value)}" for name, value in rows)


def mcp_text(runtime: Runtime, *, columns: int = 80) -> str:
    """``/mcp``: each server, how it is reached, its state (and why, when it is not running),
    its tools by their names on the server (each is offered as ``mcp__<server>__<name>``),
    wrapped at ``columns`` between names, never inside one. Neutralised by the caller: these
    are its words."""
    servers = runtime.servers
    if servers is None:
        where = runtime.config.home / "config.toml"
        off = " (--no-tools)" if not runtime.config.tools and runtime.config.servers else ""
        return f"no MCP servers{off}; they are configured in {where}"
    lines = []
    for status in servers.status():
        state = f"{status.state}: {status.detail}" if status.detail else status.state
        lines.append(f"{status.name} ({status.where}): {state}")
        if status.tools:
            prefix = f"mcp__{status.name}__"
            names = [name.removeprefix(prefix) for name in status.tools]
            lines += _wrapped(f"  tools ({prefix}...): ", names, columns)
    return "\n".join(lines)


def _wrapped(head: str, words: list[str], columns: int) -> list[str]:
    """``head`` then ``words`` comma-separated, in lines of at most ``columns`` (a longer word
    stands alone on its line): never broken inside a word."""
    lines: list[str] = []
    line = head
    indent = " " * 4
    for index, word in enumerate(words):
        word += "," if index < len(words) - 1 else ""
        if line.strip() and line not in (head, indent) and len(line) + 1 + len(word) > columns:
            lines.append(line)
            line = indent + word
        else:
            line += ("" if line in (head, indent) else " ") + word
    lines.append(line)
    return lines


def _window_text(window: int | None) -> str:
    if window is None:
        return "not known: the server's refusal decides (--context-window N sets it)"
    return f"{window:,} tokens"


async def _show_resumed(runtime: Runtime, out: TextIO) -> None:
    """Say which session this is, how many turns it holds, and its last exchange."""
    log = runtime.conversation.log
    starts = [i for i, event in enumerate(log.events) if isinstance(event.record, TurnStart)]
    turns = len(starts)
    out.write(f"dsh: resumed session {log.id} ({turns} turn{'' if turns == 1 else 's'})\n")
    if starts:
        from ..commands.sessions import replay_events  # only a resume shows a stored turn

        out.write("dsh: the last exchange:\n")
        describe = runtime.conversation.toolbox.describe
        await replay_events(log.events[starts[-1] :], out, runtime.err, True, describe)


def _session_ids(runtime: Runtime) -> list[str]:
    """This directory's sessions, newest first (what ``/resume ID`` completes)."""
    try:
        summaries = runtime.store.summaries(Path.cwd())
    except HarnessError:
        return []
    return [summary.id for summary in summaries if summary.id != runtime.conversation.log.id]


async def run_repl(runtime: Runtime, out: TextIO) -> int:
    """The interactive loop; returns the exit status (0 for Ctrl-D and /exit, 143 on SIGTERM)."""
    colour = colour_wanted(out)
    composer = Composer(runtime, out, colour=colour)
    attention = Attention(runtime.config.notify, out)

    def say(text: str) -> None:
        out.write(neutralise(text) + "\n")
        out.flush()

    editor: PromptSession[str] = PromptSession(
        history=_History(runtime.config.home, out),
        key_bindings=merge_key_bindings([_create_prompt_bindings(), editor_bindings(say)]),
        enable_suspend=True,  # Ctrl-Z at the prompt suspends, as it does during a turn
        completer=composer.completer(COMMANDS, sessions=lambda: _session_ids(runtime)),
        complete_while_typing=False,  # Tab asks; typing a message shows no menu
    )
    commands = _Commands(runtime, out)
    loop = asyncio.get_running_loop()

    def ctrl_c() -> None:
        """Ctrl-C during a turn: cancel it, and drop the lines queued for after it. Before
        its first request a turn may wait for MCP servers: Ctrl-C stops that wait."""
        if runtime.cancel_turn("user"):
            composer.drop_queue()
        elif runtime.starting is not None:
            runtime.starting.stop_waiting()

    def arm_ctrl_c() -> None:
        # prompt_toolkit removed the loop's SIGINT handler as the prompt ended. Until the next
        # prompt replaces it, Ctrl-C cancels the running turn (idle: nothing). Never removed
        # here: a second Ctrl-C must not find Python's KeyboardInterrupt instead.
        loop.add_signal_handler(signal.SIGINT, ctrl_c)

    def show_turn_so_far() -> None:
        if runtime.current_view is not None:
            composer.typeahead.pause()  # what is queued never answers the question
            runtime.current_view.before_question()
            attention.question()

    def go_on() -> None:
        arm_ctrl_c()
        if runtime.current_view is not None:
            composer.typeahead.listen()
            runtime.current_view.after_question()  # the call runs now: its live line

    question = TerminalQuestion(
        out,
        before=show_turn_so_far,
        after=go_on,
        cancel_turn=runtime.cancel_turn,
        colour=colour,
        stdin=runtime.stdin,
        undo=runtime.undo_directory,
    )

    def above_the_prompt(text: str) -> None:
        """A notice between turns (a server's warning): printed above the prompt."""
        from prompt_toolkit.application import get_app_or_none, run_in_terminal

        def write() -> None:
            out.write(f"dsh: {text}\n")
            out.flush()

        if get_app_or_none() is None:
            write()
        else:
            run_in_terminal(write)

    runtime.say = above_the_prompt
    runtime.ask_on(question)
    runtime.ask_user_on(question.ask_user)  # the model's own questions: the same machinery
    # prompt_toolkit leaves SIGTERM and SIGHUP alone; SIGINT is handled per prompt and turn.
    stopper = Stopper(runtime.cancel_turn, signal.SIGTERM, signal.SIGHUP)
    out.write("dsh: Enter sends, Alt-Enter adds a line, /help for commands, Ctrl-D leaves.\n")
    if runtime.resumed:
        await _show_resumed(runtime, out)
    out.flush()
    try:
        while stopper.status is None:
            queued = composer.next_queued()  # entered while the last turn ran
            try:
                draft = commands.undo.take_draft() or composer.take_draft()  # /rewind's message
                line = (
                    queued if queued is not None else await editor.prompt_async("> ", default=draft)
                )
            except KeyboardInterrupt:
                # Ctrl-C at the prompt clears the line; on an empty one, say how to leave.
                if not editor.default_buffer.text:
                    out.write(HOW_TO_LEAVE + "\n")
                    out.flush()
                continue
            except EOFError:
                break
            arm_ctrl_c()
            if not line.strip():
                continue
            if line.strip() in LEAVING:
                break
            if line.startswith(("//", "!!")):
                line = line[1:]  # "//etc/hosts ..." sends "/etc/hosts ...", "!!" a "!"
            elif line.startswith("/"):
                if not await commands.run(line):
                    break
                continue
            elif line.startswith("!"):
                await composer.own_command(line[1:])
                arm_ctrl_c()
                continue
            message = await composer.message(line)  # @paths attached, !outputs offered
            if message is None:
                continue
            started = time.monotonic()
            composer.typeahead.listen()
            try:
                end = await runtime.run_turn(message, runtime.view(out, terminal=True))
            finally:
                composer.typeahead.pause()
            attention.turn_ended(time.monotonic() - started)
            if end.failure is not None and end.failure.code == SANDBOX_ESCAPE:
                # What the command left would run outside the sandbox: no next turn (SPEC 10.12).
                out.write("dsh: stopped: the sandbox could not undo what a command left\n")
                out.flush()
                return EXIT_FAILED
    except asyncio.CancelledError:
        if stopper.status is None:
            raise
    finally:
        stopper.remove()
    return stopper.status if stopper.status is not None else EXIT_OK
