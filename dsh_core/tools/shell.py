"""The ``bash`` tool: a command line run in the working directory (SPEC section 7).

    tool = BashTool(workspace)                          # Toolbox([..., tool])
    invocation = tool.prepare({"command": "pytest -q", "timeout_s": 300})
    output = await invocation.run()                     # "...\\n[exit code: 1]", exit_code=1

``bash -c <command>`` (``sh -c`` when the child's ``PATH`` has no bash) runs through
:func:`~dsh_core.tools.process.run_child`: its own process group, stdin ``/dev/null``, stdout
and stderr interleaved, the environment without the API key, ended with escalation at its
timeout or when the turn is cancelled, and nothing of its group left behind.

The result is the output, capped at 30,000 characters (head and tail kept, a line in between
saying how much was cut and naming the 0600 file that holds it all), then ``[exit code: N]``
for a non-zero status or ``[killed by signal N (SIGX)]``. A timeout is a failure
(``command timed out after N s``) with the partial output after it; a cancelled call is an
``ABORTED`` failure with its partial output.

How the shell is started is a :class:`~dsh_core.trust.launchers.Launcher`'s business: for each
command it gives a :class:`~dsh_core.trust.launchers.Launch` (the command line that is run,
descriptors to pass, where Ctrl-C goes, and lines for the result once it ended), and it names what
the approval question says about it (:data:`~dsh_core.trust.launchers.UNSANDBOXED`: ``(not
sandboxed)``). A :class:`~dsh_core.trust.launchers.Sandbox` is a launcher that confines the command,
as bubblewrap does (:mod:`dsh_core.trust.sandbox`: ``bwrap ... -- bash -c <command>``, writing only
in the working directory, no network). The shell itself is never taken from a ``PATH`` directory
inside the working directory. A call may ask to leave it (``sandbox: false`` with a
``justification``: its :class:`~dsh_core.tools.base.Access` has ``leaves_sandbox``, which is always
asked about), and a command that exits non-zero inside it gets a last line saying what the sandbox
forbids. A :class:`~dsh_core.trust.launchers.DeferredLauncher` chooses its launcher at the first
call (``--sandbox auto`` probes bwrap only then).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, assert_never

from ..errors import ABORTED
from ..model.seam import ToolSpec
from ..trust.confinement import on_path
from ..trust.launchers import UNSANDBOXED, DeferredLauncher, Launcher, Sandbox
from ..trust.planted import planted
from ..trust.workspace import Workspace
from . import specs
from .base import Access, Invocation, SandboxEscape, ToolError, ToolOutput
from .process import DEFAULT_TIMINGS, CappedOutput, Completion, Timings, run_child, signal_name
from .specs import DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S, MIN_TIMEOUT_S, OUTPUT_LIMIT

__all__ = ["LEAVING_NOTE", "BashTool", "command_word", "shell_argv"]

LEAVING_NOTE = "(not sandboxed: the model asks to run it outside the sandbox)"
"""The question's note for ``sandbox: false``; the model's justification is quoted apart."""

_PLAIN_WORD = re.compile(r"[A-Za-z0-9_./+-]{1,100}")
"""A program name or path: no assignment (``PATH=. pytest``), quote or expansion in it."""
_NOT_SIMPLE = re.compile(r"[;&|<>()`$\\\n\r{}]")
"""What makes a command line more than one program with plain arguments: lists, pipes,
redirections, subshells, substitutions and expansions, escapes, more than one line."""
_PLAIN_TEXT = re.compile(r"[\x20-\x7e\t\n]*")
"""Printable ASCII, spaces, tabs and newlines: where the words are what they look like. Bash
splits words at space, tab and newline only; ``ls\u00a0/../run.sh`` is one word to it, a path
to ``./run.sh``, while Python's ``str.split`` and a person's eye see ``ls``."""
_BLANKS = re.compile(r"[ \t\n]+")
"""What bash splits words at."""

# Programs an "always" must never cover: what their arguments name is run, so an "always" for
# the first word would cover any code (SPEC 12). The class is open (any program with an option
# that starts another); this is a guard for the common ones, and the sandbox is the boundary.
_NO_ALWAYS_NAMES = """
    bash sh dash zsh ksh mksh fish csh tcsh busybox toybox env sudo doas su runuser pkexec
    xargs parallel eval exec command builtin nohup nice ionice chrt taskset timeout time watch
    setsid stdbuf unbuffer flock chroot unshare nsenter firejail systemd-run script strace
    ltrace gdb valgrind perf entr at batch tmux screen expect direnv

    python pypy perl ruby node nodejs deno bun php lua luajit tclsh wish R Rscript julia awk
    gawk mawk nawk sed ed ex vi vim nvim emacs osascript pwsh powershell java jshell groovy
    scala erl escript ghc runghc m4 sqlite3 coverage

    make gmake cmake ninja meson scons bazel just task rake invoke gradle gradlew mvn mvnw ant
    sbt

    npx npm yarn pnpm pnpx bunx uvx uv pipx pip poetry pdm hatch pipenv conda mamba
    micromamba pixi rye tox nox cargo go gem bundle bundler composer dotnet

    find tar rsync ssh scp sftp man less more zip

    gcc g++ cc c++ cpp clang clang++ ld openssl pandoc ctags
