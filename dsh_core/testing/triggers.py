"""Trigger words: a word in the last user message picks what the stub server answers.

Tests and the demo ask for an outcome by typing it (``please fail``); the banner of the demo and
of ``python -m dsh_core.testing.stub_server`` lists :data:`TRIGGERS`. Words match whole and
case-insensitively; the first one in the message wins. With no trigger word the answer is an
echo, ``You said: <message>``, or, when the request ends with tool results, a quote of them.

The ``tool...`` words ask for tool calls. They span several requests (steps): the triggering
message stays the last user message, and the number of tool-calling assistant messages after it
says which step this is. When a word's calls are done, the answer quotes the first line of each
result of the turn (``Tool results: [read] 1<tab>Hello...``), so a test sees what reached the model.

A compaction's summary request (its last message is dsh's :data:`~dsh_core.agent.compaction.
SUMMARY_REQUEST`) is answered with :func:`stub_summary`, whatever words it holds.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

from ..agent.compaction import SUMMARY_REQUEST
from .behaviours import (
    Answer,
    Behaviour,
    Cut,
    Empty,
    HttpError,
    InBandError,
    KeepAlives,
    LongStream,
    Malformed,
    SlowStream,
    ToolCalls,
)
from .chat_request import (
    content_text,
    last_user_index,
    last_user_text,
    messages_of,
    tool_calls_of,
)

__all__ = [
    "ESCAPE_TEXT",
    "TRIGGERS",
    "TriggerPicker",
    "is_summary_request",
    "stub_summary",
    "tool_results_summary",
]

TRIGGERS: dict[str, str] = {
    "think": "reasoning first, then the answer",
    "busy": "keep-alive comments for a few seconds, then the answer",
    "slow": "a slow answer, about 8 seconds: press Ctrl-C to cancel it",
    "limit": "the answer stops at the output token limit (finish_reason length)",
    "cut": "some text, then the connection is cut",
    "fail": "HTTP 503 Server Overloaded on every try: retried, then fails",
    "ratelimit": "HTTP 429 with Retry-After: 1 once, then the answer",
    "malformed": "a stream event that is not valid JSON",
    "empty": "a stream without any content: retried, then fails",
    "escape": "an answer full of terminal escape sequences and bidi controls",
    "auth": "HTTP 401: the key is refused",
    "quota": "HTTP 402 Insufficient Balance",
    "filter": "the content filter stops the answer in the stream",
    "long": "a very long answer (20,000 deltas unless --long-deltas says), as fast as it goes",
    "toolread": "a read call for demo.txt, then an answer quoting its result",
    "toolbash": "a bash call (ls -la), then an answer quoting its result",
    "tooledit": "read demo.txt, then edit it (Hello -> Hello again), then an answer",
    "toolfail": "a read call for a file that does not exist, then an answer",
    "toolmany": "three calls in one step (read, glob, grep), then an answer",
    "toolchain": "three steps of one call each (read, glob, grep), then an answer",
    "toolsplit": "a read call whose arguments arrive one character per fragment",
    "toolbad": "a read call whose arguments are not valid JSON",
    "toolunknown": "a call to a tool that does not exist (launch_missiles)",
    "toolthink": "reasoning, then a read call (thinking mode: pass the reasoning back)",
    "toolloop": "the same read call at every step, until the step limit",
    "toolhang": "a bash call that sleeps 1000 seconds: press Ctrl-C to cancel it",
    "tooltodo": "a todo_write call: the checklist, then an answer",
    "toolask": "an ask_user_question call with two options, then an answer quoting the reply",
    "tooljob": "a background bash job, then job_output waiting for its end, then an answer",
    "toolfiles": "one read call a step for each file named after the word, then an answer",
}
"""Words that, in the last user message, pick a behaviour when no scripted one is queued.

Case-insensitive, whole words; the first one in the message wins."""

ESCAPE_TEXT = (
    "Clear screen:\x1b[2J title:\x1b]0;pwned\x07 bell:\x07 colour:\x1b[31mred\x1b[0m "
    "bidi:\u202eevil\u202c isolate:\u2066x\u2069 backspace:abc\x08\x08\x08 "
    "newline and\ttab stay.\n"
)
"""The ``escape`` answer: everything a front door must neutralise on a terminal."""

# Longest first, so that no word can shadow a longer one it begins.
_TRIGGER_RE = re.compile(
    r"\b(" + "|".join(sorted(TRIGGERS, key=len, reverse=True)) + r")\b", re.IGNORECASE
)

_READ_DEMO = ("read", '{"file_path": "demo.txt"}')
_GLOB_TXT = ("glob", '{"pattern": "*.txt"}')
_GREP_HELLO = ("grep", '{"pattern": "Hello"}')
_QUOTE_WIDTH = 80
"""Characters of a result's first line quoted in the final answer."""


@dataclass(frozen=True, slots=True)
class _ToolScript:
    """What a ``tool...`` word asks for: the calls of each step, then an answer."""

    steps: tuple[tuple[tuple[str, str], ...], ...]
    """``(name, arguments)`` calls per step."""
    forever: bool = False
    """Ask for the last step's calls at every step, never answering (for the step limit)."""
    text: str | None = None
    reasoning: str | None = None
    """Reasoning before each step's calls and before the answer (thinking mode)."""
    fragment_size: int = 8


