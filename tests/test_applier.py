from conftest import make_diff, numbered
from hypothesis import given
from hypothesis import strategies as st

from fixpack.applier import Placement, apply_text, occurrences, split_lines
from fixpack.diff import parse_patch


def hunks_of(before: str, after: str, tmp_path, path: str = "f.txt"):
    diff = make_diff({path: before}, {path: after}, tmp_path)
    return parse_patch(diff.encode()).files[0].hunks


def test_exact_apply_and_reverse(tmp_path):
    before = numbered(20)
    after = before.replace("line 10\n", "line ten\n")
    hunks = hunks_of(before, after, tmp_path)
    res = apply_text(before, hunks)
    assert res.text == after and res.hunks[0].placement is Placement.EXACT
    assert apply_text(after, hunks, reverse=True).text == before


def test_offset_is_applied_and_reported(tmp_path):
    before = numbered(20)
    after = before.replace("line 10\n", "line ten\n")
    hunks = hunks_of(before, after, tmp_path)
    shifted = "extra 1\nextra 2\nextra 3\n" + before
    res = apply_text(shifted, hunks)
    assert res.text == "extra 1\nextra 2\nextra 3\n" + after
    assert res.hunks[0].placement is Placement.OFFSET and res.hunks[0].offset == 3 and res.hunks[0].line == 10


def test_ambiguous_context_is_refused(tmp_path):
    block = "a\nb\nc\nX\nd\ne\nf\n"
    hunks = hunks_of("head\n" * 10 + block, "head\n" * 10 + block.replace("X", "Y"), tmp_path)
    twice = "other\n" * 3 + block + "mid\n" * 20 + block  # neither copy at the patch's line
    res = apply_text(twice, hunks)
    assert res.text is None and res.hunks[0].placement is Placement.AMBIGUOUS
    assert len(res.hunks[0].candidates) == 2


def test_missing_context_no_fuzz(tmp_path):
    before = numbered(20)
    hunks = hunks_of(before, before.replace("line 10\n", "line ten\n"), tmp_path)
    # one context line differs: GNU patch -F2 would apply with fuzz; we refuse
    res = apply_text(before.replace("line 9\n", "line nine\n"), hunks)
    assert res.text is None and res.hunks[0].placement is Placement.MISSING


def test_no_newline_at_end_of_file(tmp_path):
    before = "a\nb\nc"
    after = "a\nb\nc\nd"
    hunks = hunks_of(before, after, tmp_path)
    assert apply_text(before, hunks).text == after
    assert apply_text(after, hunks, reverse=True).text == before


def test_hunk_at_start_is_anchored(tmp_path):
    before = "x\n" + numbered(10)
    hunks = hunks_of(before, "y\n" + numbered(10), tmp_path)
    assert apply_text("z\n" + before, hunks).text is None  # anchored to line 1, not found further down


def test_an_anchored_hunk_with_a_twin_of_its_context_is_ambiguous_even_where_the_anchor_matches(tmp_path):
    # a hunk with context above its change and none below goes at the file's end; upstream appending a copy of that
    # context block makes the copy at the end a twin: the anchor alone cannot tell which one the fix belongs after
    from fixpack.applier import PINNED, HunkEvidence
    tail = "def f():\n    a = 1\n    return a\n"
    before = numbered(10) + tail
    after = before + "\ndef g():\n    return 2\n"
    hunks = hunks_of(before, after, tmp_path)
    assert hunks[0].trailing_context < hunks[0].leading_context
    assert apply_text(before + "x\n" + tail, hunks).text is None
    res = apply_text(before + "x\n" + tail, hunks).hunks[0]
    assert res.placement is Placement.AMBIGUOUS and res.candidates == (11, 15) and "anchored to the end" in res.reason
    assert apply_text("drift\n" + before, hunks).text == "drift\n" + after  # alone at the end: placed, offset 1
    # the pinned file held two copies (the lock's count, which the lock warns of): searched, never settled by the
    # anchor, as one copy may have gone and another come (a fresh attacker: the middle twin removed, one appended)
    twice = numbered(3) + tail + numbered(4) + tail
    hunks2 = hunks_of(twice, twice + "\ndef g():\n    return 2\n", tmp_path)
    two = (HunkEvidence(count=2),)
    for drifted in ("drift\n" + twice, numbered(3) + numbered(4) + tail + "x\n" + tail, "drift\n" + twice + tail):
        res = apply_text(drifted, hunks2, evidence=two)
        assert res.text is None and res.hunks[0].placement is Placement.AMBIGUOUS, drifted
    assert apply_text(twice, hunks2, evidence=(PINNED,)).text == twice + "\ndef g():\n    return 2\n"  # pinned
    # the same at a file's start, and reversed (the post-image with the lines the hunk adds)
    head = "import os\nimport sys\n\n"
    start = hunks_of(head + numbered(10), "#!/usr/bin/env python3\n" + head + numbered(10), tmp_path)
    assert start[0].leading_context < start[0].trailing_context
    res = apply_text(head + numbered(10) + head, start).hunks[0]
    assert res.placement is Placement.AMBIGUOUS and res.candidates == (1, 14)
    rev = apply_text(after + "x\n" + tail + "\ndef g():\n    return 2\n", hunks, reverse=True).hunks[0]
    assert rev.placement is Placement.AMBIGUOUS


