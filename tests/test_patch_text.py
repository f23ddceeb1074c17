"""A patch's text read one way by the parser, the lock's change hash, ``fixpack format`` and the applier
(found by a fresh user): git's ``index`` line with a mode, a lost final newline, a changed file's CRLF
lines against a patch file converted to CRLF, git's C-quoted paths."""

from __future__ import annotations

import pytest
from conftest import git, numbered, snapshot

from fixpack import engine
from fixpack.diff import diff_body, parse_patch
from fixpack.diffsyntax import unquote
from fixpack.errors import ConflictError, PatchParseError
from fixpack.exchange import import_mails
from fixpack.loader import load_pack
from fixpack.pack_tools import stale_patches
from fixpack.patchmodel import change_sha256

DIFF = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"


def test_an_index_line_s_mode_is_not_part_of_the_change():
    with_index = DIFF.replace("--- a/x.py", "index aeb82de..abcdef1 100644\n--- a/x.py")
    a, b = parse_patch(DIFF.encode()), parse_patch(with_index.encode())
    assert change_sha256(a.files) == change_sha256(b.files)
    assert diff_body(with_index) == DIFF  # format drops it: the hash is the canonical form's
    changed = DIFF.replace("--- a/x.py", "old mode 100644\nnew mode 100755\n--- a/x.py")
    assert change_sha256(parse_patch(changed.encode()).files) != change_sha256(a.files)  # a mode change counts


def test_a_patch_without_its_final_newline_reads_as_with_it():
    whole = parse_patch(DIFF.encode())
    cut = parse_patch(DIFF.encode()[:-1])
    assert cut.files == whole.files and cut.files[0].hunks[0].new_lines == ("a\n", "c\n")
    ends_blank = DIFF + " \n"
    text = ends_blank.replace("@@ -1,2 +1,2 @@", "@@ -1,3 +1,3 @@").encode()
    assert parse_patch(text[:-1]).files[0].hunks[0].old_lines == ("a\n", "b\n", "\n")


def test_crlf_lines_of_a_changed_file_are_content():
    data = DIFF.replace(" a\n-b\n+c\n", " a\r\n-b\r\n+c\r\n").encode()
    hunk = parse_patch(data).files[0].hunks[0]
    assert hunk.old_lines == ("a\r\n", "b\r\n") and hunk.new_lines == ("a\r\n", "c\r\n")
    last = DIFF.replace(" a\n-b\n+c\n", " a\r\n-b\r\n+c\r\n\\ No newline at end of file\n").encode()
    assert parse_patch(last).files[0].hunks[0].new_lines == ("a\r\n", "c\r")


@pytest.mark.parametrize("converted", [DIFF.replace("\n", "\r\n"), DIFF.replace("+++ b/x.py\n", "+++ b/x.py\r\n"),
                                       "From: a <a@b>\r\nSubject: x\r\n\r\n---\r\n" + DIFF])
def test_a_patch_file_converted_to_crlf_is_refused_as_such(converted):
    with pytest.raises(PatchParseError) as exc:
        parse_patch(converted.encode(), "p.patch")
    said = str(exc.value)
    assert "CRLF line endings in the patch file itself" in said and "not a line of a changed file" in said
    assert exc.value.problems and exc.value.problems[0].line is not None and "dos2unix" in exc.value.problems[0].hint


def test_git_s_quoted_paths_are_read_and_written_unquoted():
    assert unquote('"a/my dir/\\303\\274 file.py"') == "a/my dir/ü file.py"
    assert unquote('"a\\tb\\n\\"q\\"\\\\"') == 'a\tb\n"q"\\'
    quoted = ('diff --git "a/p/my dir/\\303\\274 file.py" "b/p/my dir/\\303\\274 file.py"\n'
              '--- "a/p/my dir/\\303\\274 file.py"\t\n+++ "b/p/my dir/\\303\\274 file.py"\t\n@@ -1 +1 @@\n-a\n+b\n')
    plain = quoted.replace('"a/p/my dir/\\303\\274 file.py"', "a/p/my dir/ü file.py").replace(
        '"b/p/my dir/\\303\\274 file.py"', "b/p/my dir/ü file.py")
    assert [fp.path for fp in parse_patch(quoted.encode()).files] == ["p/my dir/ü file.py"]
    assert diff_body(quoted) == plain and diff_body(plain) == plain  # one spelling in the pack
    dq = quoted.replace("\\303\\274", '\\"')  # git quotes a '"' however it is set: kept quoted
    assert diff_body(dq) == dq and parse_patch(dq.encode()).files[0].path == 'p/my dir/" file.py'
    tab = quoted.replace("\\303\\274", "\\t")  # a control character: refused (it would print as another path)
    with pytest.raises(PatchParseError, match=r"^p\.patch:1: path 'p/my dir/\\t file\.py' is not canonical: a control"):
        parse_patch(tab.encode(), "p.patch")
    with pytest.raises(PatchParseError) as exc:
        parse_patch(quoted.replace("\\303", "\\x").encode(), "p.patch")
    assert "p.patch:1" in str(exc.value)


