"""Findings of a new-user pass: each message says what is wrong in the user's words, once, and a pin
edited without a new lock is the pack's problem (exit 2), not the image's."""

import os
import subprocess
import sys

import pytest
from conftest import REPO, numbered, snapshot

from fixpack import engine
from fixpack.cli_render import render
from fixpack.errors import PackError, StaleLockError
from fixpack.progname import program
from fixpack.report import Report, TargetReport
from fixpack.states import TargetStatus

MOD = "demo_pkg/mod.py"


@pytest.fixture
def setup(builder):
    base = numbered(20)
    clean = builder.tree("clean", {MOD: base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 5\n", "five\n")})
    builder.profile(["one"])
    builder.lock(clean)
    return builder, builder.tree("image", {MOD: base})


def _problems(b, target, old, new):
    patch = b.pack / "fixes/one/0001-change.patch"
    text = patch.read_text()
    assert old in text, old
    patch.write_text(text.replace(old, new, 1))
    before = snapshot(target)
    with pytest.raises(PackError) as exc:
        engine.apply(b.request(target))
    assert snapshot(target) == before
    return [str(p) for p in exc.value.problems]


def test_a_pin_edited_without_a_new_lock_is_a_pack_lock_mismatch(setup):
    b, target = setup
    profile = b.pack / "profiles/p1.toml"
    profile.write_text(profile.read_text().replace('commit = "abcdef12"', 'commit = "1234567a"'))
    for run in (engine.apply, engine.status):
        with pytest.raises(StaleLockError, match="pinned to commit 1234567a, the lock was made for gabcdef1234") as exc:
            run(b.request(target))
        assert exc.value.exit_code == 2 and f"{program()} lock --profile p1" in str(exc.value)
        # the pin may be the mistake (a new lock stops on the release, which does not carry it): how to put it back
        assert ("the lock was made for gabcdef1234; if the pin is a mistake (a new lock stops on a release that does "
                'not carry it), put it back to commit = "abcdef1234"') in str(exc.value), exc.value
    profile.write_text(profile.read_text().replace('commit = "1234567a"', 'commit = "abcdef12"')
                       .replace('version = "1.0"', 'version = "1.1"'))
    with pytest.raises(StaleLockError, match="pinned to version 1.1, the lock was made for 1.0") as exc:
        engine.apply(b.request(target))
    assert 'put it back to version = "1.0"' in str(exc.value), exc.value


def test_the_lock_command_to_run_keeps_the_pack_and_targets_given(setup, tmp_path):
    """A stale or missing lock names `fixpack lock` with the run's --pack and --target (and, for a lock check,
    its clean copies): without them, run as written elsewhere, it acted on another pack."""

    b, target = setup
    patch = b.pack / "fixes/one/0001-change.patch"
    patch.write_text(patch.read_text().replace("+five\n", "+FIVE\n"))
    toml = b.pack / "fixes/one/fix.toml"  # a new patch, a new version (lock refuses a patch changed under its version)
    toml.write_text(toml.read_text().replace("version = 1", "version = 2"))
    want = f"{program()} lock --profile p1 --pack {b.pack} --target demo (it fetches them"
    for run in (engine.apply, engine.status):
        with pytest.raises(StaleLockError) as exc:
            run(b.request(target, only_targets=("demo",)))
        assert want in str(exc.value), str(exc.value)
    clean = b.pack.parent / "clean"
    with pytest.raises(StaleLockError) as exc:
        engine.check_lock_fresh(b.request(clean, only_targets=("demo",)))
    command = str(exc.value).partition("regenerate it from clean release copies: ")[2]
    assert command == f"{program()} lock --profile p1 --pack {b.pack} --target demo --root demo={clean}", command
    # as written, from another folder, fixpack not on PATH nor the checkout on PYTHONPATH: this pack's lock
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    assert engine.apply(b.request(target)).ok
    (b.pack / "profiles/p1.lock").unlink()
    with pytest.raises(StaleLockError, match="no lock for profile 'p1'") as exc:
        engine.apply(b.request(target, only_targets=("demo",)))
    assert want in str(exc.value)


def test_a_stale_lock_in_a_python_without_the_maintainer_extra_says_where_lock_runs(setup):
    """An image's lean install (no GitPython, pypi-simple, tomlkit, packaging: sys.modules[name] = None makes
    them absent) cannot run the `lock` command the error renders: the error says so and where it runs. A Python
    with them says nothing more."""
    b, target = setup
    lock = b.pack / "profiles/p1.lock"
    lock.write_text(lock.read_text().replace('"digest": "', '"digest": "0', 1))
    blocked = "import sys, runpy\nfor m in ('git', 'pypi_simple', 'tomlkit', 'packaging'): sys.modules[m] = None\n" \
              "sys.argv = ['fixpack'] + sys.argv[1:]\nrunpy.run_module('fixpack.cli', run_name='__main__')"
    args = ["status", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={target}"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    lean = subprocess.run([sys.executable, "-c", blocked, *args], capture_output=True, text=True, env=env)
    assert lean.returncode == 2 and "does not match its seal" in lean.stderr, lean.stderr
    assert (f"; lock is a maintainer's command and this Python ({sys.executable}) lacks its libraries (GitPython, "
            f"pypi-simple, tomlkit, packaging): run it in a checkout of the pack after `pip install -e "
            f"'.[maintainer]'` there, then bring the new lock here") in " ".join(lean.stderr.split()), lean.stderr
    full = subprocess.run([sys.executable, "-m", "fixpack.cli", *args], capture_output=True, text=True, env=env)
    assert full.returncode == 2 and "does not match its seal" in full.stderr and "maintainer" not in full.stderr, full.stderr


def test_a_diff_git_line_that_disagrees_with_its_file_lines(setup):
    b, target = setup
    found = _problems(b, target, "diff --git a/demo_pkg/mod.py b/demo_pkg/mod.py",
                      "diff --git a/demo_pkg/mod.py b/demo_pkg/other.py")
    assert any(":11: '+++ b/demo_pkg/mod.py' names another file than its 'diff --git' line" in p for p in found), found
    assert not any("Target without source" in p for p in found)


def test_a_binary_file_in_place_of_a_patch(setup):
    b, target = setup
    (b.pack / "fixes/one/0001-change.patch").write_bytes(b"\x7fELF\x02\x01\x00\x00\n\xff\xfe")
    with pytest.raises(PackError) as exc:
        engine.apply(b.request(target))
    found = [str(p) for p in exc.value.problems]
    assert any("a binary file, not a patch (a NUL byte at byte offset 6)" in p for p in found), found


@pytest.mark.parametrize("where", ["after the diff", "inside a hunk"])
def test_bytes_that_are_not_text_are_named_not_dumped(setup, where):
    b, target = setup
    patch = b.pack / "fixes/one/0001-change.patch"
    data = patch.read_bytes()
    junk = b"\x7fELF\x02\x01\xff\xfe\n"
    patch.write_bytes(data + junk if where == "after the diff" else data.replace(b" line 6\n", junk, 1))
    with pytest.raises(PackError) as exc:
        engine.apply(b.request(target))
    found = [str(p) for p in exc.value.problems]
    assert any("8 bytes of binary data, not text" in p for p in found) and not any("\\x" in p for p in found), found


@pytest.mark.parametrize("header, after, togo", [
    ("@@ -1,9 +1,9 @@", "2.43.0\n\n", (1, 1)),  # one more context line claimed
    ("@@ -1,9 +1,8 @@", "2.43.0\n\n", (1, 0)),  # one more removed line: the '-- ' completes the hunk
    ("@@ -1,8 +1,9 @@", "2.43.0\n\n", (0, 1)),  # one more added line: it said "longer than its @@ header"
    ("@@ -1,10 +1,10 @@", "2.43.0\n\n", (2, 2)),  # two more context lines
    ("@@ -1,9 +1,9 @@", "2.39.3 (Apple Git-146)\n\n", (1, 1)),  # not a plain version line
    ("@@ -1,9 +1,9 @@", "\n", (1, 1)),  # no version line: a blank one (it said "longer")
    ("@@ -1,9 +1,9 @@", "", (1, 1)),  # the '-- ' last in the file
])
def test_a_hunk_that_claims_the_signature_is_named_at_its_signature(setup, header, after, togo):
    """A last hunk claiming more lines than it has, with git format-patch's signature after it: the '-- ' was read as
    a removed line and the error named the line after it ('has no prefix', 'unexpected line outside a hunk') or said
    the hunk was longer than its header. Now (two fresh users): at the '-- ' line, the hunk's line, the lines it still
    had to go before the '-- ' (not after it), and, where the '-- ' completed the hunk, the other reading too (the
    hunk's own last line removes '- ' and the signature's '-- ' line is lost)."""
    b, target = setup
    patch = b.pack / "fixes/one/0001-change.patch"
    lines = patch.read_text().splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if ln.startswith("@@"))
    lines[at] = header + "\n"  # the hunk: lines 1-8 of the file, line 5 changed (9 lines under its header)
    lines[at + 1:] = [f" line {i}\n" if i != 5 else "-line 5\n+five\n" for i in range(1, 9)]
    patch.write_text("".join(lines) + "-- \n" + after)
    hunk, sig = at + 1, at + 11  # 1-based: the @@ line, and the '-- ' line after the hunk's 9
    before = snapshot(target)
    with pytest.raises(PackError) as exc:
        engine.apply(b.request(target))
    assert snapshot(target) == before
    found = [str(p) for p in exc.value.problems]
    if togo == (1, 0):  # the '-- ' completed the hunk: both readings
        said = [p for p in found if f":{sig}: line {sig}, '-- ', ends the hunk that starts at line {hunk}, and what "
                f"follows is no diff: either the @@ counts claim one removed line more than the hunk has and git "
                f"format-patch's signature line was read as that line, or the hunk's own last line removes '- ' and "
                f"the signature's '-- ' line is missing after it" in p]
        assert said and "fix the @@ line's numbers or put the signature's '-- ' line back" in said[0], found
    else:
        said = [p for p in found if f":{sig}: the hunk that starts at line {hunk} ends early: line {sig}, '-- ' (git "
                f"format-patch's signature line, most likely), was read as one of its removed lines, with {togo[0]} "
                f"pre-image and {togo[1]} post-image lines still to go before it" in p]
        assert said and "fix the @@ line's numbers" in said[0], found


@pytest.mark.parametrize("header, said", [
    ("@@ -1,8 +1,9 @@", "has more lines than its header '@@ -1,8 +1,9 @@' states (8 pre-image and 9 post-image "
                        "lines): line {line} is one pre-image line past them"),  # 9 pre-image and 9 post-image lines
    ("@@ -1,10 +1,10 @@", "ends early: 1 pre-image and 1 post-image lines missing at the end of the patch"),
])
def test_a_dash_dash_space_inside_a_hunk_is_not_taken_for_the_signature(setup, header, said):
    """A third fresh user: a removed '- ' line (the patch line '-- ') in the middle of a hunk whose counts are wrong
    was named as git's signature, at its line, with counts taken there. Only a '-- ' that is the hunk's last line read
    is; here the old words, at the line where the counts fail."""
    b, target = setup
    patch = b.pack / "fixes/one/0001-change.patch"
    lines = patch.read_text().splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if ln.startswith("@@"))
    lines[at] = header + "\n"
    lines[at + 1:] = [" line 1\n", "-- \n", " line 2\n", " line 3\n", " line 4\n", "-line 5\n", "+five\n",
                      " line 6\n", " line 7\n", " line 8\n", "+eight and a half\n"]
    patch.write_text("".join(lines))
    with pytest.raises(PackError) as exc:
        engine.apply(b.request(target))
    found = [str(p) for p in exc.value.problems]
    assert not any("signature" in p for p in found), found
    said = said.format(line=at + 11)  # the ninth pre-image line: ' line 8'
    assert any(f"the hunk that starts at line {at + 1} {said}" in p for p in found), found
    if "past them" in said:
        assert "fix the @@ line's numbers, or regenerate the patch" in next(p for p in found if said in p), found


def test_a_dash_dash_space_before_the_next_file_is_not_taken_for_the_signature(setup):
    """A fifth fresh user: a first file's hunk whose last line removes '- ' (the patch line '-- '), its counts one line
    short, right before the second file's 'diff --git' line, was said to have taken git's signature; a signature is
    never followed by a diff: the old words, at the 'diff --git' line."""
    b, target = setup
    patch = b.pack / "fixes/one/0001-change.patch"
    text = patch.read_text()
    lines = text.splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if ln.startswith("@@"))
    lines[at] = "@@ -1,9 +1,8 @@\n"
    lines[at + 1:] = [f" line {i}\n" if i != 5 else "-line 5\n+five\n" for i in range(1, 8)] + ["-- \n"]
    second = "diff --git a/demo_pkg/other.py b/demo_pkg/other.py\n"
    patch.write_text("".join(lines) + second + "--- a/demo_pkg/other.py\n+++ b/demo_pkg/other.py\n@@ -1 +1 @@\n-a\n+b\n")
    with pytest.raises(PackError) as exc:
        engine.apply(b.request(target))
    found = [str(p) for p in exc.value.problems]
    assert not any("signature" in p for p in found), found
    assert any(f":{at + 11}: the hunk that starts at line {at + 1} ends early" in p for p in found), found  # diff --git


