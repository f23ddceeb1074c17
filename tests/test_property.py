"""Property: for random files and random edits, the diff git makes applies exactly and reverts to the original bytes
(in memory) on the file it was written against; searched (no lock evidence), it gives the same bytes or refuses a
hunk as ambiguous, never a wrong text."""

import subprocess

from conftest import GIT_ENV
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fixpack.applier import PINNED, Placement, apply_text, sides
from fixpack.diff import parse_patch

LINES = st.lists(st.sampled_from(["a", "b", "c", "def f():", "    return 1", "", "# x", "pass"]), min_size=0, max_size=40)


@st.composite
def file_and_edit(draw):
    lines = draw(LINES)
    eol = draw(st.booleans())
    before = "\n".join(lines) + ("\n" if eol and lines else "")
    edited = list(lines)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        pos = draw(st.integers(0, len(edited)))
        if op == "insert":
            edited.insert(pos, draw(st.sampled_from(["new", "inserted line", "    x = 2", ""])))
        elif edited and pos < len(edited):
            if op == "delete":
                del edited[pos]
            else:
                edited[pos] = draw(st.sampled_from(["changed", "    y = 3", "a"]))
    eol2 = draw(st.booleans())
    after = "\n".join(edited) + ("\n" if eol2 and edited else "")
    return before, after


def git_diff(tmp, before, after):
    (tmp / "a").write_text(before)
    (tmp / "b").write_text(after)
    out = subprocess.run(["git", "diff", "--no-index", "--no-color", "a", "b"], cwd=tmp, capture_output=True,
                         env=GIT_ENV).stdout.decode()
    return out.replace("a/a", "a/f.txt").replace("b/b", "b/f.txt")


@settings(max_examples=150, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=file_and_edit())
@example(case=("a\na\na\na\na", "new\na\na\na\na\na"))  # anchored to the start; its context recurs below
@example(case=("a\na\na\na\na", "a\na\na\na\n"))  # anchored to the end; reversed, its post-image recurs
@example(case=("a\n" * 9, "a\na\na\na\nchanged\na\na\na\na\n"))  # mid-file, its pre-image three times
@example(case=("b\nc\na\n", "b\nnew\nc\na\n"))
def test_apply_revert_round_trip(tmp_path, case):
    before, after = case
    diff = git_diff(tmp_path, before, after)
    if not diff:
        assert before == after
        return
    parsed = parse_patch(diff.encode())
    hunks = parsed.files[0].hunks
    pinned = (PINNED,) * len(hunks)
    assert apply_text(before, hunks, evidence=pinned).text == after
    assert apply_text(after, hunks, reverse=True, evidence=pinned).text == before
    for text, want, reverse in ((before, after, False), (after, before, True)):
        res = apply_text(text, hunks, reverse=reverse)  # searched: as on a tree that is not the pinned file
        if res.text is not None:
            assert res.text == want
        else:  # refused only where a twin leaves the place to a guess
            refused = [(r, h) for r, h in zip(res.hunks, hunks) if not r.found]
            assert refused and all(r.placement is Placement.AMBIGUOUS for r, _ in refused), res.hunks
            assert all(len(r.candidates) > 1 or not sides(h, reverse)[0] for r, h in refused), res.hunks