def test_import_of_git_s_default_quoted_non_ascii_path_round_trips(builder, tmp_path):
    mod = "demo_pkg/my dir/ü file.py"
    clean = builder.tree("clean", {mod: numbered(10)})
    builder.write_series()
    builder.profile([])
    repo = tmp_path / "mailrepo"
    (repo / "demo_pkg/my dir").mkdir(parents=True)
    (repo / mod).write_text(numbered(10))
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    (repo / mod).write_text(numbered(10).replace("line 5\n", "five\n"))
    git(repo, "commit", "-qam", "Change a file with a non-ASCII name")
    mail = tmp_path / "in.patch"
    mail.write_text(git(repo, "format-patch", "-1", "--stdout"))  # git's default: core.quotePath on
    assert '"a/demo_pkg/my dir/\\303\\274 file.py"' in mail.read_text()
    done = import_mails(builder.pack, mail, "imp", "p1", target="demo", roots={"demo": clean})
    assert done.outcome.changed
    patch = (builder.pack / done.patches[0]).read_text()
    assert "diff --git a/demo_pkg/my dir/ü file.py b/demo_pkg/my dir/ü file.py\n" in patch
    assert stale_patches(load_pack(builder.pack)) == []
    image = builder.tree("image", {mod: numbered(10)})
    before = snapshot(image)
    assert engine.apply(builder.request(image)).exit_code == 0
    assert (image / mod).read_text() == numbered(10).replace("line 5\n", "five\n")
    assert engine.revert(builder.request(image)).exit_code == 0 and snapshot(image) == before


def test_a_near_miss_that_differs_only_in_its_line_end_says_so():
    from fixpack.applier import closest
    from fixpack.evaluate import HunkNote

    near = closest(["a\n", "b\n", "c"], ("a\n", "b\n", "c\n"), 0)
    assert near is not None and near.differs == ((3, "c\n", "c"),)
    note = HunkNote("x.py", 1, "missing", None, 0, searched=3, expected=1, closest=near)
    said = note.message()
    assert "line 3: 'c' as expected, but the patch's line ends in LF and the file's in no newline" in said
    assert "expected '', found ''" not in said and "expected 'c', found 'c'" not in said
    crlf = closest(["a\r\n", "b\n"], ("a\n", "b\n"), 0)
    assert crlf is not None and "ends in LF and the file's in CRLF" in HunkNote(
        "x.py", 1, "missing", None, 0, searched=2, expected=1, closest=crlf).message()


def _cli(*args):
    import subprocess
    import sys

    from conftest import REPO
    return subprocess.run([sys.executable, "-m", "fixpack.cli", *args], capture_output=True, text=True, cwd=REPO)


@pytest.mark.parametrize("edit", ["index", "no-final-newline", "blank-lines-at-end"])
def test_check_lock_format_and_check_agree(builder, edit):
    """found by a fresh user: with git's index line check said the lock was stale, lock rewrote it, format
    dropped the line, and check said stale again (with the last newline cut: lock exit 4). Another: blank lines an
    editor left at the end of the patch were taken into its last hunk's text, so the fix's fingerprint changed and
    status and check called the lock stale (lock exit 4: 'bump the version'); they are no part of the change."""
    from conftest import one_fix_pack

    one_fix_pack(builder)
    (builder.pack / "fixes/one/test_one.py").write_text("def test_it():\n    pass\n")
    clean, pack = builder.base / "clean", str(builder.pack)
    patch = builder.pack / "fixes/one/0001-change.patch"
    assert _cli("format", "--pack", pack).returncode == 0
    assert _cli("lock", "--pack", pack, "--profile", "p1", "--root", f"demo={clean}").returncode == 0
    original, lock = patch.read_bytes(), (builder.pack / "profiles/p1.lock").read_bytes()
    assert _cli("check", "--pack", pack).returncode == 0
    text = original.decode()
    head = text.index("\n", text.index("diff --git ")) + 1
    patch.write_text(text[:head] + "index aeb82de..abcdef1 100644\n" + text[head:] if edit == "index" else
                     text + "\n\n" if edit == "blank-lines-at-end" else text[:-1])
    r = _cli("check", "--pack", pack)
    assert r.returncode == 0, r.stdout + r.stderr  # the same change: the lock is fresh
    r = _cli("lock", "--pack", pack, "--profile", "p1", "--root", f"demo={clean}")
    assert r.returncode == 0, r.stderr
    if edit == "blank-lines-at-end":  # (no churn: format leaves an editor's blank lines; the lock, resealed, fresh)
        assert _cli("format", "--check", "--pack", pack).returncode == 0
        assert _cli("check", "--pack", pack).returncode == 0
        return
    assert _cli("format", "--check", "--pack", pack).returncode == 2  # churn for format to drop
    assert _cli("format", "--pack", pack).returncode == 0 and patch.read_bytes() == original
    assert _cli("check", "--pack", pack).returncode == 0 and _cli("format", "--check", "--pack", pack).returncode == 0
    assert _cli("lock", "--pack", pack, "--profile", "p1", "--root", f"demo={clean}").returncode == 0
    assert (builder.pack / "profiles/p1.lock").read_bytes() == lock


