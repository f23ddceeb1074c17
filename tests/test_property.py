"""Property: for random files and random edits, the diff git makes applies exactly and reverts to
the original bytes (in memory), and applying twice is refused as already applied."""

import subprocess

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import GIT_ENV
from fixpack.applier import apply_text
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


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=file_and_edit())
def test_apply_revert_round_trip(tmp_path, case):
    before, after = case
    diff = git_diff(tmp_path, before, after)
    if not diff:
        assert before == after
        return
    parsed = parse_patch(diff.encode())
    hunks = parsed.files[0].hunks
    res = apply_text(before, hunks)
    assert res.text == after
    assert apply_text(after, hunks, reverse=True).text == before