def test_multiple_hunks_follow_offset(tmp_path):
    before = numbered(60)
    after = before.replace("line 5\n", "five\n").replace("line 50\n", "fifty\n")
    hunks = hunks_of(before, after, tmp_path)
    assert len(hunks) == 2
    res = apply_text("pre\n" + before, hunks)
    assert res.text == "pre\n" + after
    assert [h.offset for h in res.hunks] == [1, 1]


def test_split_lines_keeps_cr():
    assert split_lines("a\r\nb") == ["a\r\n", "b"]


def _split_on_newline(text: str) -> list[str]:
    """The definition split_lines keeps (its fast path hands texts without other breaks to str.splitlines)."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


@given(st.text(alphabet=st.sampled_from(["a", "b", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028"]),
               max_size=40))
def test_split_lines_breaks_on_newline_only(text: str) -> None:
    assert split_lines(text) == _split_on_newline(text)


@given(st.lists(st.sampled_from(["a\n", "b\n", "\n", "a"]), max_size=30),
       st.lists(st.sampled_from(["a\n", "b\n", "\n"]), max_size=4))
def test_occurrences_finds_every_place(lines: list[str], pre: list[str]) -> None:
    want = (list(range(len(lines) + 1)) if not pre else
            [p for p in range(len(lines) - len(pre) + 1) if lines[p:p + len(pre)] == pre])
    assert occurrences(lines, tuple(pre)) == want


def test_a_lone_hunk_without_context_that_empties_or_fills_a_file_stands_for_the_whole_file():
    """A file's only hunk with no context and one side empty at line 0 (``@@ -1,2 +0,0 @@``: diff and git write a file
    emptied so; ``@@ -0,0 +1,2 @@``: one filled) is read as git apply reads it: each side is the whole file. Before,
    the empty side was "in" every file, so a searched hunk (a drifted file) was refused as ambiguous whether the fix
    was in or not, and the other side was placed wherever its lines occurred once (lines of a longer file taken out
    as if the file were emptied). Pinned (the lock's pre-image) a hunk keeps its stated line, as every hunk does."""
    from fixpack.applier import PINNED

    empties = parse_patch(b"--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +0,0 @@\n-a\n-b\n").files[0].hunks
    fills = parse_patch(b"--- a/f.txt\n+++ b/f.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n").files[0].hunks
    # empties: forward only on the whole pre-image, reversed (is it in?) only on the empty file
    assert apply_text("a\nb\n", empties).text == ""
    assert apply_text("", empties, reverse=True).text == "a\nb\n"
    for text, reverse, side, said in (("a\nb\nc\n", False, "pre-image", "must be the whole file (2 lines)"),
                                      ("z\na\nb\n", False, "pre-image", "must be the whole file (2 lines)"),
                                      ("c\n", True, "post-image", "is the empty file"),
                                      ("", False, "pre-image", "must be the whole file (2 lines)")):
        (res,) = apply_text(text, empties, reverse=reverse).hunks
        assert res.placement is Placement.MISSING, (text, reverse)
        assert res.reason.startswith(f"its {side} {said}, as git apply reads a file's only hunk without context "
                                     f"that empties the file, and this file holds"), res.reason
    # fills: forward only on the empty file, reversed only on the whole post-image
    assert apply_text("", fills).text == "a\nb\n"
    assert apply_text("a\nb\n", fills, reverse=True).text == ""
    for text, reverse in (("x\n", False), ("a\nb\nc\n", True), ("", True)):
        (res,) = apply_text(text, fills, reverse=reverse).hunks
        assert res.placement is Placement.MISSING and "that fills the file" in res.reason, (text, reverse)
    # pinned, the stated line decides, as for every hunk (git diff -U0 of a file's first lines taken out)
    assert apply_text("a\nb\nc\n", empties, evidence=(PINNED,)).text == "c\n"
    # beside another hunk of its file it is no whole file: placed by the rule as before
    two = parse_patch(b"--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +0,0 @@\n-a\n-b\n@@ -5 +3 @@\n-e\n+E\n").files[0].hunks
    assert apply_text("a\nb\nc\nd\ne\n", two).text == "c\nd\nE\n"