def test_a_hunk_whose_last_line_removes_a_dash_space_still_applies(builder):
    """A hunk whose last line removes '- ' (the patch line '-- '), its counts right, then git's signature: no
    signature reading of it (a fresh user checked the change above did not break it)."""
    b = builder
    base = numbered(19) + "- \n"  # its last line: a dash and a space
    clean = b.tree("clean2", {MOD: base})
    one = base.replace("line 5\n", "five\n")
    b.add_fix("one", {MOD: base}, {MOD: one})
    b.add_fix("two", {MOD: one}, {MOD: one[:-len("- \n")]})  # removes it: the hunk's last line is '-- '
    text = (b.pack / "fixes/two/0001-change.patch").read_text()
    assert text.endswith("\n-- \n"), text
    (b.pack / "fixes/two/0001-change.patch").write_text(text + "-- \n2.43.0\n\n")
    b.profile(["one", "two"])
    b.lock(clean)
    image = b.tree("image", {MOD: base})
    assert engine.apply(b.request(image)).ok
    assert "- \n" not in (image / MOD).read_text()


def test_what_unidiff_refuses_is_named_at_its_line(setup):
    """A fresh user: a '+++' line without its 'b/' prefix passed the structure walk and unidiff's own words came out
    without a line ("PATCH: Target without source: +++ ...", its newline splitting the message in two); the README
    promises file and line. Now at the line unidiff names, on one line, exit 2."""
    b, target = setup
    patch = b.pack / "fixes/one/0001-change.patch"
    lines = patch.read_text().splitlines()
    at = next(n for n, ln in enumerate(lines, 1) if ln.startswith("+++ "))
    found = _problems(b, target, "+++ b/demo_pkg/mod.py", "+++ demo_pkg/mod.py")
    said = [p for p in found if f"0001-change.patch:{at}: malformed patch: " in p]
    assert said and "\n" not in said[0] and "+++ demo_pkg/mod.py" in said[0], found