def test_blank_lines_that_end_the_patch_are_no_part_of_its_last_hunk():
    """An editor's blank lines at the end of a patch: the same fingerprint and the same hunk (its trailing context
    counted as before: the blank lines had made it 0, so fuzz could not drop that context)."""
    body = DIFF.replace("+c\n", "+c\n d\n").replace("@@ -1,2 +1,2 @@", "@@ -1,3 +1,3 @@")
    plain = parse_patch(body.encode())
    for extra in ("\n", "\n\n\n"):
        blank = parse_patch((body + extra).encode())
        assert change_sha256(blank.files) == change_sha256(plain.files)
        assert blank.files[0].hunks == plain.files[0].hunks and plain.files[0].hunks[0].trailing_context == 1


def test_a_change_of_line_ends_is_a_change():
    from fixpack.patchtext import change_lines

    lf = DIFF.encode()
    crlf = DIFF.replace("+c\n", "+c\r\n").encode()
    assert change_lines(lf) != change_lines(crlf)
    assert change_lines(lf) == change_lines(DIFF.replace("@@ -1,2 +1,2 @@", "@@ -5,2 +5,2 @@").encode())


def test_import_of_a_change_to_a_crlf_file_applies_and_reverts_byte_for_byte(builder, tmp_path):
    mod = "demo_pkg/dos.py"
    crlf = numbered(10).replace("\n", "\r\n")
    clean = builder.tree("clean", {})
    (clean / mod).write_bytes(crlf.encode())
    builder.write_series()
    builder.profile([])
    repo = tmp_path / "mailrepo"
    (repo / "demo_pkg").mkdir(parents=True)
    (repo / mod).write_bytes(crlf.encode())
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    changed = crlf.replace("line 5\r\n", "five\r\n").encode()
    (repo / mod).write_bytes(changed)
    git(repo, "commit", "-qam", "Change a CRLF file")
    mail = tmp_path / "in.patch"
    mail.write_bytes(subprocess_bytes(repo, "format-patch", "-1", "--stdout"))
    done = import_mails(builder.pack, mail, "imp", "p1", target="demo", roots={"demo": clean})
    assert done.outcome.changed and b"+five\r\n" in (builder.pack / done.patches[0]).read_bytes()
    assert stale_patches(load_pack(builder.pack)) == []
    image = builder.tree("image", {})
    (image / mod).write_bytes(crlf.encode())
    before = snapshot(image)
    assert engine.apply(builder.request(image)).exit_code == 0 and (image / mod).read_bytes() == changed
    assert engine.revert(builder.request(image)).exit_code == 0 and snapshot(image) == before


def subprocess_bytes(cwd, *args):
    import os
    import subprocess

    from conftest import GIT_ENV
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env={**os.environ, **GIT_ENV}).stdout


def test_a_binary_section_keeps_its_index_line_s_mode(tmp_path):
    """format keeps a GIT binary patch's index line (its blob ids): its mode stays part of the change."""
    repo = tmp_path / "bin"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "b.bin").write_bytes(bytes(range(256)))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    (repo / "b.bin").write_bytes(bytes(range(255, -1, -1)))
    body = git(repo, "diff", "--binary")
    assert "\nindex " in body and body.count(" 100644\n") == 1
    fp = parse_patch(body.encode()).files[0]
    assert fp.data is not None and (fp.old_mode, fp.new_mode) == ("100644", "100644") and diff_body(body) == body


