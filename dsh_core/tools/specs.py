"""What the model is told about each built-in tool: names, descriptions, argument schemas.

The contract with the model in one place, and light: the front door sends these with every
request, while a tool's implementation is imported only when the model first calls it
(:func:`dsh_core.tools.builtin_tools`). The limits the descriptions state live here too, and the
implementations use these same constants.
"""

from __future__ import annotations

from ..model.seam import ToolSpec

__all__ = [
    "BASH",
    "DEFAULT_TIMEOUT_S",
    "EDIT",
    "GLOB",
    "GREP",
    "MAX_EDIT_BYTES",
    "MAX_GLOB_PATHS",
    "MAX_GREP_LINE_CHARS",
    "MAX_GREP_MATCHES",
    "MAX_LINES",
    "MAX_LINE_CHARS",
    "MAX_OUTPUT_BYTES",
    "MAX_TIMEOUT_S",
    "MIN_TIMEOUT_S",
    "OUTPUT_LIMIT",
    "READ",
    "WRITE",
]

MAX_LINES = 2000
"""Lines one ``read`` shows at most."""
MAX_OUTPUT_BYTES = 50 * 1024
"""Bytes of text one ``read`` shows at most."""
MAX_LINE_CHARS = 2000
"""Characters of one line ``read`` shows; longer lines are cut with a marker."""
MAX_EDIT_BYTES = 16 * 1024 * 1024
"""Files larger than this are not edited (``write`` replaces them whole)."""
MAX_GLOB_PATHS = 100
"""Paths one ``glob`` lists."""
MAX_GREP_MATCHES = 250
"""Matching lines one ``grep`` lists."""
MAX_GREP_LINE_CHARS = 400
"""Characters of a matching line ``grep`` shows, around the match."""
DEFAULT_TIMEOUT_S = 120
"""Seconds a command may run unless the call says otherwise."""
MIN_TIMEOUT_S = 1
MAX_TIMEOUT_S = 600
OUTPUT_LIMIT = 30_000
"""Characters of a command's output the model reads; the rest is in the output file."""

READ = ToolSpec(
    "read",
    "Read a text file. Returns numbered lines (line number, tab, text, like cat -n) "
    "from line `offset` (1-based, default 1), at most `limit` lines (default and "
    f"maximum {MAX_LINES}) and 50 KiB per call; when cut, a last line in brackets says "
    f"the offset to read on from. Lines longer than {MAX_LINE_CHARS} characters are "
    "cut. Binary files (a NUL byte or bytes that are not UTF-8 in the first 8 KiB), "
    "directories and special files are refused. Paths are relative to the working "
    "directory. Reading a file is required before `write` or `edit` change it.",
    {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "The file to read."},
            "offset": {
                "type": "integer",
                "minimum": 1,
                "description": "The first line to show (1-based).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LINES,
                "description": f"How many lines to show (at most {MAX_LINES}).",
            },
        },
        "required": ["file_path"],
        "additionalProperties": False,
    },
)

WRITE = ToolSpec(
    "write",
    "Create a file, or replace a file's whole content, atomically; an existing file "
    "keeps its permissions. An existing file must have been read with `read` in this "
    "session and be unchanged on disk since. Missing parent directories are created. "
    "Content is written as UTF-8, exactly as given. To change part of a file, use "
    "`edit`.",
    {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "The file to write."},
            "content": {"type": "string", "description": "The whole new content."},
        },
        "required": ["file_path", "content"],
        "additionalProperties": False,
    },
)

EDIT = ToolSpec(
    "edit",
    "Replace an exact string in a file. `old_string` must occur exactly once in the "
    "file (copy it exactly, whitespace and indentation included, and add surrounding "
    "lines to make it unique) unless `replace_all` is true, which replaces every "
    "occurrence. The file must have been read with `read` in this session and be "
    "unchanged on disk since. The change is written atomically and keeps the file's "
    f"permissions. Files over {MAX_EDIT_BYTES // (1024 * 1024)} MiB are refused.",
    {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "The file to change."},
            "old_string": {"type": "string", "description": "The exact text to replace."},
            "new_string": {"type": "string", "description": "The text to put instead."},
            "replace_all": {
                "type": "boolean",
                "description": "Replace every occurrence (default false).",
            },
        },
        "required": ["file_path", "old_string", "new_string"],
        "additionalProperties": False,
    },
)

GLOB = ToolSpec(
    "glob",
    "Find files by name with a glob pattern, relative to `path` (default: the working "
    "directory): `*` and `?` match within one directory level, `**` any number of "
    "levels, `{a,b}` either, `[abc]` one of. `*.py` matches only at the top level; "
    f"`**/*.py` at any depth. Returns matching files, newest first, at most "
    f"{MAX_GLOB_PATHS}, then a line saying how many more matched. Skips .git and "
    "whatever .gitignore files ignore; symlinked directories are not followed.",
    {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "The glob, e.g. src/**/*.py"},
            "path": {
                "type": "string",
                "description": "The directory to search (default: working directory).",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    },
)

GREP = ToolSpec(
    "grep",
    "Search file contents for a regular expression (RE2 syntax: no backreferences or "
    "lookaround; `(?i)` for case-insensitive; `^` and `$` match at line ends). Returns "
    "`path:line:text` lines, at most "
    f"{MAX_GREP_MATCHES} matches, then a line saying the list was cut; long lines are "
    f"shown as {MAX_GREP_LINE_CHARS} characters around the match. `path` is a "
    "directory to search (default: the working directory) or one file; `glob` keeps "
    "only files whose names match it (e.g. `*.py`; with a `/` it matches the path "
    "below `path`, e.g. `src/**/*.ts`). Skips binary files, .git and whatever "
    ".gitignore files ignore.",
    {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "The regular expression."},
            "path": {
                "type": "string",
                "description": "A directory or file (default: working directory).",
            },
            "glob": {"type": "string", "description": "Only files matching, e.g. *.py"},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    },
)

BASH = ToolSpec(
    "bash",
    (
        "Run a shell command with `bash -c` in the working directory and return its output "
        "(stdout and stderr interleaved). stdin is /dev/null: the command must not wait for input. "
        f"Output over {OUTPUT_LIMIT:,} characters is cut in the middle, and the result names a "
        "file that holds all of it. A non-zero exit status ends the result with `[exit code: N]`. "
        f"The command is ended after timeout_s seconds (default {DEFAULT_TIMEOUT_S}, at most "
        f"{MAX_TIMEOUT_S}). Processes it starts in the background are killed when it exits. "
        "The command may run in a sandbox (then the approval note and a failed result say so): "
        "it can write only in the working directory and /tmp, and has no network. Only when the "
        "sandbox stopped a command that truly needs more, run it again with sandbox: false and "
        "a justification; the user is asked every time."
    ),
    {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command line to run."},
            "timeout_s": {
                "type": "number",
                "minimum": MIN_TIMEOUT_S,
                "maximum": MAX_TIMEOUT_S,
                "description": (
                    f"Seconds before the command is ended (default {DEFAULT_TIMEOUT_S})."
                ),
            },
            "sandbox": {
                "type": "boolean",
                "description": (
                    "false to run outside the sandbox, only after the sandbox stopped the command "
                    "(a read-only file system, no network); needs a justification. Default true."
                ),
            },
            "justification": {
                "type": "string",
                "description": (
                    "With sandbox: false: why the command must run outside the sandbox, in one "
                    "sentence; the user reads it before deciding."
                ),
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    },
)
