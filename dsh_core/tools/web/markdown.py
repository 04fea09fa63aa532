"""A fetched HTML page as Markdown, for the model to read (``web_fetch``, SPEC 16).

    text, note = to_markdown(html, "https://example.com/docs/")   # note: None, or what was done

By markdownify over Beautiful Soup's stdlib parser (the comparison with html2text,
html-to-markdown and trafilatura is in ``docs/notes/2026-12-02-everyday-tools.md``): headings
as ``#``, GFM tables, fenced code, links kept. Before converting, what is not text for a reader
is dropped (scripts, styles, ``<template>``, SVG, frames, forms' machinery), and so are the
page's ``data:`` URIs (a base64 image can be megabytes of nothing) and ``javascript:`` links;
relative links are made absolute against the page's URL, so that the model can fetch them.

The page is hostile input. A page nested deeper than markdownify's recursion can follow raises
``RecursionError`` there; its text is then given without Markdown, and ``note`` says so (never
a silent loss: a converter that drops what it cannot nest would be worse). Called in a worker
thread: a 5 MiB page takes seconds.
"""

from __future__ import annotations

import re
from urllib.parse import urljoin

__all__ = ["to_markdown"]

_DROPPED = (
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "math",
    "iframe",
    "frame",
    "object",
    "embed",
    "canvas",
    "head",
    "button",
    "select",
    "input",
    "textarea",
)
"""Elements whose content is no text a reader of the page would see, or is machinery."""

_BLANK_RUNS = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
_TRAILING = re.compile(r"[ \t]+\n")


def to_markdown(html: str, base_url: str = "") -> tuple[str, str | None]:
    """The page as Markdown (its title first, as a heading), and a note when it is plain text
    instead."""
    from bs4 import BeautifulSoup  # the first web_fetch pays for it (50 ms), not startup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    title_tag = soup.find("title")
    title = " ".join(title_tag.get_text().split()) if title_tag is not None else ""
    for tag in soup.find_all(_DROPPED):
        tag.decompose()
    for tag in soup.find_all(True):
        for attribute in ("src", "href"):
            if attribute not in tag.attrs:
                continue
            link = str(tag.get(attribute, "")).strip()
            if link.lower().startswith(("javascript:", "data:", "vbscript:")):
                del tag[attribute]
            elif base_url and not link.startswith("#"):
                tag[attribute] = urljoin(base_url, link)
    note: str | None = None
    try:
        converter = MarkdownConverter(heading_style="ATX", bullets="-", escape_misc=False)
        text = converter.convert_soup(soup)
    except RecursionError:
        text = soup.get_text("\n")
        note = "the page nests its elements too deeply for Markdown: its text alone follows"
    text = _BLANK_RUNS.sub("\n\n", _TRAILING.sub("\n", text)).strip()
    if title and not text.startswith("#"):
        text = f"# {title}\n\n{text}" if text else f"# {title}"
    return text, note