def test_hunk_lines_in_crlf_against_a_file_in_lf_are_said_to_differ_in_their_line_ends(builder):
    """found by a fresh user: a patch whose hunk lines alone were converted to CRLF (the file's are LF) matched
    nowhere whole, so the missing hunk had no near-miss and its cause was never named: not by lock, not by
    apply on a tree whose file is in LF."""
    mod = "demo_pkg/mod.py"
    base = numbered(20)
    folder = builder.add_fix("one", {mod: base}, {mod: base.replace("line 3\n", "three\n")})
    patch = folder / "0001-change.patch"
    head, at, hunk = patch.read_text().partition("@@ ")
    line, nl, rest = hunk.partition("\n")
    patch.write_bytes((head + at + line + nl + rest.replace("\n", "\r\n")).encode())
    builder.profile(["one"])
    cause = ("closest: lines 1-6, 0 of 6 lines match; line 1: 'line 1' as expected, but the patch's line ends in "
             "CRLF and the file's in LF")
    with pytest.raises(ConflictError) as exc:
        builder.lock(builder.tree("clean", {mod: base}))
    assert cause in str(exc.value) and "every line is there but for its line end" in str(exc.value)
    builder.lock(builder.tree("clean-crlf", {mod: base.replace("\n", "\r\n")}))  # what the hunk was written for
    image = builder.tree("image", {mod: base})
    before = snapshot(image)
    report = engine.apply(builder.request(image))
    said = "\n".join(m for f in report.fixes for m in f.messages)
    assert report.exit_code == 4 and snapshot(image) == before, said
    assert "hunk #1 missing" in said and cause in said and "every line is there but for its line end" in said


def test_a_hunk_that_differs_only_in_a_last_newline_is_not_told_of_a_cr():
    """A fresh user: a missing hunk whose lines differ from the file's only in a last line's newline was told to
    regenerate with git diff "which keeps a CR", though no CR was in it. The near-miss now says what differs."""
    from fixpack.applier import closest
    from fixpack.evaluate import HunkNote

    for lines, pre, told in ((["a\n", "b"], ("a\n", "b\n"), "a last line with a newline in one and none in the other"),
                             (["a\r\n", "b\r\n"], ("a\n", "b\n"), "which keeps a CR")):
        c = closest(lines, pre, 0)
        assert c is not None and c.line_ends, c
        said = HunkNote("x.py", 1, "missing", None, 0, searched=2, expected=1, closest=c).message()
        assert told in said and ("CR" in said) == (told == "which keeps a CR"), said


@pytest.mark.parametrize(("date", "last"), [("Mon, 2 Jan 2023 10:00:00 +0100", "2023-01-02"),
                                            ("Mon, 2 Jan 0000 10:00:00 +0000", ""), ("no date at all", "")])
def test_an_imported_mail_s_date_gives_last_update_only_when_it_is_one(date, last):
    """Found by a fresh maintainer: `Date: ... 0000` became last_update = "2000-12-05" (a two-digit year's reading)."""
    from fixpack.mail_upstream import upstream_from
    from fixpack.patchmail import Mail

    assert upstream_from([Mail("A <a@example.org>", date, "S", "d", ())]).last_update == last


@pytest.mark.parametrize(("written", "author"), [
    ("O'Brien (ACME) <o@example.org>", "O'Brien (ACME) <o@example.org>"),  # a comment: the parse dropped it
    ("Renée (ACME) <r@example.org>", "Renée (ACME) <r@example.org>"),  # raw UTF-8: it became unknown-8bit
    ("a\\b <r@example.org>", "a\\b <r@example.org>"),  # the address was lost
    ('"Doe, John" <d@example.org>', "Doe, John <d@example.org>"),
    ("=?UTF-8?q?Ren=C3=A9e=20=28ACME=29?= <n@example.org>", "Renée (ACME) <n@example.org>"),
    ("plain@example.org", "plain@example.org"),
])
def test_a_hand_written_from_keeps_every_word_and_its_address(written, author):
    """Found by a fresh maintainer: From: headers a person wrote by hand lost their comment, their address, or came
    back as =?unknown-8bit?...; the author is read from the header as written, and reads back the same."""
    from fixpack.patchmail import read_mail, render

    body = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
    mail = read_mail(f"From: {written}\nSubject: [PATCH] s\n\nwhy\n---\n{body}")
    assert mail.author == author
    assert read_mail(render(mail, [], body)).author == author


@pytest.mark.parametrize(("written", "says"), [
    ("a (x <r@example.org>", "is not Name <address>"), ("No Address", "is not Name <address>"),
    ("Two <a@x.org> <b@x.org", "names more than one author"),
    # (a fresh user: the first author's address was lost, 'From: "Jane Doe <jane@example.org>, Bob" <bob@example.org>')
    ("Jane Doe <jane@example.org>, Bob Two <bob@example.org>", "names more than one author"),
    ("jane@example.org, Bob Two <bob@example.org>", "names more than one author")])
def test_a_from_that_is_no_name_and_address_is_refused(written, says):
    from fixpack.errors import BadInputError
    from fixpack.patchmail import read_mail

    with pytest.raises(BadInputError, match=rf"its From: header .* {says}"):
        read_mail(f"From: {written}\nSubject: [PATCH] s\n\nwhy\n---\ndiff --git a/x b/x\n", "m.patch")


