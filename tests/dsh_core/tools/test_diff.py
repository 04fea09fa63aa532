"""The diff an approval question shows: headers, true line numbers, bounds."""

from __future__ import annotations

import difflib

from dsh_core.tools.diff import unified_diff


def test_unified_diff_marks_a_missing_last_newline() -> None:
    assert unified_diff("a.txt", "x\ny", "x\nz") == (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n x\n-y\n\\ No newline at end of file\n"
        "+z\n\\ No newline at end of file"
    )
    assert unified_diff("/etc/hosts", None, "a\n").startswith("--- /dev/null\n+++ /etc/hosts\n")


def test_only_the_changed_part_is_diffed_with_true_line_numbers() -> None:
    old = "".join(f"{n}\n" for n in range(1, 100_001))
    new = old.replace("\n50000\n", "\nfifty thousand\n")
    expected = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), "a/n.txt", "b/n.txt"
    )
    assert unified_diff("n.txt", old, new) == "".join(expected).rstrip("\n")


def test_insertions_and_deletions_at_either_end() -> None:
    for old, new in [("b\nc\n", "a\nb\nc\n"), ("a\nb\n", "a\nb\nc\n"), ("a\nb\nc\n", "b\nc\n")]:
        expected = difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), "a/f", "b/f"
        )
        assert unified_diff("f", old, new) == "".join(expected).rstrip("\n"), (old, new)


def test_a_form_feed_is_not_a_line_break() -> None:
    assert unified_diff("f", "a\x0cb\n", "a\x0cc\n") == (
        "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\x0cb\n+a\x0cc"
    )


def test_the_diff_is_whole_the_front_door_decides_what_fits() -> None:
    wide = "".join("x" * 1000 + "\n" for _ in range(100))
    shown = unified_diff("w.txt", None, wide).split("\n")
    assert len(shown) == 103
    assert shown[-1] == "+" + "x" * 1000