def test_a_line_without_prefix_in_a_hunk(setup):
    b, target = setup
    found = _problems(b, target, " line 6\n", "line 6\n")
    assert any(":18: line 18 has no ' ', '+' or '-' prefix" in p and "'line 6'" in p for p in found), found


def test_the_absolute_path_hint_is_said_once(setup):
    b, target = setup
    found = _problems(b, target, "--- a/demo_pkg/mod.py", "--- /demo_pkg/mod.py")
    assert len(found) == 1 and found[0].count("relative to the target root") == 1, found


def test_a_hunk_missing_from_an_empty_file_says_the_file_is_empty(setup):
    b, target = setup
    (target / MOD).write_text("")
    r = engine.apply(b.request(target, dry_run=True))
    text = " ".join(r.fix("one").messages)
    assert r.exit_code == 4 and "the file is empty" in text and "lines 1-0" not in text, text


def test_plain_output_gives_each_target_note_its_own_line(capsys):
    report = Report("status", "p1", dry_run=True, targets=[
        TargetReport("demo", TargetStatus.FOUND, "/img", "root", "1.0", "abc", notes=["first note", "second note"]),
        TargetReport("other", TargetStatus.MISMATCH, "/img2", "root", "2.0", "def", notes=["off its pin"])])
    render(report, as_json=False)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:6] == ["target demo: found 1.0 @ abc at /img", "  - first note", "  - second note",
                          "target other: mismatch 2.0 @ def at /img2", "  - off its pin"], lines