def test_an_rfc_2231_language_tag_in_an_encoded_word_is_read_as_its_charset():
    """Found by a fresh user: `=?UTF-8*en?q?...?=` (a charset with an RFC 2231 language tag) was refused as an
    unknown charset 'utf-8*en' (exit 2). The tag is no part of the charset: read as UTF-8, in From: and Subject:."""
    from fixpack.patchmail import read_mail

    text = ("From: =?UTF-8*en?q?J=C3=B6rg?= <j@x.org>\nSubject: [PATCH] =?UTF-8*en?q?f=C3=BCx?= it\n\n"
            "body\n---\ndiff --git a/x b/x\n")
    mail = read_mail(text, "in.patch")
    assert mail.author == "Jörg <j@x.org>" and mail.subject == "füx it", mail


def test_one_added_line_in_crlf_in_a_patch_in_lf_is_refused_at_its_line(builder):
    """Found by a user: one added line that ends in CR LF, in a patch whose other lines end in LF (a line pasted from a
    CRLF file), was taken, and apply wrote the CR into the target. It is refused where the patch is parsed: exit 2 at
    the patch file's line, saying the line ends in CR LF while the others end in LF, and what to do; nothing written.
    A change to a CRLF file (its context and removed lines end in CR LF, test_crlf_lines_of_a_changed_file_are_content
    and the import of one above), a new file whose lines all end in CR LF and a file turned from LF to CR LF are taken as
    before."""
    stray = DIFF.replace("+c\n", "+c\r\n")
    with pytest.raises(PatchParseError) as exc:
        parse_patch(stray.encode(), "p.patch")
    said, problem = str(exc.value), exc.value.problems[0]
    assert said.startswith("p.patch:7: the line ends in CR LF, while the patch's other lines of x.py end in LF (2 of "
                           "them, its context and removed lines among them): its CR would be written into x.py"), said
    assert problem.line == 7 and problem.hint.startswith("remove the CR from the line's end"), problem
    new = "diff --git a/n.py b/n.py\nnew file mode 100644\n--- /dev/null\n+++ b/n.py\n@@ -0,0 +1,2 @@\n+a\r\n+b\r\n"
    assert parse_patch(new.encode()).files[0].hunks[0].new_lines == ("a\r\n", "b\r\n")
    with pytest.raises(PatchParseError, match=r"^p\.patch:6: the line ends in CR LF, while the patch's other lines of "
                                              r"n\.py end in LF \(1 of them\): its CR"):
        parse_patch(new.replace("+b\r\n", "+b\n").encode(), "p.patch")
    # a file turned from LF to CR LF (every line it adds in CR LF, no context line) is a change of line ends: taken
    turn = "diff --git a/t.py b/t.py\n--- a/t.py\n+++ b/t.py\n@@ -1,2 +1,2 @@\n-a\n-b\n+a\r\n+b\r\n"
    assert parse_patch(turn.encode()).files[0].hunks[0].new_lines == ("a\r\n", "b\r\n")
    with pytest.raises(PatchParseError, match=r"^p\.patch:7: the line ends in CR LF"):  # half of it turned: refused
        parse_patch(turn.replace("+b\r\n", "+b\n").encode(), "p.patch")
    # a fresh user: git diff -U0 of a changed line (no context line) whose new text ends in CR LF passed as a turn
    u0 = "diff --git a/t.py b/t.py\n--- a/t.py\n+++ b/t.py\n@@ -2 +2 @@\n-y\n+Y\r\n"
    with pytest.raises(PatchParseError, match=r"^p\.patch:6: the line ends in CR LF, while the patch's other lines of "
                                              r"t\.py end in LF \(1 of them, its context and removed lines"):
        parse_patch(u0.encode(), "p.patch")
    mod = "demo_pkg/mod.py"
    base = numbered(20)
    folder = builder.add_fix("one", {mod: base}, {mod: base.replace("line 3\n", "three\n")})
    patch = folder / "0001-change.patch"
    patch.write_bytes(patch.read_bytes().replace(b"+three\n", b"+three\r\n"))
    line = patch.read_bytes().split(b"\n").index(b"+three\r") + 1
    builder.profile(["one"])
    image = builder.tree("image", {mod: base})
    before = snapshot(image)
    r = _cli("apply", "--pack", str(builder.pack), "-p", "p1", "--root", f"demo={image}")
    assert r.returncode == 2 and snapshot(image) == before, r.stderr
    assert f"{patch}:{line}: the line ends in CR LF, while the patch's other lines of {mod} end in LF" in r.stderr


NO_NL = "\\ No newline at end of file\n"
MARKED = {  # a hunk of demo_pkg/mod.py (20 lines) whose '\ No newline at end of file' marker follows no last line
    "context": "@@ -1,6 +1,6 @@\n line 1\n line 2\n-line 3\n+three\n line 4\n line 5\n line 6\n" + NO_NL,
    "removed": "@@ -3 +3 @@\n-line 3\n" + NO_NL + "+three\n",
    "added": "@@ -3 +3 @@\n-line 3\n+three\n" + NO_NL,
}


