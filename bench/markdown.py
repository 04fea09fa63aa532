"""What rendering an answer's Markdown costs: the libraries' load, and streaming one answer.

    python bench/markdown.py [--runs 9]

1. In fresh interpreters, interleaved: importing each candidate and rendering a first answer
   with a heading, emphasis, a Python code block and a table: rich (what dsh uses), and the
   parts a renderer of our own would stand on: markdown-it-py's parse plus pygments' highlight
   of the code (mistune's too, when installed). Their own renderer is not counted: they
   would need one (~200 lines: tables, lists, wrapping); rich brings it.
2. In this process: streaming a long answer (200 blocks of each kind) through
   ``AnswerMarkdown`` in 4-character deltas, against writing the same deltas plain.
A benchmark reports; no test asserts time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

SAMPLE = (
    "# Plan\\n\\nFirst *this*, then **that**, and `code`.\\n\\n```python\\ndef f(x):\\n"
    "    return x + 1\\n```\\n\\n| a | b |\\n|---|---|\\n| 1 | 2 |\\n"
)

CANDIDATES = {
    "rich (Markdown, its renderer)": f"""
from rich.console import Console
from rich.markdown import Markdown
import io
Console(file=io.StringIO(), force_terminal=True, width=80).print(Markdown("{SAMPLE}"))
""",
    "markdown-it-py + pygments (parse, highlight)": f"""
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import Terminal256Formatter
from pygments.lexers import get_lexer_by_name
tokens = MarkdownIt().enable("table").parse("{SAMPLE}")
highlight("def f(x):\\n    return x + 1\\n", get_lexer_by_name("python"), Terminal256Formatter())
""",
    "mistune + pygments (parse, highlight)": f"""
import mistune
from pygments import highlight
from pygments.formatters import Terminal256Formatter
from pygments.lexers import get_lexer_by_name
mistune.create_markdown(renderer=None, plugins=["table"])("{SAMPLE}")
highlight("def f(x):\\n    return x + 1\\n", get_lexer_by_name("python"), Terminal256Formatter())
""",
}


def available(code: str) -> bool:
    first = code.strip().splitlines()[0]
    return subprocess.run([sys.executable, "-c", first], capture_output=True).returncode == 0


def in_fresh_process(code: str) -> float:
    timed = f"import time\nstart = time.perf_counter()\n{code}\nprint(time.perf_counter() - start)"
    result = subprocess.run([sys.executable, "-c", timed], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(result.stderr)
    return float(result.stdout)


def streaming() -> tuple[float, float]:
    from dsh_stdio.render import neutralise
    from dsh_stdio.terminal.markdown import AnswerMarkdown

    block = (
        "A paragraph with *emphasis* and `code` that goes on for a while.\n\n"
        "```python\nfor n in range(3):\n    print(n)\n```\n\n- one\n- two\n\n"
    )
    answer = block * 200
    deltas = [answer[i : i + 4] for i in range(0, len(answer), 4)]
    size = os.terminal_size((100, 40))
    rendered = AnswerMarkdown(lambda: size)
    rendered.feed("warm up\n\n")
    rendered.end()
    start = time.perf_counter()
    for delta in deltas:
        rendered.feed(neutralise(delta))
    rendered.end()
    markdown = time.perf_counter() - start
    start = time.perf_counter()
    for delta in deltas:
        neutralise(delta)
    plain = time.perf_counter() - start
    return markdown, plain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    names = [name for name, code in CANDIDATES.items() if available(code)]
    samples: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(args.runs):
        for name in names:
            samples[name].append(in_fresh_process(CANDIDATES[name]))
    print(f"load and first render, median of {args.runs} fresh processes, interleaved:")
    base = statistics.median(samples[names[0]])
    for name in names:
        value = statistics.median(samples[name])
        print(f"  {name:46} {value * 1000:6.1f} ms  ({value / base:.2f}x rich)")
    markdown, plain = streaming()
    print(
        f"streaming a 1,400-block answer in 4-character deltas: {markdown * 1000:.0f} ms rendered, "
        f"{plain * 1000:.0f} ms plain ({markdown / plain:.0f}x)"
    )


if __name__ == "__main__":
    main()