_TOOL_SCRIPTS: dict[str, _ToolScript] = {
    "toolread": _ToolScript(((_READ_DEMO,),)),
    "toolbash": _ToolScript(((("bash", '{"command": "ls -la"}'),),)),
    "tooledit": _ToolScript(
        (
            (_READ_DEMO,),
            (
                (
                    "edit",
                    '{"file_path": "demo.txt", "old_string": "Hello", "new_string": "Hello again"}',
                ),
            ),
        )
    ),
    "toolfail": _ToolScript(((("read", '{"file_path": "no-such-file.txt"}'),),)),
    "toolmany": _ToolScript(((_READ_DEMO, _GLOB_TXT, _GREP_HELLO),), text="Looking around."),
    "toolchain": _ToolScript(((_READ_DEMO,), (_GLOB_TXT,), (_GREP_HELLO,))),
    "toolsplit": _ToolScript(((_READ_DEMO,),), fragment_size=1),
    "toolbad": _ToolScript(((("read", '{"file_path": "demo.txt"'),),)),
    "toolunknown": _ToolScript(((("launch_missiles", "{}"),),)),
    "toolthink": _ToolScript(
        ((_READ_DEMO,),), reasoning="The user wants demo.txt. I should read it first."
    ),
    "toolloop": _ToolScript(((_READ_DEMO,),), forever=True),
    "toolhang": _ToolScript(((("bash", '{"command": "sleep 1000"}'),),)),
    "tooltodo": _ToolScript(
        (
            (
                (
                    "todo_write",
                    '{"todos": [{"content": "Read demo.txt", "status": "completed"}, '
                    '{"content": "Say what it holds", "status": "in_progress"}, '
                    '{"content": "Suggest a change", "status": "pending"}]}',
                ),
            ),
        )
    ),
    "toolask": _ToolScript(
        (
            (
                (
                    "ask_user_question",
                    '{"questions": [{"id": "tone", "question": "Which tone should the answer '
                    'take?", "options": [{"label": "Short (Recommended)", "description": "One '
                    'line"}, {"label": "Detailed"}]}]}',
                ),
            ),
        )
    ),
    "tooljob": _ToolScript(
        (
            (
                (
                    "bash",
                    '{"command": "for i in 1 2 3; do echo tick $i; sleep 1; done", '
                    '"run_in_background": true}',
                ),
            ),
            (("job_output", '{"job_id": "bash-1", "wait": true}'),),
        )
    ),
}


class TriggerPicker:
    """Picks the behaviour a request asks for, remembering what a few triggers need to.

    It remembers recent user messages (so a merged message counts only for what it adds) and
    the ``ratelimit`` requests already refused (so each is refused once).
    """

    def __init__(self, long: LongStream) -> None:
        """``long`` is the answer to the ``long`` trigger."""
        self._long = long
        self._lock = threading.Lock()
        self._rate_limited: set[str] = set()
        self._seen: deque[str] = deque(maxlen=1000)
        self._files: tuple[str, list[str], int] | None = None
        """The ``toolfiles`` line being worked through: its key, its files, the next one."""

    def _next_file(self, key: str, names: list[str]) -> Behaviour:
        """``toolfiles``: the next read of its line, or the answer once all were read.

        Counted here, not from the messages: a compaction in the middle of the turn replaces
        the earlier calls (or sends the request again verbatim), and a model that read them
        goes on where it was, as this does."""
        names = names or ["demo.txt"]
        with self._lock:
            at = self._files[2] if self._files is not None and self._files[0] == key else 0
            self._files = (key, names, at + 1) if at < len(names) else None
        if at < len(names):
            return ToolCalls(((("read", json.dumps({"file_path": names[at]}))),))
        return Answer(f"Read {len(names)} files.")

    def pick(self, payload: Any, body: bytes) -> Behaviour:
        """The behaviour the last user message asks for by a trigger word, else an echo."""
        if is_summary_request(payload):
            return Answer(stub_summary(messages_of(payload)))
        text = self._newest_text(last_user_text(payload))
        match = _TRIGGER_RE.search(text)
        word = match.group(1).lower() if match else ""
        if word in _TOOL_SCRIPTS:
            return _tool_step(_TOOL_SCRIPTS[word], messages_of(payload))
        messages = messages_of(payload)
        if word == "toolfiles" and match is not None:
            start = text.rfind("\n", 0, match.start()) + 1
            end = text.find("\n", match.end())
            line = text[start : end if end >= 0 else len(text)]  # "turn 5 toolfiles a b c"
            return self._next_file(line, line[match.end() - start :].split()[:8])
        if self._files is not None and messages and _after_compaction_or_call(messages[-1]):
            return self._next_file(*self._files[:2])
        if word == "think":
            return Answer(
                "The answer, after some thought: 42.",
                reasoning="The user wants an answer. Let me think step by step... 6 x 7 = 42.",
            )
        if word == "busy":
            return KeepAlives(6, 0.5, Answer(f"You said: {text}"))
        if word == "slow":
            return SlowStream(" ".join(f"word{i}" for i in range(80)) + ".", 0.1)
        if word == "limit":
            return Answer(
                "This answer is cut short by the output token lim", finish_reason="length"
            )
        if word == "cut":
            return Cut("This answer will be cut off in the mid")
        if word == "fail":
            return HttpError(503, "Server overloaded, please try again later.")
        if word == "ratelimit":
            digest = hashlib.sha256(body).hexdigest()
            with self._lock:
                first = digest not in self._rate_limited
                self._rate_limited.add(digest)
            if first:
                return HttpError(429, "Rate limit reached for requests", retry_after=1)
            return Answer(f"You said: {text}")
        if word == "malformed":
            return Malformed()
        if word == "empty":
            return Empty()
        if word == "escape":
            return Answer(ESCAPE_TEXT)
        if word == "auth":
            return HttpError(401, "Authentication Fails, Your api key is invalid")
        if word == "quota":
            return HttpError(402, "Insufficient Balance")
        if word == "filter":
            return InBandError("Content Exists Risk", after_text=None, code="content_filter")
        if word == "long":
            return self._long
        if messages and messages[-1].get("role") == "tool":
            return Answer(tool_results_summary(messages))
        return Answer(f"You said: {text}")

    def _newest_text(self, message: str) -> str:
        """What the user just typed: ``message`` less a part this server has already answered.

        The agent loop sends a failed turn's user message joined to the next one by a blank
        line. When ``message`` starts with an earlier request's last user message and a blank
        line, only the rest is new: so a trigger word from a failed turn does not fire again,
        and the echo repeats what was just typed.
        """
        with self._lock:
            earlier = [m for m in self._seen if message.startswith(m + "\n\n")]
            if message not in self._seen:
                self._seen.append(message)
        return message[len(max(earlier, key=len)) + 2 :] if earlier else message