@pytest.mark.parametrize("case", sorted(MARKED))
def test_a_misplaced_no_newline_marker_is_named_at_its_line(builder, case):
    """Found by a user: a '\\ No newline at end of file' marker after a hunk's last line, where that line is not the
    file's last, got a hint about CR line ends at `lock` ("write the hunk's lines with the file's line ends ... which
    keeps a CR"). It is said to be misplaced, at its line in the patch: it must follow the last line of the file's pre-
    or post-image. After an added line alone (a hunk with no context below it) it was worse: lock took it and apply
    joined that line to the next ("threeline 4"); the hunk is refused so too."""
    mod = "demo_pkg/mod.py"
    body = f"diff --git a/{mod} b/{mod}\n--- a/{mod}\n+++ b/{mod}\n" + MARKED[case]
    folder = builder.add_fix("one", {}, {}, diff=body)
    builder.profile(["one"])
    clean = builder.tree("clean", {mod: numbered(20)})
    patch = folder / "0001-change.patch"
    marker = patch.read_text().splitlines().index("\\ No newline at end of file") + 1
    r = _cli("lock", "--pack", str(builder.pack), "-p", "p1", "--root", f"demo={clean}")
    said = " ".join(r.stderr.split())
    side = "post-image it puts at line 3" if case == "added" else "pre-image it looks for"
    end = 6 if case == "context" else 3
    assert r.returncode == 4 and not (builder.pack / "profiles/p1.lock").exists(), said
    assert (f"{mod}: hunk #1 missing: its '\\ No newline at end of file' marker is misplaced ({patch}:{marker}): the "
            f"{side} ends without a newline{'' if case == 'added' else f' at line {end}'}, and the file goes on past "
            f"it (to line 20); it must follow the last line of the file's pre- or post-image: remove it, or regenerate "
            f"the patch with git diff / format-patch") in said, said
    assert said.endswith("Move or remove the misplaced marker before locking: the patch is wrong there, not the "
                         "release copy"), said
    assert "CR" not in said and "line end" not in said, said
    if case == "added":  # the applier itself: no text where a line would be joined to the next
        from fixpack.applier import apply_text

        done = apply_text(numbered(20), parse_patch(body.encode()).files[0].hunks)
        assert done.text is None and done.hunks[0].reason.startswith("its '\\ No newline at end of file' marker is "
                                                                     "misplaced"), done


def test_a_last_line_that_ends_in_a_lone_cr_is_a_stray_cr_in_an_lf_file():
    """A fresh user: an added last line with no newline whose last byte is a CR ('+x\\r', then the '\\ No newline'
    marker) went into an LF file: no CR LF line to refuse. Its CR is as stray as a CR LF line's: refused at its line,
    said as a lone CR; in a file whose own last line ended so, or a CRLF file, taken as it is."""
    head = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n"
    with pytest.raises(PatchParseError, match=r"^p\.patch:7: the line ends in a CR, the file's last byte \(a '\\ No "
                                              r"newline' marker follows it\), while the patch's other lines of a\.py "
                                              r"end in LF \(2 of them"):
        parse_patch((head + " a\n-b\n+x\r\n\\ No newline at end of file\n").encode(), "p.patch")
    for body in (" a\n-b\r\n\\ No newline at end of file\n+x\r\n\\ No newline at end of file\n",
                 " a\r\n-b\r\n+x\r\n\\ No newline at end of file\n"):
        assert parse_patch((head + body).encode(), "p.patch").files[0].hunks[0].new_lines[-1] == "x\r"


def test_a_crlf_file_without_a_final_newline_is_no_stray_crlf_line():
    """Found by a fresh user: git's own diff of a new file whose lines end in CR LF but its last (no newline at its end:
    a Windows-made file often has none), and of a file turned from LF to CR LF whose last line has no newline (it stays,
    a context line), were refused as a stray CR LF line (exit 2, "the patch's other lines ... end in LF"): that last
    line, and the '\\ No newline at end of file' marker after it, were counted as lines that end in LF. A line with no
    end is neither: both are taken, and a stray CR LF line beside such a last line is still refused."""
    new = ("diff --git a/n.bat b/n.bat\nnew file mode 100644\n--- /dev/null\n+++ b/n.bat\n@@ -0,0 +1,3 @@\n"
           "+a\r\n+b\r\n+c\n\\ No newline at end of file\n")
    assert parse_patch(new.encode()).files[0].hunks[0].new_lines[:2] == ("a\r\n", "b\r\n")
    turn = ("diff --git a/t.py b/t.py\n--- a/t.py\n+++ b/t.py\n@@ -1,3 +1,3 @@\n-a\n-b\n+a\r\n+b\r\n c\n"
            "\\ No newline at end of file\n")
    assert parse_patch(turn.encode()).files[0].hunks[0].new_lines[:2] == ("a\r\n", "b\r\n")
    with pytest.raises(PatchParseError, match=r"^p\.patch:6: the line ends in CR LF, while the patch's other lines of "
                                              r"t\.py end in LF \(1 of them, its context and removed lines among "
                                              r"them\)"):
        parse_patch((b"diff --git a/t.py b/t.py\n--- a/t.py\n+++ b/t.py\n@@ -1,2 +1,3 @@\n a\n+x\r\n b\n"
                     b"\\ No newline at end of file\n"), "p.patch")