def test_the_journal_notice_is_not_glued_to_the_root(setup):
    b, target = setup
    env = {**os.environ, "PYTHONPATH": str(REPO), "FIXPACK_FAULT_AT": "2"}
    args = ["--pack", str(b.pack), "-p", "p1", "--root", f"demo={target}"]
    killed = subprocess.run([sys.executable, "-m", "fixpack.cli", "apply", *args], env=env, capture_output=True)
    assert killed.returncode == 137
    env.pop("FIXPACK_FAULT_AT")
    st = subprocess.run([sys.executable, "-m", "fixpack.cli", "status", *args], env=env, capture_output=True, text=True)
    lines = st.stdout.splitlines()
    assert f"target demo: found 1.0 @ gabcdef1234 at {target}" in lines, lines
    assert "  - an interrupted run left a journal; the next apply or revert rolls it back first" in lines, lines


def test_lock_wait_on_the_command_line_is_not_blamed_on_the_variable(setup):
    b, target = setup
    env = {k: v for k, v in os.environ.items() if k != "FIXPACK_LOCK_WAIT"}
    p = subprocess.run([sys.executable, "-m", "fixpack.cli", "status", "--pack", str(b.pack), "-p", "p1", "--root",
                        f"demo={target}", "--lock-wait", "-1"], capture_output=True, text=True, cwd=REPO, env=env)
    assert p.returncode == 2 and "'--lock-wait': '-1': not a number of seconds" in p.stderr, p.stderr
    assert "FIXPACK_LOCK_WAIT" not in p.stderr, p.stderr