def _tool_step(script: _ToolScript, messages: list[dict[str, Any]]) -> Behaviour:
    """This step of ``script``: its calls, or the answer once they are all done."""
    done = sum(1 for message in messages[last_user_index(messages) + 1 :] if tool_calls_of(message))
    if done < len(script.steps) or script.forever:
        return ToolCalls(
            script.steps[min(done, len(script.steps) - 1)],
            text=script.text,
            reasoning=script.reasoning,
            fragment_size=script.fragment_size,
        )
    reasoning = None if script.reasoning is None else "The results are in. Time to answer."
    return Answer(tool_results_summary(messages), reasoning=reasoning)


def _after_compaction_or_call(message: dict[str, Any]) -> bool:
    """Whether the request ends with a tool result or a compaction's checkpoint: a turn going
    on, not a new one."""
    if message.get("role") == "tool":
        return True
    return content_text(message.get("content")).startswith("[Checkpoint:")


def is_summary_request(payload: Any) -> bool:
    """Whether the request asks for a compaction's summary: its last message holds dsh's
    request (followed by its budget and focus, since issue 29)."""
    messages = messages_of(payload)
    return bool(messages) and SUMMARY_REQUEST in content_text(messages[-1].get("content"))


def stub_summary(messages: list[dict[str, Any]]) -> str:
    """The stub's summary of the messages before the summary request: how many of each role,
    and a digest of them, so a test can tell which conversation it summarised. It holds no
    trigger word, so the checkpoint it becomes picks no behaviour."""
    covered = messages[:-1]
    roles = {role: sum(1 for m in covered if m.get("role") == role) for role in ("user", "tool")}
    digest = hashlib.sha256(json.dumps(covered, sort_keys=True).encode()).hexdigest()[:12]
    return (
        f"Summary by the stub server of {len(covered)} messages ({roles['user']} from the "
        f"user, {roles['tool']} results), digest {digest}. Next step: go on as asked."
    )


def tool_results_summary(messages: list[dict[str, Any]]) -> str:
    """``Tool results: [read] 1<tab>Hello...; [glob] demo.txt``: each result of this turn, quoted.

    The first line of each ``tool`` message after the last user message, cut at 80 characters
    (``...`` marks a cut or more lines), named by the call it answers (``?`` when none).
    """
    names: dict[Any, str] = {}
    quotes: list[str] = []
    for message in messages[last_user_index(messages) + 1 :]:
        for call in tool_calls_of(message):
            function = call.get("function")
            name = function.get("name") if isinstance(function, dict) else None
            names[call.get("id")] = name if isinstance(name, str) else "?"
        if message.get("role") == "tool":
            name = names.get(message.get("tool_call_id"), "?")
            quotes.append(f"[{name}] {_first_line(content_text(message.get('content')))}")
    return "Tool results: " + ("; ".join(quotes) if quotes else "none")


def _first_line(text: str) -> str:
    line, _, rest = text.partition("\n")
    cut = len(line) > _QUOTE_WIDTH or bool(rest.strip())
    return line[:_QUOTE_WIDTH] + ("..." if cut else "")