def test_an_added_crlf_line_of_a_hunk_without_context_is_refused_where_the_file_ends_its_lines_in_lf(builder):
    """Found in a closing note: a git diff -U0 hunk that only adds lines cannot show the file's line ends, so a CR LF
    line it adds passed parse (refuse_stray_crlf) and apply wrote its CR into an LF file. The applier now reads the
    file's own line ends: into an LF file such a line is refused (exit 2, at the patch's line, nothing written), by
    `lock` and by apply alike; a CRLF file takes it (its lines end so)."""
    mod = "demo_pkg/mod.py"
    body = f"diff --git a/{mod} b/{mod}\n--- a/{mod}\n+++ b/{mod}\n@@ -3,0 +4 @@\n+inserted\r\n"
    folder = builder.add_fix("one", {}, {}, diff=body)
    builder.profile(["one"])
    patch = folder / "0001-change.patch"
    line = patch.read_bytes().split(b"\n").index(b"+inserted\r") + 1
    lf, crlf = numbered(10), numbered(10).replace("\n", "\r\n")
    said = (f"{patch}:{line}: the line ends in CR LF, but {mod}, where its hunk (no context or removed line, as git "
            f"diff -U0 writes it) adds it, ends its lines in LF (10 of them, none in CR LF): its CR would be written "
            f"into {mod}")
    r = _cli("lock", "--pack", str(builder.pack), "-p", "p1", "--root", f"demo={builder.tree('clean-lf', {mod: lf})}")
    assert r.returncode == 2 and said in " ".join(r.stderr.split()), r.stderr
    assert not (builder.pack / "profiles/p1.lock").exists()
    builder.lock(builder.tree("clean", {mod: crlf}))  # a release whose file ends its lines in CR LF: taken
    image = builder.tree("image", {mod: lf})
    before = snapshot(image)
    r = _cli("apply", "--pack", str(builder.pack), "-p", "p1", "--root", f"demo={image}")
    assert r.returncode == 2 and said in " ".join(r.stderr.split()) and snapshot(image) == before, r.stderr
    image = builder.tree("image-crlf", {mod: crlf})
    r = _cli("apply", "--pack", str(builder.pack), "-p", "p1", "--root", f"demo={image}")
    assert r.returncode == 0 and (image / mod).read_bytes().split(b"\r\n")[3] == b"inserted", r.stderr
    # revert writes nothing of a fix it does not record: on the LF image, which the fix cannot go into, it found that
    # refusal while looking for unrecorded fixes and exited 2 (a fresh user); it is what a patch that does not parse
    # is there: not looked for
    for image in (builder.tree("image-lf-revert", {mod: lf}), builder.tree("image-lf-revert-dry", {mod: lf})):
        before = snapshot(image)
        dry = ("--dry-run",) if image.name.endswith("dry") else ()
        r = _cli("revert", *dry, "--pack", str(builder.pack), "-p", "p1", "--root", f"demo={image}")
        assert r.returncode == 0 and "nothing to do" in r.stdout and snapshot(image) == before, (r.stdout, r.stderr)


def test_a_last_line_with_a_lone_cr_from_a_hunk_without_context_is_refused_in_an_lf_file(builder):
    """The -U0 case of a last line that ends in a lone CR (no newline after it): parse cannot see the file's line
    ends, the applier can; exit 2 at its line, said as a CR that is the file's last byte, nothing written."""
    mod = "demo_pkg/mod.py"
    body = (f"diff --git a/{mod} b/{mod}\n--- a/{mod}\n+++ b/{mod}\n@@ -10,0 +11 @@\n+inserted\r\n"
            "\\ No newline at end of file\n")
    folder = builder.add_fix("one", {}, {}, diff=body)
    builder.profile(["one"])
    patch = folder / "0001-change.patch"
    line = patch.read_bytes().split(b"\n").index(b"+inserted\r") + 1
    image = builder.tree("clean-lf", {mod: numbered(10)})
    before = snapshot(image)
    r = _cli("lock", "--pack", str(builder.pack), "-p", "p1", "--root", f"demo={image}")
    said = " ".join(r.stderr.split())
    assert r.returncode == 2 and f"{patch}:{line}: the line ends in a CR, the file's last byte, but {mod}" in said, said
    assert snapshot(image) == before and not (builder.pack / "profiles/p1.lock").exists()