def test_prove_with_a_python_that_lacks_the_target_says_so_not_a_root(setup):
    """`prove --python` with a Python that has no target installed (a light .venv) named a `--root` the user
    never gave; it says that this Python has no such package, and which Python to give."""
    from fixpack.errors import BadInputError
    from fixpack.prove import prove

    b, _ = setup
    with pytest.raises(BadInputError) as err:
        prove(b.pack, "p1", sys.executable)
    said = str(err.value)
    assert said.startswith(f"--python {sys.executable}: this Python has no demo_pkg installed") and "--root" not in said


def test_a_hunk_looked_for_reversed_names_its_lines_the_post_image(setup):
    """Found by a fresh user: a hunk looked for reversed (is the fix in? status and revert of a recorded fix, whose
    file was edited since) was said missing as "its pre-image is not in lines ...", its closest near-miss showing
    the post-image's lines as expected; a post-image twice in a file was "its pre-image occurs 2 times". Each says
    post-image now; a hunk looked for forward still says pre-image."""
    b, target = setup
    post = numbered(20).replace("line 5\n", "five\n")
    assert engine.apply(b.request(target)).ok
    (target / MOD).write_text(post.replace("five\n", "FIVE\n"))
    for run in (engine.status, engine.revert):
        said = " ".join(run(b.request(target)).fix("one").messages)
        assert (f"{MOD}: hunk #1 missing: its post-image is not in lines 1-20 (expected at line 2); closest: lines "
                f"2-8, 6 of 7 lines match; line 5: expected 'five', found 'FIVE'") in said and "pre-image" not in said, \
            said
    twice = b.tree("twice", {MOD: post + "".join(post.splitlines(True)[1:8])})
    said = " ".join(engine.status(b.request(twice)).fix("one").messages)
    assert f"{MOD}: hunk #1 is ambiguous: its post-image occurs 2 times in the file at lines [2, 21]" in said, said
    (target / MOD).write_text(numbered(20).replace("line 6\n", "LINE 6\n"))
    (target / ".fixpack" / "demo.manifest.json").unlink()
    said = " ".join(engine.status(b.request(target)).fix("one").messages)
    assert f"{MOD}: hunk #1 missing: its pre-image is not in lines 1-20 (expected at line 2)" in said, said