"""
_NO_ALWAYS = frozenset(_NO_ALWAYS_NAMES.split())
"""By group: shells and what runs its arguments as a command (a terminal multiplexer's new
window, ``expect``'s script, ``direnv exec``); interpreters, whose arguments are code (``-c``,
``-e``, a sed or awk program, sqlite3's ``.shell``, ``coverage run``); build tools and task
runners, which run what a file the model can write says; package managers and runners, which
fetch programs or run a project's scripts; programs with an option that runs a command (``find
-exec``, ``tar --to-command``, ``rsync -e``, ``ssh -o ProxyCommand``, ``man -P``, ``less``
``!``); compilers, linkers and converters, whose many options load a program or a plugin
(``gcc -wrapper``, ``-B``, ``-fplugin=``, ``ld -plugin``, ``openssl engine -pre SO_PATH:``,
``pandoc --filter``), and ``ctags``, which also reads its options from ``./.ctags`` (its
``--xcmd-<LANG>=`` runs a program). A version after the name (``python3.11``, ``pip3``,
``gcc-12``) is the same program."""

_RUNNING_OPTIONS: dict[str, tuple[str, ...]] = {
    "sort": ("--compress-program",),
    "rg": ("--pre", "--pre-glob", "--hostname-bin"),
    "fd": ("-x", "-X", "--exec", "--exec-batch"),
    "fdfind": ("-x", "-X", "--exec", "--exec-batch"),
    "split": ("--filter",),
    "install": ("--strip-program",),
    "diff3": ("--diff-program",),
    "sdiff": ("--diff-program",),
    "wget": ("--use-askpass", "-e", "--execute", "--config"),
    "cpio": ("--rsh-command",),
    "ssh-keygen": ("-D", "-w"),
    "ssh-add": ("-s", "-S"),
    "git": (
        "--upload-pack",
        "--receive-pack",
        "--exec",
        "--extcmd",
        "--tool",
        "--open-files-in-pager",
        "-O",
        "--template",
        "--config",
        "--output",
        "--output-directory",
    ),
    "git clone": ("-u", "-c"),
    "git format-patch": ("-o",),
    "git archive": ("-o",),
}
"""Options that name a program to run, or configuration that does, by program (and by git
subcommand): ``sort --compress-program=``, ``rg --pre``, ``rg --hostname-bin=``, ``fd -x``,
``git fetch --upload-pack=``, ``git grep -O<pager>``, ``git clone --template=`` (its hooks run
at the checkout), ``git clone -c core.hooksPath=``, ``split --filter=``, ``ssh-keygen -D`` (a
library it loads), ``wget -e use_askpass=``; and git's options that write a file anywhere, its
own configuration too (``git log --output=.git/config``, ``git format-patch -o .git/hooks``). A
long option counts by any prefix (getopt and git take an unambiguous one: ``--compress-prog``),
a short one anywhere in a cluster (``-Hx``)."""

_GIT_GLOBAL_OPTION = re.compile(r"-")
"""Any option before git's subcommand: ``-c``, ``--config-env``, ``-C``, ``--git-dir``,
``--exec-path`` change what git runs or where it reads its configuration from."""
_GIT_RUNNING_NAMES = """
    config submodule bisect rebase filter-branch difftool mergetool daemon instaweb send-email
    credential credential-store credential-cache web--browse help archimport cvsimport
    cvsserver svn p4 upload-pack receive-pack shell http-backend remote-ext