def test_a_git_diff_that_empties_a_file_or_fills_an_empty_one_changes_it_in_place(builder):
    """A fresh user: git diff of a file emptied ('@@ -1,2 +0,0 @@' between '--- a/X' and '+++ b/X') was read as
    the file's deletion (unidiff takes a lone hunk to or from nothing for one), and apply removed it (an empty
    package __init__.py gone: a namespace package); of an empty file filled ('@@ -0,0 +1 @@') as its creation, which
    lock refused ('exists already'). git apply and GNU patch change both in place, and so does fixpack now; in git's
    form only /dev/null or a new/deleted file mode says a file comes or goes. Revert puts both back."""
    two, empty = "demo_pkg/two.py", "demo_pkg/empty_init.py"
    body = (f"diff --git a/{two} b/{two}\nindex 208f01a..e69de29 100644\n--- a/{two}\n+++ b/{two}\n"
            f"@@ -1,2 +0,0 @@\n-a\n-b\n"
            f"diff --git a/{empty} b/{empty}\nindex e69de29..7898192 100644\n--- a/{empty}\n+++ b/{empty}\n"
            f"@@ -0,0 +1 @@\n+a\n")
    builder.add_fix("one", {}, {}, diff=body)
    builder.profile(["one"])
    files = {two: "a\nb\n", empty: ""}
    builder.lock(builder.tree("clean", files))
    image = builder.tree("image", files)
    before = snapshot(image)
    assert engine.apply(builder.request(image)).ok
    assert (image / two).read_bytes() == b"" and (image / empty).read_bytes() == b"a\n"
    assert engine.revert(builder.request(image)).ok and snapshot(image) == before


def test_a_new_file_with_mixed_line_ends_is_refused_with_a_hint_that_is_true():
    """Found in a closing note: git diff's own patch of a new file whose lines end in CR LF and LF (``a\\r\\nb\\nc\\r\\n``)
    is refused as a stray CR LF line (kept: one pasted line as much as in a changed file), and the hint said to
    regenerate the patch with git diff, which writes the same lines again. The hint now says to give the file one kind
    of line end, then regenerate the patch."""
    body = ("diff --git a/n.py b/n.py\nnew file mode 100644\nindex 0000000..1fa89d4\n--- /dev/null\n+++ b/n.py\n"
            "@@ -0,0 +1,3 @@\n+a\r\n+b\n+c\r\n")  # (git diff --cached of it, byte for byte)
    with pytest.raises(PatchParseError) as exc:
        parse_patch(body.encode(), "p.patch")
    (problem,) = exc.value.problems
    assert str(exc.value).startswith("p.patch:"), str(exc.value)
    assert problem.hint.startswith("the patch creates n.py with lines that end in CR LF and lines that end in LF: "
                                   "give the file one kind of line end"), problem.hint
    assert "which keeps them" not in str(exc.value), str(exc.value)


def test_trailers_are_read_as_git_reads_them_and_the_author_s_written_back_as_written():
    """`Key:value` and `Key : value` are trailers, as git interpret-trailers reads them (a fresh user: a wrong
    `Fix-Id:other` passed check); the tool's own fields among them are replaced from fix.toml, the author's are
    written back as written: a last paragraph that is a URL reads as a trailer `https`, as git reads it, and must not
    come back as `https: //...`. A trailer written `Key: value` is written so, as before. The same for a commit
    message (an edit's work tree, read by refresh)."""
    from fixpack.patchmail import parse_message, read_mail

    message = "s\n\ndescription\n\nhttps://example.org/x\nAcked-by : A <a@x>\nSigned-off-by:  B <b@x>\nFix-Id:old\n"
    mail = read_mail("From: t <t@invalid>\nSubject: [PATCH] s\n\n" + message.partition("\n\n")[2] + "---\n" + DIFF)
    assert mail.trailers == (("https", "//example.org/x"), ("Acked-by", "A <a@x>"), ("Signed-off-by", "B <b@x>"),
                             ("Fix-Id", "old"))
    said = "s\n\ndescription\n\nhttps://example.org/x\nAcked-by : A <a@x>\nSigned-off-by: B <b@x>\nFix-Id: new\n"
    assert mail.message([("Fix-Id", "new")]) == said
    assert parse_message(message).message([("Fix-Id", "new")]) == said
    assert parse_message(said).message([("Fix-Id", "new")]) == said  # (a fixed point)