"""
_GIT_RUNNING = frozenset(_GIT_RUNNING_NAMES.split())
"""git subcommands that run a command they are given, or write configuration that does."""


def command_word(command: str) -> str | None:
    """The first word of ``command`` when it is one simple command that an "always" answer
    may cover (``pytest`` for ``pytest -q tests``); None otherwise.

    Conservative by design: a command with anything the shell would treat as more than a
    program and its arguments (``pytest; rm -rf ~``, ``pytest $(curl ...)``, two lines) has
    no first word to trust, and neither has one that is not plain ASCII (where a word may not
    be what it looks like), one that only runs another (``env``, ``sudo``), one whose
    arguments are code (``python -c``, ``sed``, ``make``, ``npx``; see :data:`_NO_ALWAYS`),
    one with an option that runs a program or writes git's files (:data:`_RUNNING_OPTIONS`),
    nor a ``git`` with a global option or a subcommand that runs what it is told.
    """
    command = command.strip(" \t\n")  # a trailing newline changes nothing that runs
    if _NOT_SIMPLE.search(command) or not _PLAIN_TEXT.fullmatch(command):
        return None
    words = _BLANKS.split(command)
    first = words[0]
    if not _PLAIN_WORD.fullmatch(first):
        return None
    program = first.rsplit("/", 1)[-1]
    if program in _NO_ALWAYS or program.rstrip("0123456789.-") in _NO_ALWAYS:
        return None
    arguments = words[1:]
    if program == "git":
        if not arguments:
            return first
        if _GIT_GLOBAL_OPTION.match(arguments[0]) or arguments[0] in _GIT_RUNNING:
            return None
        if _runs_code(_RUNNING_OPTIONS.get(f"git {arguments[0]}", ()), arguments[1:]):
            return None
    if _runs_code(_RUNNING_OPTIONS.get(program, ()), arguments):
        return None
    return first


def _runs_code(running: tuple[str, ...], arguments: list[str]) -> bool:
    """Whether ``arguments`` hold one of the ``running`` options (see :data:`_RUNNING_OPTIONS`)."""
    longs = tuple(option for option in running if option.startswith("--"))
    shorts = "".join(option[1] for option in running if not option.startswith("--"))
    for argument in arguments:
        if argument.startswith("--"):
            name = argument.split("=", 1)[0]
            if len(name) > 2 and any(option.startswith(name) for option in longs):
                return True
        elif argument.startswith("-") and any(letter in shorts for letter in argument[1:]):
            return True
    return False


def shell_argv(command: str, environment: Mapping[str, str], root: Path | None = None) -> list[str]:
    """``[<bash>, "-c", command]``: bash on the child's ``PATH``, else sh, else ``/bin/sh``.

    A ``PATH`` directory under ``root`` (the working directory, which sandboxed commands write)
    or a relative one is passed over: dsh never starts a program a command could have planted.
    """
    path = environment.get("PATH", os.defpath)
    for name in ("bash", "sh"):
        shell, _ = on_path(name, path, root=root)
        if shell is not None:
            return [shell, "-c", command]
    return ["/bin/sh", "-c", command]


class BashTool:
    """``bash {command, timeout_s?}``: runs a command line in ``workspace.root``."""

    def __init__(
        self,
        workspace: Workspace,
        *,
        launcher: Launcher = UNSANDBOXED,
        timings: Timings = DEFAULT_TIMINGS,
    ) -> None:
        self.workspace = workspace
        self.launcher = launcher
        self.timings = timings
        """How a command is ended; tests shorten it."""

    @property
    def spec(self) -> ToolSpec:
        return specs.BASH

    def describe(self, arguments: Mapping[str, Any]) -> str:
        """``$ <command>``: the whole command, newlines and all (the front door neutralises)."""
        return f"$ {_command(arguments)}"

    def prepare(self, arguments: Mapping[str, Any]) -> Invocation:
        command = _command(arguments)
        timeout_s = _timeout_s(arguments)
        justification = _justification(arguments)
        unknown = sorted(set(arguments) - {"command", "timeout_s", "sandbox", "justification"})
        if unknown:
            # Said, not ignored: a model that sent ``timeout`` (in ms) believes it took effect.
            names = ", ".join(f'"{name}"' for name in unknown)
            plural = "s" if len(unknown) > 1 else ""
            raise ToolError(
                f"invalid arguments: unknown argument{plural} {names}; bash takes command and "
                "timeout_s (and sandbox: false with a justification, to leave the sandbox)"
            )
        launcher = self.launcher
        if isinstance(launcher, DeferredLauncher):
            launcher = launcher.resolve()
        access = Access("shell", note=launcher.note, scope=command_word(command))
        quoted: tuple[tuple[str, str], ...] = ()
        sandbox = launcher if isinstance(launcher, Sandbox) else None
        if justification is not None and sandbox is not None:
            # Only a sandbox can be left: without one, sandbox: false changes nothing.
            sandbox, launcher = None, UNSANDBOXED
            access = Access("shell", leaves_sandbox=True, note=LEAVING_NOTE)
            quoted = (("justification", justification),)  # the model's words, never dsh's
        if sandbox is None:
            access = self._name_planted(access, command)

        async def run() -> ToolOutput:
            return await self._run(command, timeout_s, launcher, sandbox)

        return Invocation(access, f"$ {command}", run, quoted=quoted)

    def _name_planted(self, access: Access, command: str) -> Access:
        """``access`` for a command run outside any sandbox, saying which of its programs
        come from the working directory (a sandboxed command may have written them), and
        then with no "always": it would cover whatever is written there next."""
        workspace = self.workspace
        lines = planted(command, workspace.environment.get("PATH", os.defpath), workspace.root)
        if not lines:
            return access
        said = "; ".join(lines[:3]) + ("; ..." if len(lines) > 3 else "")
        note = access.note
        note = f"{note[:-1]}; {said})" if note.endswith(")") else f"{note} ({said})".lstrip()
        return dataclasses.replace(access, note=note, scope=None)

    async def _run(
        self, command: str, timeout_s: float, launcher: Launcher, sandbox: Sandbox | None
    ) -> ToolOutput:
        workspace = self.workspace
        argv = shell_argv(command, workspace.environment, workspace.root)
        output = CappedOutput(workspace.output_dir, limit=OUTPUT_LIMIT, prefix="bash-")
        with launcher.launch(argv) as launch:
            try:
                completion = await run_child(
                    launch.argv,
                    cwd=workspace.root,
                    env=workspace.environment,
                    sink=output.feed,
                    time_limit=timeout_s,
                    timings=self.timings,
                    pass_fds=launch.pass_fds,
                    signal_group=launch.signal_group,
                )
            except OSError as exc:
                raise ToolError(f"could not start {launch.argv[0]} in {workspace.root}") from exc
            finally:
                output.close()
        result = _result(completion, output, timeout_s, sandbox, launch.notes)
        if launch.escaped:
            raise SandboxEscape(result, launch.escaped)
        return result


def _command(arguments: Mapping[str, Any]) -> str:
    command = arguments.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ToolError("invalid arguments: command must be a non-empty string")
    if "\0" in command:
        raise ToolError("invalid arguments: command must not contain a NUL character")
    return command


def _justification(arguments: Mapping[str, Any]) -> str | None:
    """Why the call asks to leave the sandbox (``sandbox: false``); None when it does not."""
    sandbox = arguments.get("sandbox")
    if sandbox is None or sandbox is True:  # null, as some models send for an optional one
        return None
    if sandbox is not False:
        raise ToolError(f"invalid arguments: sandbox must be true or false, not {sandbox!r}")
    justification = arguments.get("justification")
    text = " ".join(justification.split()) if isinstance(justification, str) else ""
    if not text:
        raise ToolError(
            "invalid arguments: sandbox: false needs a justification, a non-empty string "
            "saying why the command must run outside the sandbox"
        )
    return text


def _timeout_s(arguments: Mapping[str, Any]) -> float:
    value = arguments.get("timeout_s")
    if value is None:  # absent, or null as some models send for an optional argument
        return DEFAULT_TIMEOUT_S
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not MIN_TIMEOUT_S <= value <= MAX_TIMEOUT_S
    ):
        raise ToolError(
            f"invalid arguments: timeout_s must be a number of seconds from {MIN_TIMEOUT_S} "
            f"to {MAX_TIMEOUT_S}, not {value!r}"
        )
    return float(value)


def _result(
    completion: Completion,
    output: CappedOutput,
    timeout_s: float,
    sandbox: Sandbox | None,
    notes: list[str],
) -> ToolOutput:
    """The call's result: the output, then how the command ended (and what the sandbox forbids,
    when a sandboxed command failed by itself; and what it undid afterwards, ``notes``)."""
    code = completion.returncode
    text = output.text()
    said = text
    if code > 0:
        text = _end_line(text, f"[exit code: {code}]")
    elif code < 0:
        text = _end_line(text, f"[killed by signal {-code} ({signal_name(-code)})]")
    if code != 0 and sandbox is not None and completion.ended == "exited":
        text = _end_line(text, sandbox.explain(said))
    for note in notes:
        text = _end_line(text, note)
    sent = ", then ".join(signum.name for signum in completion.signals)
    sent = f" (sent {sent})" if sent else ""
    match completion.ended:
        case "exited":
            result = ToolOutput(text)
        case "timed-out":
            error = ToolError(f"command timed out after {timeout_s:g} s{sent}")
            result = ToolOutput.failed(error, content_after=text)
        case "cancelled":
            error = ToolError(f"the command was cancelled{sent}", ABORTED)
            result = ToolOutput.failed(error, content_after=text)
        case _:
            assert_never(completion.ended)
    path = output.output_file
    return dataclasses.replace(
        result,
        # Killed by signal N: 128 + N, as a shell's $? says it.
        exit_code=code if code >= 0 else 128 - code,
        truncated=output.truncated,
        output_file=str(path) if path is not None else None,
    )


def _end_line(text: str, line: str) -> str:
    """``line`` on its own line after ``text``."""
    return f"{text}\n{line}" if text and not text.endswith("\n") else f"{text}{line}"
