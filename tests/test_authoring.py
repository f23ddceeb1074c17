"""The maintainer's loop on built packs: patch headers kept (email package), edit / new / refresh through a
git work tree, import of format-patch mails, export as a series `git am` takes (same bytes as apply)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, git, numbered, snapshot

from fixpack import engine
from fixpack.editrefresh import refresh_from_work
from fixpack.editwork import abort, start
from fixpack.errors import BadInputError, ConflictError
from fixpack.exchange import export, import_mails
from fixpack.loader import load_pack, load_profile
from fixpack.lockfile import read_lock
from fixpack.pack_tools import stale_patches
from fixpack.patchmail import read_mail
from fixpack.patchtext import normalize_text
from fixpack.progname import program

MOD = "demo_pkg/mod.py"
AUTHOR = "Jürgen Müller-Lüdenscheidt <jm@example.org>"
SUBJECT = ("Guard the decoder against token ids past the vocabulary, which used to end the output handler "
           "and fail every request at once")


def mail_patch(tmp: Path, before: str, after: str, subject: str = SUBJECT, author: str = AUTHOR,
               body: str = "Why it matters, in ä few words.\n\nSigned-off-by: Jürgen <jm@example.org>\n"
                           "Link: https://github.com/vllm-project/vllm/pull/12345\n", options: tuple[str, ...] = ()) -> str:
    """A real `git format-patch` mail (encoded, folded subject; non-ASCII author; index lines; signature);
    ``options``: format-patch's more (``--attach``: a multipart mail)."""
    repo = tmp / f"mail-{len(list(tmp.glob('mail-*')))}"
    (repo / "demo_pkg").mkdir(parents=True)
    (repo / MOD).write_text(before)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    (repo / MOD).write_text(after)
    name, _sp, addr = author.rpartition(" ")
    env = {**os.environ, "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": addr.strip("<>"),
           "GIT_AUTHOR_DATE": "Mon, 2 Jan 2023 10:00:00 +0100"}
    subprocess.run(["git", "commit", "-qam", f"{subject}\n\n{body}"], cwd=repo, check=True, env=env)
    return git(repo, "format-patch", "-1", "--stdout", *options)


@pytest.fixture
def pack3(builder):
    """Three default fixes a, b, c on one file, locked on the clean tree."""
    base = numbered(60)
    a = base.replace("line 10\n", "ten\n")
    b = a.replace("line 30\n", "# a comment\nthirty\n")
    c = b.replace("line 50\n", "fifty\n")
    clean = builder.tree("clean", {MOD: base})
    builder.add_fix("a", {MOD: base}, {MOD: a})
    fb = builder.add_fix("b", {MOD: a}, {MOD: b})
    (fb / "0001-change.patch").write_text(mail_patch(builder.base, a, b))
    builder.add_fix("c", {MOD: b}, {MOD: c})
    builder.profile(["a", "b", "c"])
    for fix in load_pack(builder.pack).fixes.values():  # the patches in their deterministic form
        fix.patches[0].path.write_text(normalize_text(fix, fix.patches[0].path.read_text()))
    builder.lock(clean)
    return builder, clean


def amended(work: Path) -> str:
    """Every change in the work tree ``work``, new files too, into its commit (amended); the commit's short hash."""
    git(work, "add", "-A")
    git(work, "commit", "-q", "--amend", "--no-edit")
    return git(work, "rev-parse", "HEAD").strip()[:12]


def pack_bytes(root: Path) -> dict:
    return {k: v for k, v in snapshot(root).items() if not k.startswith(".edit/")}


def test_a_format_patch_mail_keeps_author_date_subject_and_trailers(tmp_path, builder):
    text = mail_patch(tmp_path, numbered(5), numbered(5).replace("line 2\n", "two\n"))
    assert "=?UTF-8?q?" in text and "\n " in text.split("\n\n")[0]  # git encoded the author and folded the subject
    builder.add_fix("m", {}, {}, diff="diff --git a/x b/x\nold mode 100644\nnew mode 100755\n")  # a placeholder section
    fix = load_pack(builder.pack).fixes["m"]
    once = normalize_text(fix, text)
    mail = read_mail(once)
    assert mail.author == AUTHOR and mail.date == "Mon, 2 Jan 2023 10:00:00 +0100" and mail.subject == SUBJECT
    assert ("Signed-off-by", "Jürgen <jm@example.org>") in mail.trailers
    assert ("Link", "https://github.com/vllm-project/vllm/pull/12345") in mail.trailers
    assert mail.description == "Why it matters, in ä few words."
    assert "\nFrom: =?utf-8?q?J=C3=BCrgen_M=C3=BCller-L=C3=BCdenscheidt?= <jm@example.org>\n" in once
    assert once.split("\n\n")[0].isascii()  # the mail header is 7-bit, as git writes it
    assert "\nindex " not in once and "\n-- \n" not in once and " 1 file changed" not in once
    assert once.splitlines()[0].startswith("From 0000000000000000000000000000000000000000 ")
    assert normalize_text(fix, once) == once  # a fixed point: format --check stays quiet
    assert read_mail(normalize_text(fix, once)).trailers[-1] == ("Fix-Id", "m")


def test_edit_then_refresh_changes_only_the_edited_line(pack3):
    builder, clean = pack3
    before = pack_bytes(builder.pack)
    state = start(builder.pack, "p1", "b", roots={"demo": clean})
    work = Path(state.work)
    log = git(work, "log", "--format=%an <%ae>|%aD|%s", "-2")
    assert log.splitlines()[0] == f"{AUTHOR}|Mon, 2 Jan 2023 10:00:00 +0100|{SUBJECT}"
    assert git(work, "log", "-1", "--format=%B").count("Signed-off-by: Jürgen") == 1
    done = refresh_from_work(builder.pack, "b")
    assert done is not None and not done.outcome.changed and pack_bytes(builder.pack) == before
    (work / MOD).write_text((work / MOD).read_text().replace("# a comment\n", "# a clearer comment\n"))
    git(work, "commit", "-qa", "--amend", "--no-edit")
    done = refresh_from_work(builder.pack, "b")
    assert done is not None and [f.state for f in done.outcome.later] == ["exact"]
    patch = builder.pack / "fixes/b/0001-change.patch"
    old, new = before["fixes/b/0001-change.patch"][0].decode().splitlines(), patch.read_text().splitlines()
    assert [(x, y) for x, y in zip(old, new) if x != y] == [("+# a comment", "+# a clearer comment")]
    assert len(old) == len(new) and done.outcome.written == ["fixes/b/0001-change.patch", "fixes/b/fix.toml",
                                                             "profiles/p1.lock"]
    assert "version = 2\n" in (builder.pack / "fixes/b/fix.toml").read_text()  # the change changed: bumped once
    git(work, "commit", "-q", "--amend", "-m", "Reworded only")  # a refresh again: still v2, the message new
    # the lock fingerprints the change, not its words: a reworded message rewrites the patch, and in the
    # lock only the shortcut to the patch bytes (patch_bytes_sha256), no fingerprint
    locked = read_lock(load_profile(load_pack(builder.pack), "p1"))
    assert refresh_from_work(builder.pack, "b").outcome.written == ["fixes/b/0001-change.patch", "profiles/p1.lock"]
    relocked = read_lock(load_profile(load_pack(builder.pack), "p1"))
    assert relocked.fixes == locked.fixes and relocked.fix("b").patch_bytes_sha256 != locked.fix("b").patch_bytes_sha256
    assert "version = 2\n" in (builder.pack / "fixes/b/fix.toml").read_text()
    engine.check_lock_fresh(builder.request(clean))
    assert stale_patches(load_pack(builder.pack)) == []
    abort(builder.pack)
    assert not (builder.pack / ".edit").exists()


def test_refresh_refuses_uncommitted_edits_and_writes_nothing(pack3):
    builder, clean = pack3
    state = start(builder.pack, "p1", "b", roots={"demo": clean})
    before = pack_bytes(builder.pack)
    (Path(state.work) / MOD).write_text("changed\n")
    with pytest.raises(BadInputError, match="uncommitted edits .*demo_pkg/mod.py.*commit them"):
        refresh_from_work(builder.pack, "b")
    assert pack_bytes(builder.pack) == before


def test_a_later_fix_that_no_longer_applies_is_named_and_nothing_is_written(pack3):
    builder, clean = pack3
    state = start(builder.pack, "p1", "b", roots={"demo": clean})
    work = Path(state.work)
    (work / MOD).write_text((work / MOD).read_text().replace("line 49\n", "forty-nine\n"))
    git(work, "commit", "-qam", "also change line 49 (the context of c)")
    before = pack_bytes(builder.pack)
    with pytest.raises(ConflictError, match=r"later fixes .*nothing was written: c: conflict .*hunk #1 missing"):
        refresh_from_work(builder.pack, "b")
    assert pack_bytes(builder.pack) == before


def test_a_later_fix_that_only_moved_is_regenerated_at_its_new_lines(pack3):
    builder, clean = pack3
    work = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    (work / MOD).write_text((work / MOD).read_text().replace("# a comment\n", "# a comment\n# on two lines\n"))
    git(work, "commit", "-qa", "--amend", "--no-edit")
    c_patch = builder.pack / "fixes/c/0001-change.patch"
    old = c_patch.read_text()
    done = refresh_from_work(builder.pack, "b")
    assert done is not None and [(f.id, f.state) for f in done.outcome.later] == [("c", "moved")]
    assert "regenerated" in done.outcome.later[0].detail and "fixes/c/0001-change.patch" in done.outcome.written
    new = c_patch.read_text()
    changed = [(a, b) for a, b in zip(old.splitlines(), new.splitlines()) if a != b]
    assert changed == [("@@ -48,7 +48,7 @@ line 46", "@@ -49,7 +49,7 @@ line 46")]  # the same change, a line lower
    engine.check_lock_fresh(builder.request(clean))
    assert engine.apply(builder.request(clean, dry_run=True, strict=True)).ok
    # moved: another patch to an image, so the next version (a manifest records a fix by version and change; lock
    # refused the old version with the new patch once the old was committed: a fresh user's finding)
    assert "version = 2\n" in (builder.pack / "fixes/c/fix.toml").read_text()


def test_new_fix_lands_in_series_profile_fix_toml_and_lock(pack3):
    builder, clean = pack3
    state = start(builder.pack, "p1", "n", new=True, target="demo", after="a", roots={"demo": clean})
    work = Path(state.work)
    assert git(work, "log", "-1", "--format=%s").startswith("a")  # on top of a, not of b or c
    for old, new in (("line 20\n", "twenty\n"), ("line 21\n", "twenty-one\n")):
        (work / MOD).write_text((work / MOD).read_text().replace(old, new))
        git(work, "commit", "-qam", f"Change {old.strip()}\n\nBecause it was wrong.")
    done = refresh_from_work(builder.pack, "n")
    assert done is not None and [f.id for f in done.outcome.later] == ["b", "c"]
    pack = load_pack(builder.pack)
    assert pack.series == ("a", "n", "b", "c")
    assert [p.path.name for p in pack.fixes["n"].patches] == ["0001-change-line-20.patch", "0002-change-line-21.patch"]
    assert '"a", "n", "b", "c"' in (builder.pack / "profiles/p1.toml").read_text()
    engine.check_lock_fresh(builder.request(clean))
    assert engine.apply(builder.request(clean, dry_run=True, strict=True)).fix("n").state == "absent"


def test_import_of_a_format_patch_round_trips_through_format(pack3):
    builder, clean = pack3
    base = numbered(60)
    before = base.replace("line 10\n", "ten\n").replace("line 30\n", "# a comment\nthirty\n").replace("line 50\n",
                                                                                                       "fifty\n")
    mail = builder.base / "in.patch"
    mail.write_text(mail_patch(builder.base, before, before.replace("line 55\n", "fifty-five\n")))
    done = import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    assert done.outcome.changed and load_pack(builder.pack).series[-1] == "imp"
    pack = load_pack(builder.pack)
    assert stale_patches(pack) == []
    got = read_mail(pack.fixes["imp"].patches[0].path.read_text())
    assert got.author == AUTHOR and got.subject == SUBJECT and ("Forwarded", "https://github.com/vllm-project/vllm/pull/"
                                                                "12345") in got.trailers
    toml = (builder.pack / "fixes/imp/fix.toml").read_text()
    assert 'status = "submitted"' in toml and 'last_update = "2023-01-02"' in toml
    engine.check_lock_fresh(builder.request(clean))


@pytest.mark.parametrize("how", ["--attach", "--inline"])
def test_import_of_a_multipart_mail_is_the_import_of_its_one_part_form(pack3, tmp_path, how):
    """A carried gap: `git format-patch --attach` (or `--inline`) writes a multipart mail, the patch a part of its own
    after the message's, which git am reads. Import read its diff up to the closing MIME boundary and lost the
    message. It is read as git am reads it: the pack it writes is byte for byte the plain mail's."""
    import shutil

    builder, clean = pack3
    base = numbered(60)
    before = base.replace("line 10\n", "ten\n").replace("line 30\n", "# a comment\nthirty\n").replace("line 50\n",
                                                                                                       "fifty\n")
    after = before.replace("line 55\n", "fifty-five\n")
    plain, parts = tmp_path / "plain.patch", tmp_path / "parts.patch"
    plain.write_text(mail_patch(tmp_path, before, after))
    parts.write_text(mail_patch(tmp_path, before, after, options=(how,)))
    assert "multipart/mixed" in parts.read_text() and "text/x-patch" in parts.read_text()
    other = tmp_path / "other"
    shutil.copytree(builder.pack, other)
    import_mails(builder.pack, plain, "imp", "p1", roots={"demo": clean})
    import_mails(other, parts, "imp", "p1", roots={"demo": clean})
    assert snapshot(other) == snapshot(builder.pack)


def test_export_is_byte_stable_and_git_am_gives_apply_s_bytes(pack3, tmp_path):
    builder, clean = pack3
    out = tmp_path / "series"
    files = export(builder.pack, "p1", (), out)
    first = snapshot(out)
    export(builder.pack, "p1", (), out)
    assert snapshot(out) == first and [p.name for p in files][-1] == "series"
    assert_git_am_equals_apply(clean, out, lambda root: engine.apply(builder.request(root)), tmp_path)


def assert_git_am_equals_apply(clean: Path, series: Path, apply, tmp: Path) -> None:
    """``git am`` of the series onto a copy of the release, and ``apply`` onto another: the same files."""
    import shutil

    am, applied = tmp / "am", tmp / "applied"
    shutil.copytree(clean, am, ignore=shutil.ignore_patterns(".fixpack-complete"))
    shutil.copytree(clean, applied, ignore=shutil.ignore_patterns(".fixpack-complete"))
    git(am, "init", "-q")
    git(am, "add", "-A")
    git(am, "commit", "-qm", "the clean release")
    names = (series / "series").read_text().split()
    git(am, "am", "-q", *[str(series / n) for n in names])
    assert apply(applied).ok
    got = {k: v for k, v in snapshot(am).items()}
    want = {k: v for k, v in snapshot(applied).items() if not k.startswith(".fixpack/")}
    assert got == want


def test_cli_refresh_without_a_work_tree_says_unchanged(pack3):
    builder, clean = pack3
    args = [sys.executable, "-m", "fixpack.cli", "refresh", "--pack", str(builder.pack), "--profile", "p1",
            "--root", f"demo={clean}", "b"]
    r = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0 and r.stdout.startswith("unchanged"), r.stdout + r.stderr


def killed_refresh(builder, clean) -> None:
    """Amend fix b's comment in its work tree, then kill ``refresh b`` after the first file it writes."""
    work = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    (work / MOD).write_text((work / MOD).read_text().replace("# a comment\n", "# a clearer comment\n"))
    git(work, "commit", "-qa", "--amend", "--no-edit")
    before = pack_bytes(builder.pack)
    env = {**os.environ, "FIXPACK_FAULT_AT": "3", "PYTHONPATH": str(REPO)}  # killed after the first file written
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "refresh", "b", "--pack", str(builder.pack)],
                       capture_output=True, text=True, cwd=REPO, env=env)
    assert r.returncode == 137 and (builder.pack / ".fixpack/journal.json").is_file(), r.stderr
    assert pack_bytes(builder.pack) != before  # half written


def test_a_refresh_killed_while_writing_is_rolled_back_by_the_next(pack3):
    builder, clean = pack3
    killed_refresh(builder, clean)
    done = refresh_from_work(builder.pack, "b")  # rolls the journal back first, then writes it all
    assert done is not None and done.outcome.written == ["fixes/b/0001-change.patch", "fixes/b/fix.toml",
                                                         "profiles/p1.lock"]
    assert not (builder.pack / ".fixpack").exists() and "+# a clearer comment" in \
        (builder.pack / "fixes/b/0001-change.patch").read_text()
    engine.check_lock_fresh(builder.request(clean))


def test_bad_input_is_exit_2_with_what_to_do_and_nothing_written(pack3, tmp_path):
    builder, clean = pack3
    before = snapshot(builder.pack)
    (tmp_path / "not-a-mail.txt").write_text("just words\n")
    (tmp_path / "bad.patch").write_text(mail_patch(tmp_path, numbered(5), "x\n").replace("@@ -1,5 +1 @@", "@@ -1,5"))
    cases = [
        # the commands a message names are this program's, as run here (not a bare `fixpack` off PATH)
        # (and the pack in use, --pack, when it is not the one the command would find by itself)
        (["edit", "nosuch", "-p", "p1"], f"nosuch is not a fix of profile p1 (a, b, c); `{program()} new nosuch "
                                         f"--profile p1 --pack {builder.pack} --target T` starts a new one"),
        (["new", "a", "-p", "p1", "--target", "demo"], f"fix a exists already (fixes/a): `{program()} edit a "
                                                       f"--profile p1 --pack {builder.pack}` changes it"),
        (["edit", "--abort"], "no edit in progress"),
        (["refresh", "b"], f"no work tree of it (`{program()} edit b --pack {builder.pack} --profile P` makes one)"),
        (["import", str(tmp_path / "not-a-mail.txt"), "--as", "x", "-p", "p1"], "no patch mail in it"),
        (["import", str(tmp_path / "bad.patch"), "--as", "x", "-p", "p1"], "bad.patch (mail at line 1):"),
        (["export", "-p", "p1", "nosuch", "--out", str(tmp_path / "s")], "not an opt-in fix of profile p1: nosuch"),
    ]
    for args, says in cases:
        r = subprocess.run([sys.executable, "-m", "fixpack.cli", *args, "--pack", str(builder.pack)],
                           capture_output=True, text=True, cwd=REPO)
        assert r.returncode == 2 and says in r.stderr, (args, r.stderr)
    assert snapshot(builder.pack) == before


def test_an_import_error_is_said_once(pack3, tmp_path):
    """Found by a user: a malformed mail's error was printed twice, as the message and again as a "  - " line
    under it (the form a pack's load lists its problems in). It is said once, with what to do, in plain and in
    --json output alike; exit 2, nothing written."""
    builder, _clean = pack3
    before = snapshot(builder.pack)
    mail = mail_patch(tmp_path, numbered(5), "x\n")
    (tmp_path / "hunk.patch").write_text(mail.replace("@@ -1,5 +1 @@", "@@ -1,5"))
    (tmp_path / "nul.patch").write_text(mail.replace("+x\n", "+x\0\n"))
    for name, says in (("hunk.patch", "malformed hunk header '@@ -1,5'"), ("nul.patch", "a NUL byte at byte offset")):
        for json_out in (False, True):
            r = subprocess.run([sys.executable, "-m", "fixpack.cli", "import", str(tmp_path / name), "--as", "x",
                                "-p", "p1", "--pack", str(builder.pack), *(["--json"] if json_out else [])],
                               capture_output=True, text=True, cwd=REPO)
            said = json.loads(r.stdout)["error"] if json_out else r.stderr
            assert r.returncode == 2 and said.count(says) == 1 and "\n  - " not in said, (name, said)
            assert said.count("(regenerate the patch with git diff / format-patch)") == 1, (name, said)
    assert snapshot(builder.pack) == before


def test_an_import_diff_error_names_the_line_of_the_file(pack3, tmp_path):
    """Found by a helper: a malformed diff in a mail was said at a line of the patch file import makes of it (its
    header the pack's, so other lines), not of the user's file, and in the second mail of an mbox the number read
    like the file's but counted from the mail. The number after the colon is now the file's line of the bad diff
    line, in the first mail and in a later one, and so is every number in the message (a hunk's line, a NUL byte's
    offset: a fresh user found them counted from the diff; exit 2, nothing written)."""
    builder, _clean = pack3
    before = snapshot(builder.pack)
    first = mail_patch(tmp_path, numbered(5), "x\n")
    second = mail_patch(tmp_path, numbered(6), numbered(6).replace("line 3\n", "three\n"), subject="Fix three")
    bad = "@@ -1,6 +1,6 @@"
    assert bad in second and "@@ -1,5 +1 @@" in first
    cases = [("one.patch", first.replace("@@ -1,5 +1 @@", "@@ -1,5"), 1, first.split("@@ -1,5 +1 @@")[0]),
             ("two.mbox", first + second.replace(bad, "@@ -1,6"), first.count("\n") + 1,
              first + second.split(bad)[0])]
    for name, text, mail_line, head in cases:
        (tmp_path / name).write_text(text)
        line = head.count("\n") + 1
        assert text.split("\n")[line - 1].startswith("@@ -1,") and "+" not in text.split("\n")[line - 1]
        r = subprocess.run([sys.executable, "-m", "fixpack.cli", "import", str(tmp_path / name), "--as", "x",
                            "-p", "p1", "--pack", str(builder.pack)], capture_output=True, text=True, cwd=REPO)
        assert r.returncode == 2 and f"{tmp_path / name} (mail at line {mail_line}):{line}: malformed hunk " \
            f"header" in r.stderr, (name, line, r.stderr)
    # every number in the message is the file's: a line inside a hunk, the hunk's own line, a NUL byte's offset
    hunk = first.count("\n") + second.split(bad)[0].count("\n") + 1
    odd = second.replace(" line 4\n", "line 4\n", 1)
    nul = second.replace("+three\n", "+thr\0ee\n")
    nul_at = (first + nul).encode().index(b"\0")
    odd_at = (first + odd).split("\n").index("line 4") + 1  # the line without its prefix
    for name, text, says in (
            ("prefix.mbox", first + odd, f":{odd_at}: line {odd_at} has no ' ', '+' or '-' prefix (inside the "
                                         f"hunk that starts at line {hunk}"),
            ("nul.mbox", first + nul, f"(a NUL byte at byte offset {nul_at})")):
        assert text.split("\n")[hunk - 1] == bad
        (tmp_path / name).write_bytes(text.encode())
        r = subprocess.run([sys.executable, "-m", "fixpack.cli", "import", str(tmp_path / name), "--as", "x",
                            "-p", "p1", "--pack", str(builder.pack)], capture_output=True, text=True, cwd=REPO)
        assert r.returncode == 2 and f"{tmp_path / name} (mail at line {first.count(chr(10)) + 1}):" in r.stderr \
            and says in r.stderr, (name, says, r.stderr)
    # a UTF-8 byte order mark before the first mail (found by a fresh user: it hid the first mail's From line, and
    # that mail was dropped without a word): both mails are read, and a NUL byte in the first is named at its offset
    from fixpack.exchange import mails

    bom = "\ufeff".encode()
    two = mails(bom + (first + second).encode(), "bom.mbox")
    assert [line for line, _text in two] == [1, first.count("\n") + 1] and two[0][1] == first, two
    planted = bom + first.replace("+x\n", "+x\0\n").encode() + second.encode()
    (tmp_path / "bom.mbox").write_bytes(planted)
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "import", str(tmp_path / "bom.mbox"), "--as", "x",
                        "-p", "p1", "--pack", str(builder.pack)], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and "bom.mbox (mail at line 1):" in r.stderr and \
        f"(a NUL byte at byte offset {planted.index(bytes(1))})" in r.stderr, r.stderr
    assert snapshot(builder.pack) == before


def test_import_reads_a_regular_mail_file_under_its_cap_only(pack3, tmp_path):
    """Found by a fresh user: import read its file whole, unchecked: /dev/zero was OOM-killed at 23.8 GB, a
    70 MB sparse file was read whole, a FIFO hung for ever. Each is refused unread now (exit 2, the file named,
    its size and the cap for one too large), and the pack left as it was."""
    from fixpack.exchange import MAX_MAIL_BYTES

    builder, _clean = pack3
    before = snapshot(builder.pack)
    sparse = tmp_path / "huge.mbox"
    sparse.write_bytes(b"")
    os.truncate(sparse, 70 << 20)
    fifo = tmp_path / "pipe.mbox"
    os.mkfifo(fifo)
    cases = [(sparse, f"{sparse}: {70 << 20} bytes, more than the {MAX_MAIL_BYTES >> 20} MiB a mail file may have"),
             (fifo, f"{fifo}: is a FIFO (named pipe), not a regular file"),
             (Path("/dev/zero"), "/dev/zero: is a character device, not a regular file"),
             (tmp_path / "missing.patch", "missing.patch: cannot read: No such file or directory")]
    for path, says in cases:
        r = subprocess.run([sys.executable, "-m", "fixpack.cli", "import", str(path), "--as", "x", "-p", "p1",
                            "--pack", str(builder.pack)], capture_output=True, text=True, cwd=REPO, timeout=60)
        assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, (path, r.stderr)
    assert snapshot(builder.pack) == before


def test_refresh_of_a_misspelt_fix_names_the_close_ones(pack3):
    """Found by a fresh user: `refresh ren-fx` (for ren-fix) said only "unknown fix 'ren-fx'", where other commands
    name the close matches. It names them too, as the loader's messages do (or says there is none)."""
    builder, _clean = pack3
    before = snapshot(builder.pack)
    for name, close in (("bb", "close matches: b"), ("zzz", "no close match")):
        r = subprocess.run([sys.executable, "-m", "fixpack.cli", "refresh", name, "--pack", str(builder.pack)],
                           capture_output=True, text=True, cwd=REPO)
        assert r.returncode == 2, r
        assert f"unknown fix {name!r} in the pack at {builder.pack} ({close})" in r.stderr, r.stderr
    assert snapshot(builder.pack) == before


def test_names_that_cannot_be_a_fix_are_refused_as_names(pack3, tmp_path):
    """Found by a fresh user: a 300-character id was `internal error: OSError(36, 'File name too long')` (exit 1);
    `new series` said it exists (`edit series` changes it) and `edit series` said it is no fix (`new series`
    makes one): a loop, as for apply_all.py and for a fix of the pack that the profile does not list."""
    builder, _clean = pack3
    builder.profile(["a", "b"], name="p2")
    (builder.pack / "fixes/apply_all.py").write_text("")
    before = snapshot(builder.pack)
    (tmp_path / "m.patch").write_text(mail_patch(tmp_path, numbered(5), numbered(5).replace("line 2\n", "two\n")))
    long = "x" * 300
    too_long = f"bad fix id {long!r}: 300 characters, more than the 100 a name may have"
    cases = [
        (["new", long, "-p", "p1", "--target", "demo"], too_long),
        (["edit", long, "-p", "p1"], too_long),
        (["import", str(tmp_path / "m.patch"), "--as", long, "-p", "p1"], too_long),
    ]
    for name in ("series", "apply_all.py"):
        says = f"{name!r} cannot name a fix: fixes/{name} is the pack's own file, not a fix; pick another id"
        cases += [(["new", name, "-p", "p1", "--target", "demo"], says), (["edit", name, "-p", "p1"], says),
                  (["import", str(tmp_path / "m.patch"), "--as", name, "-p", "p1"], says)]
    cases.append((["edit", "c", "-p", "p2"], "fix c is in the pack but not in profile p2: list it in profiles/p2.toml"))
    for args, says in cases:
        r = subprocess.run([sys.executable, "-m", "fixpack.cli", *args, "--pack", str(builder.pack)],
                           capture_output=True, text=True, cwd=REPO)
        assert r.returncode == 2 and says in r.stderr, (args[:2], r.stderr)
    assert snapshot(builder.pack) == before


@pytest.mark.parametrize("new", [False, True])
def test_edit_and_new_wait_for_a_command_writing_the_pack(pack3, monkeypatch, new):
    """`edit` and `new` read the pack under its lock (a refresh or import beside them could change the
    patches they lay into the work tree): while another command holds it they wait, then exit 5 having
    made nothing; once it is free they run."""
    import fcntl

    from fixpack import runlock
    from fixpack.errors import BusyError

    builder, clean = pack3
    monkeypatch.setattr(runlock, "PACK_WAIT", 0.2)
    kw = {"new": True, "target": "demo"} if new else {}
    fix_id = "d" if new else "b"
    holder = os.open(builder.pack, os.O_RDONLY | os.O_DIRECTORY)  # what a refresh holds while it works
    fcntl.flock(holder, fcntl.LOCK_EX)
    before = pack_bytes(builder.pack)
    try:
        with pytest.raises(BusyError, match="another fixpack run holds the lock on"):
            start(builder.pack, "p1", fix_id, roots={"demo": clean}, **kw)
    finally:
        os.close(holder)
    assert pack_bytes(builder.pack) == before and not (builder.pack / ".edit").exists()
    assert Path(start(builder.pack, "p1", fix_id, roots={"demo": clean}, **kw).work).is_dir()


def test_an_edit_rolls_back_a_refresh_killed_while_writing_before_it_reads_the_pack(pack3):
    builder, clean = pack3
    before = pack_bytes(builder.pack)
    killed_refresh(builder, clean)
    work = Path(start(builder.pack, "p1", "c", roots={"demo": clean}).work)
    assert not (builder.pack / ".fixpack").exists() and pack_bytes(builder.pack) == before
    assert "# a clearer comment" not in (work / MOD).read_text()  # fix b laid as the pack has it, not half written


@pytest.mark.parametrize("command", ["edit", "refresh"])
def test_the_command_that_rolls_a_killed_refresh_back_says_so(pack3, command):
    """Noticed in a review: edit and new rolled a half-written pack back without a word (so did refresh and
    import), and the user saw their pack change under a command that was to read it. The command says what it
    rolled back (the refresh of b, the files put back) on stderr, and does its own work after."""
    builder, clean = pack3
    killed_refresh(builder, clean)
    args = [sys.executable, "-m", "fixpack.cli", *(["edit", "c", "--profile", "p1", "--root", f"demo={clean}"]
                                                   if command == "edit" else ["refresh", "b"]), "--pack",
            str(builder.pack)]
    r = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if "rolled back" in line]
    assert len(said) == 1 and "the refresh of b a killed run left half written" in said[0], r.stderr
    assert "file(s) its journal names are as they were before it" in said[0] and not (builder.pack / ".fixpack").exists()


@pytest.mark.parametrize("edit", ["in progress", "dropped by hand"])
def test_edit_abort_says_its_rollback_and_its_json_follows_the_schema(pack3, edit):
    """A fresh user: `edit --abort b --json` after a killed refresh said "rolled_back": false (it had rolled back,
    and removed the edit), and with no edit open "removed": null, which schemas/edit.schema.json refuses; nor did it
    say the rollback on stderr as edit, new, refresh and import do. Now: rolled_back true in both, removed only where
    a work tree was removed, the document valid, the rollback said once on stderr."""
    import jsonschema

    builder, clean = pack3
    killed_refresh(builder, clean)
    if edit == "dropped by hand":
        shutil.rmtree(builder.pack / ".edit")
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "edit", "--abort", "b", "--pack", str(builder.pack),
                        "--json"], capture_output=True, text=True, cwd=REPO)
    doc = json.loads(r.stdout)
    jsonschema.Draft202012Validator(json.loads((REPO / "schemas/edit.schema.json").read_text())).validate(doc)
    assert r.returncode == 0 and doc["ok"] and doc["rolled_back"] is True, doc
    assert ("removed" in doc) == (edit == "in progress") and not (builder.pack / ".fixpack").exists(), doc
    said = [line for line in r.stderr.splitlines() if "rolled back" in line]
    assert len(said) == 1 and "rolled back the refresh of b a killed run left half written" in said[0], r.stderr


def test_edit_abort_after_a_refresh_killed_outside_its_writes_says_no_rollback(pack3):
    """A second fresh user: a refresh killed before its journal was written (FIXPACK_FAULT_AT=1: its backups alone
    are left, the pack whole) made `edit --abort b --json` say "rolled_back": true and "the pack update a killed run
    left was rolled back first", with nothing rolled back; and backups alone with no edit open exited 0 saying it
    rolled back. Now: rolled_back false, no such words, and with no edit open "no edit in progress" (exit 2)."""
    builder, clean = pack3
    work = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    (work / MOD).write_text((work / MOD).read_text().replace("# a comment\n", "# a clearer comment\n"))
    git(work, "commit", "-qa", "--amend", "--no-edit")
    def files():  # the pack's files, its .fixpack/ leftovers aside
        return {k: v for k, v in pack_bytes(builder.pack).items() if not k.startswith(".fixpack/")}

    before = files()
    cli = [sys.executable, "-m", "fixpack.cli"]
    env = {**os.environ, "FIXPACK_FAULT_AT": "1", "PYTHONPATH": str(REPO)}
    r = subprocess.run([*cli, "refresh", "b", "--pack", str(builder.pack)], capture_output=True, text=True, cwd=REPO,
                       env=env)
    assert r.returncode == 137 and not (builder.pack / ".fixpack/journal.json").exists(), r.stderr
    assert (builder.pack / ".fixpack").exists() and files() == before  # leftovers, the pack whole
    r = subprocess.run([*cli, "edit", "--abort", "b", "--pack", str(builder.pack), "--json"], capture_output=True,
                       text=True, cwd=REPO)
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["rolled_back"] is False and doc["removed"].endswith(".edit/b"), doc
    assert "rolled back" not in r.stderr and files() == before, r.stderr
    assert not (builder.pack / ".fixpack").exists()  # the leftovers discarded
    (builder.pack / ".fixpack/journal").mkdir(parents=True)  # backups alone, no edit open
    (builder.pack / ".fixpack/journal/0").write_text("a backup\n")
    r = subprocess.run([*cli, "edit", "--abort", "--pack", str(builder.pack)], capture_output=True, text=True,
                       cwd=REPO)
    assert r.returncode == 2 and "no edit in progress" in r.stderr and "rolled back" not in r.stdout + r.stderr, \
        r.stdout + r.stderr


def test_edit_s_suggested_commands_are_this_program_s_with_the_pack_in_use(pack3, tmp_path):
    """Found by a fresh user: `edit` said "then: fixpack refresh FIX" and a second edit "(fixpack refresh FIX)
    or drop it (fixpack edit --abort FIX)", a `fixpack` that is not on PATH in the README's set-up; and
    `import ... --as FIX --pack P` said `... edit FIX --profile V` without --pack, which would edit the
    checkout's pack instead. Each now names the program as it runs here, with --pack when it is not the
    pack the command finds without it."""
    builder, clean = pack3
    pack = builder.pack

    def cli(*args, cwd=REPO):
        return subprocess.run([sys.executable, "-m", "fixpack.cli", *args], capture_output=True, text=True,
                              cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO)})

    r = cli("edit", "b", "-p", "p1", "--root", f"demo={clean}", "--pack", str(pack))
    assert r.returncode == 0 and f"then: {program()} refresh b --pack {pack}\n" in r.stderr, r.stderr
    before = snapshot(pack)
    r = cli("edit", "b", "-p", "p1", "--root", f"demo={clean}", "--pack", str(pack))
    assert r.returncode == 2 and (f"refresh it (`{program()} refresh b --pack {pack}`) or drop it "
                                  f"(`{program()} edit --abort b --pack {pack}`)") in r.stderr, r.stderr
    assert snapshot(pack) == before
    (tmp_path / "m.patch").write_text(mail_patch(tmp_path, numbered(5), numbered(5).replace("line 2\n", "two\n")))
    r = cli("import", str(tmp_path / "m.patch"), "--as", "a", "-p", "p1", "--pack", str(pack))
    assert r.returncode == 2 and f"`{program()} edit a --profile p1 --pack {pack}` changes it" in r.stderr, r.stderr
    r = cli("import", str(tmp_path / "m.patch"), "--as", "a", "-p", "p1", cwd=pack)  # the pack it finds: no --pack
    assert r.returncode == 2 and f"`{program()} edit a --profile p1` changes it" in r.stderr, r.stderr
    assert snapshot(pack) == before


def test_import_of_a_mail_whose_description_holds_a_byte_that_is_not_utf_8_names_the_mail_and_its_line(pack3,
                                                                                                      tmp_path):
    """Found by a fresh user: a mail that declares no charset, with a byte that is not UTF-8 in its description,
    was imported with U+FFFD in its place. It is bad input, as the README says (exit 2, the file, the mail and the
    line named, as for such a byte in an added line; nothing written); a mail that declares its charset is read
    in it."""
    builder, clean = pack3
    a = numbered(60).replace("line 10\n", "ten\n")
    text = mail_patch(tmp_path, a, a.replace("line 40\n", "forty\n"), subject="Fix forty", author="A <a@b.c>",
                      body="Why it m@tters.\n")
    assert "charset" not in text.lower()
    mail = tmp_path / "two.mbox"  # a first mail that is fine, then the one with the byte
    b = a.replace("line 40\n", "forty\n")
    second = mail_patch(tmp_path, b, b.replace("line 45\n", "forty-five\n"), subject="Fix 45", author="A <a@b.c>",
                        body="Why it m@tters.\n")
    mail.write_bytes(text.encode() + second.encode().replace(b"m@tters", b"m\xe9tters"))
    line = text.count("\n") + 1 + second.split("Why it")[0].count("\n")
    before = snapshot(builder.pack)
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "import", str(mail), "--as", "x", "-p", "p1",
                        "--root", f"demo={clean}", "--pack", str(builder.pack)], capture_output=True, text=True,
                       cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 2 and r.stderr.count(
        f"{mail} (mail at line {text.count(chr(10)) + 1}):{line}: the patch's message (its mail header or "
        f"description, before the diff) holds bytes that are not UTF-8 (byte 9 of the line) (write the message "
        f"as UTF-8") == 1, r.stderr
    assert snapshot(builder.pack) == before
    latin = tmp_path / "latin.patch"
    latin.write_bytes(text.replace("Subject: [PATCH] Fix forty\n", "Subject: [PATCH] Fix forty\nMIME-Version: 1.0\n"
                                   "Content-Type: text/plain; charset=ISO-8859-1\n").encode()
                      .replace(b"m@tters", b"m\xe9tters"))
    import_mails(builder.pack, latin, "x", "p1", roots={"demo": clean})
    assert "Why it métters." in next((builder.pack / "fixes/x").glob("*.patch")).read_text()


def test_a_damaged_pack_journal_s_steps_put_the_pack_back_a_staged_edit_too(pack3):
    """A refresh killed while writing, its journal then damaged: refused (exit 3) with steps that, run as printed,
    put fixes/ and profiles/ back to the commit, an edit staged there too (the step said `git checkout -- fixes
    profiles`, which puts back the index's copy, so the staged edit stayed) and a file the killed run made (it has
    `git clean` now), and remove the journal; then the refresh runs."""
    from test_rebase import commit_pack, pack_files
    builder, clean = pack3
    commit_pack(builder)
    committed = pack_files(builder)
    killed_refresh(builder, clean)
    staged = builder.pack / "fixes/a/fix.toml"
    staged.write_text(staged.read_text() + "# staged\n")
    git(builder.pack, "add", "fixes/a/fix.toml")
    (builder.pack / "fixes/b/0002-half.patch").write_text("a file the killed run made\n")  # untracked: git clean
    (builder.pack / ".fixpack/journal.json").write_text("{")
    args = [sys.executable, "-m", "fixpack.cli", "refresh", "b", "--pack", str(builder.pack)]
    r = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
    said = " ".join(r.stderr.split())
    assert r.returncode == 3 and "In this order: 1. put the pack's files back from git: " in said, r.stderr
    one = said.split("from git: ", 1)[1].split(" (this drops", 1)[0]
    two = said.split("; 2. ", 1)[1].split(": ", 1)[1].split("; 3. ", 1)[0]
    for step in (one, two):
        done = subprocess.run(step, shell=True, capture_output=True, text=True, cwd=builder.base)
        assert done.returncode == 0, (step, done.stderr)
    assert pack_files(builder) == committed and not (builder.pack / ".fixpack").exists()
    again = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize("fault_at", range(1, 7))
def test_a_refresh_of_a_new_fix_killed_while_writing_is_rolled_back_by_the_next(pack3, fault_at):
    """A new fix's refresh killed at each write: the next refresh read the pack before rolling the journal back,
    and a series line written without the fix's fix.toml (or its folder without it) was refused as a pack error,
    with no word of the journal. The next refresh now rolls back first, then writes it all."""
    builder, clean = pack3
    work = Path(start(builder.pack, "p1", "n", new=True, target="demo", after="a", roots={"demo": clean}).work)
    (work / MOD).write_text((work / MOD).read_text().replace("line 20\n", "twenty\n"))
    git(work, "commit", "-qam", "Change line 20\n\nBecause it was wrong.")
    args = [sys.executable, "-m", "fixpack.cli", "refresh", "n", "--pack", str(builder.pack)]
    env = {**os.environ, "FIXPACK_FAULT_AT": str(fault_at), "PYTHONPATH": str(REPO)}
    killed = subprocess.run(args, capture_output=True, text=True, cwd=REPO, env=env)
    if killed.returncode != 137:
        pytest.skip(f"fewer than {fault_at} write points (exit {killed.returncode})")
    again = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
    assert again.returncode == 0, again.stderr
    assert load_pack(builder.pack).series == ("a", "n", "b", "c") and not (builder.pack / ".fixpack").exists()
    engine.check_lock_fresh(builder.request(clean))


@pytest.mark.parametrize("edit", ["in progress", "dropped by hand"])
def test_commands_on_a_half_written_pack_say_so_and_the_way_back_runs(pack3, edit):
    """A refresh killed while writing the pack: status, apply, revert, lock, format, export and refresh on a release
    copy read the half-written pack and failed with a pack error (a fix missing from the series, a stale lock whose `lock` command then wrote
    into it), or exported it, without a word of the journal. Each is refused now (exit 3, nothing written) with the
    way back: with the edit in progress, its refresh again (`edit --abort`, said before, also dropped the edit's
    work tree); with none, `edit --abort`, which rolls back and exits 0 (it said "no edit in progress", exit 2,
    having rolled back). Run as printed, it leads back, and status works."""
    builder, clean = pack3
    before = pack_bytes(builder.pack)
    killed_refresh(builder, clean)
    if edit == "dropped by hand":
        shutil.rmtree(builder.pack / ".edit")
    half = pack_bytes(builder.pack)
    tree = snapshot(clean)
    roots = ["-p", "p1", "--root", f"demo={clean}"]
    for words in (["status", *roots], ["apply", *roots], ["apply", "--dry-run", *roots], ["lock", *roots],
                  ["revert", *roots], ["format"], ["format", "--check"], ["export", "-p", "p1", "--out",
                                                                          str(builder.base / "out")],
                  ["refresh", "c", *roots]):  # the quilt-like refresh on a clean copy: on the half-written chain
        r = subprocess.run([sys.executable, "-m", "fixpack.cli", *words, "--pack", str(builder.pack)],
                           capture_output=True, text=True, cwd=REPO)
        said = " ".join(r.stderr.split())
        assert r.returncode == 3 and f"the state in {builder.pack / '.fixpack'} is damaged: a refresh or import " \
            "was killed while writing the pack, which may be half written" in said, (words, r.stderr)
        assert pack_bytes(builder.pack) == half and snapshot(clean) == tree and not (builder.base / "out").exists()
    if edit == "in progress":  # the journal names fixes/b/: b's refresh
        assert "(edit --abort would also drop the edit's work tree)" in said, said
        way = said.split("which rolls its write back first and then writes it all: ", 1)[1].split(" (edit --abort", 1)[0]
        assert way.endswith(f" refresh b --pack {builder.pack}"), way
    else:  # the journal says a refresh of b; its edit is gone: edit --abort b only rolls back
        way = said.split("roll back the killed refresh of b: ", 1)[1].split(" (no edit of b is open", 1)[0]
    done = subprocess.run(way, shell=True, capture_output=True, text=True, cwd=builder.base)
    assert done.returncode == 0, (way, done.stdout, done.stderr)
    assert not (builder.pack / ".fixpack").exists() and engine.status(builder.request(clean)).ok
    if edit == "dropped by hand":
        assert "rolled back the pack update a killed run left (no edit of b in progress)" in done.stdout
        assert pack_bytes(builder.pack) == before
    else:
        assert "+# a clearer comment" in (builder.pack / "fixes/b/0001-change.patch").read_text()


def test_a_damaged_journal_of_a_pack_without_git_names_no_git_command(pack3):
    """A pack that is no git checkout (a copy): step 1 was `git -C PACK checkout ...`, which fails there; it says
    to put fixes/ and profiles/ back from the copy the user keeps."""
    builder, clean = pack3
    killed_refresh(builder, clean)
    (builder.pack / ".fixpack/journal.json").write_text("{")
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "refresh", "b", "--pack", str(builder.pack)],
                       capture_output=True, text=True, cwd=REPO)
    said = " ".join(r.stderr.split())
    assert r.returncode == 3 and "1. put fixes/ and profiles/ back from the copy of the pack you keep" in said, said
    assert "git -C" not in said, said


PLANTED_PACK = {  # what a planted pack journal asked a rollback to do, and what it is refused as
    "a git hook": ({"path": ".git/hooks/pre-commit", "mode": 0o755}, None,
                   ".git/hooks/pre-commit is no file a refresh or import writes in the pack"),
    "the in-image script": ({"path": "fixes/apply_all.py", "mode": 0o644}, None,
                            "fixes/apply_all.py is no file a refresh or import writes in the pack"),
    "a proof": ({"path": "fixes/b/test_b.py", "mode": 0o644}, None,
                "fixes/b/test_b.py is no file a refresh or import writes in the pack"),
    "an executable patch": ({"path": "fixes/b/0001-change.patch", "mode": 0o755}, None,
                            "mode 755 of fixes/b/0001-change.patch has bits (7111) a pack file never has"),
    "a set-id patch": ({"path": "fixes/b/0001-change.patch", "mode": 0o6644}, None, "has bits (7111)"),
    "the series deleted": ({"path": "fixes/series", "existed": False, "mode": None, "sha256": None}, None,
                           "it says fixes/series did not exist before the run"),
    "a committed patch said to be new, other bytes": ({"path": "fixes/b/0001-change.patch", "existed": False,
                                                       "mode": None, "sha256": "ab" * 32}, None,
                                                      "but fixes/b/0001-change.patch holds other bytes now"),
    "a folder opened to all": ({"path": "fixes/b/0001-change.patch", "mode": 0o644},
                               {"fixes/b": {"mode": 0o777, "owner": None}},
                               "'removed_dirs': fixes/b: a refresh or import empties no folder of the pack"),
    "a folder given to another user": ({"path": "profiles/p1.lock", "mode": 0o644},
                                       {"profiles": {"mode": 0o755, "owner": [4242, 4242]}},
                                       "'removed_dirs': profiles: a refresh or import empties no folder of the pack"),
}


@pytest.mark.parametrize("case", sorted(PLANTED_PACK))
def test_a_planted_pack_journal_writes_nothing_a_pack_update_would_not(pack3, case):
    """A pack journal is untrusted: one naming .git/hooks/pre-commit (a backup with mode 755 beside it) was rolled
    back by the next refresh, import or edit --abort, which wrote the hook git then ran; then fixes/apply_all.py (the
    script an image runs), a proof, a mode with execute or set-id bits, a deleted series, a folder opened to all.
    Each is damaged state now (exit 3; check exit 2), refused by every command that reads or rolls back a pack, and
    nothing is written, .git included."""
    import hashlib
    builder, clean = pack3
    from test_rebase import commit_pack
    commit_pack(builder)
    entry, removed, says = PLANTED_PACK[case]
    state = builder.pack / ".fixpack"
    (state / "journal").mkdir(parents=True)
    payload = b"#!/bin/sh\ntouch pwned\n"
    if entry.get("existed", True):
        (state / "journal/0").write_bytes(payload)
        os.chmod(state / "journal/0", entry["mode"] & 0o777)
    entry = {"existed": True, "backup": 0, "sha256": hashlib.sha256(payload).hexdigest(), **entry}
    (state / "journal.json").write_text(json.dumps({"dirs": [], "entries": [entry],
                                                    **({"removed_dirs": removed} if removed else {})}))
    before = snapshot(builder.pack)
    for words in (["edit", "--abort"], ["refresh", "b"], ["status", "-p", "p1", "--root", f"demo={clean}"],
                  ["check"]):
        r = subprocess.run([sys.executable, "-m", "fixpack.cli", *words, "--pack", str(builder.pack)],
                           capture_output=True, text=True, cwd=REPO)
        out = " ".join((r.stdout + r.stderr).split())
        assert r.returncode in (2, 3) and says in out, (words, out)
        assert snapshot(builder.pack) == before and not (builder.pack / ".git/hooks/pre-commit").exists()


def test_leftovers_alone_refuse_nothing_and_an_unreadable_journal_gives_steps(pack3):
    """Backups or a half-written journal temp file with no journal.json: a run killed before its journal was
    written or once it was done, the pack whole; read as a half-written pack, every command was refused with a way
    back that could not be true. Now nothing refuses, and the next refresh clears them. A journal.json that is a
    folder was "damaged: it is not a regular file; remove it or restore the image" (removing it alone leaves the
    pack half written; a pack is no image): it gives the numbered steps now."""
    builder, clean = pack3
    from test_rebase import commit_pack
    commit_pack(builder)
    state = builder.pack / ".fixpack"
    (state / "journal").mkdir(parents=True)
    (state / "journal/0").write_text("a backup\n")
    (state / ".journal.json.fixpack-tmp").write_text("{")
    assert engine.status(builder.request(clean)).ok
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "check", "--pack", str(builder.pack)],
                       capture_output=True, text=True, cwd=REPO)
    assert ".fixpack" not in r.stdout and "killed" not in r.stdout, r.stdout  # (the fixes' missing proofs only)
    (state / "journal.json").mkdir()
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "status", "-p", "p1", "--root", f"demo={clean}",
                        "--pack", str(builder.pack)], capture_output=True, text=True, cwd=REPO)
    said = " ".join(r.stderr.split())
    assert r.returncode == 3 and "In this order: 1. put the pack's files back from git: " in said, said
    assert "restore the image" not in said, said


def test_a_killed_import_beside_an_edit_names_no_refresh_of_that_edit(pack3, tmp_path):
    """An import (after a: b and c move, their patches rewritten) killed while writing, with an edit of b open: the
    way back said to run `refresh b` (its edit's commits, not ready, went into the pack, the import dropped). The
    journal now records what wrote (import of imp): the way back is `edit --abort imp`, which only rolls back (no
    edit of imp is open; b's stays), then the same import again finishes."""
    builder, clean = pack3
    work = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    (work / MOD).write_text((work / MOD).read_text().replace("line 40\n", "forty, not ready\n"))
    git(work, "commit", "-qam", "WIP not ready")
    base = numbered(60)
    before = base.replace("line 10\n", "ten\n").replace("line 30\n", "# a comment\nthirty\n").replace("line 50\n",
                                                                                                       "fifty\n")
    mail = tmp_path / "in.patch"
    mail.write_text(mail_patch(tmp_path, before, before.replace("line 55\n", "fifty-five\n")))
    args = [sys.executable, "-m", "fixpack.cli", "import", str(mail), "--as", "imp", "-p", "p1", "--root",
            f"demo={clean}", "--pack", str(builder.pack), "--after", "a"]  # b and c move: their patches are written
    for fault in range(2, 9):
        killed = subprocess.run(args, capture_output=True, text=True, cwd=REPO,
                                env={**os.environ, "FIXPACK_FAULT_AT": str(fault), "PYTHONPATH": str(REPO)})
        if killed.returncode == 137 and (builder.pack / ".fixpack/journal.json").is_file():
            break
        subprocess.run([sys.executable, "-m", "fixpack.cli", "edit", "--abort", "imp", "--pack", str(builder.pack)],
                       capture_output=True, cwd=REPO)
    else:
        pytest.fail("no write point of import left a journal")
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "status", "-p", "p1", "--root", f"demo={clean}",
                        "--pack", str(builder.pack)], capture_output=True, text=True, cwd=REPO)
    said = " ".join(r.stderr.split())
    assert r.returncode == 3 and "roll back the killed import of imp: " in said and "refresh b" not in said, said
    way = said.split("roll back the killed import of imp: ", 1)[1].split(" (no edit of imp is open", 1)[0]
    done = subprocess.run(way, shell=True, capture_output=True, text=True)
    assert done.returncode == 0 and not (builder.pack / ".fixpack").exists(), (way, done.stderr)
    assert (builder.pack / ".edit/b.json").is_file()  # the edit in progress kept
    again = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
    assert again.returncode == 0, again.stderr
    assert "forty, not ready" not in (builder.pack / "fixes/b/0001-change.patch").read_text()
    assert load_pack(builder.pack).fixes["imp"] and not (builder.pack / ".fixpack").exists()


def test_a_killed_refresh_that_moved_a_later_fix_names_only_its_own_edit(pack3):
    """Edits of b and c open; b's refresh adds a line, so c's patch is rewritten at its new lines. Killed while
    writing, the way back named `refresh b or refresh c` (every fix with a file in the journal): the second wrote c's
    unfinished work into the pack. It names b's refresh alone now (the fix whose fix.toml the journal holds), which
    finishes it."""
    builder, clean = pack3
    b = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    c = Path(start(builder.pack, "p1", "c", roots={"demo": clean}).work)
    (c / MOD).write_text((c / MOD).read_text().replace("line 55\n", "fifty-five, not ready\n"))
    git(c, "commit", "-qam", "c WIP")
    (b / MOD).write_text((b / MOD).read_text().replace("line 20\n", "line 20\n# one more line\n"))
    git(b, "commit", "-qa", "--amend", "--no-edit")
    args = [sys.executable, "-m", "fixpack.cli", "refresh", "b", "--pack", str(builder.pack)]
    for fault in range(2, 12):
        killed = subprocess.run(args, capture_output=True, text=True, cwd=REPO,
                                env={**os.environ, "FIXPACK_FAULT_AT": str(fault), "PYTHONPATH": str(REPO)})
        journal = builder.pack / ".fixpack/journal.json"
        if killed.returncode == 137 and journal.is_file() and "fixes/c/" in journal.read_text():
            break
        subprocess.run(args, capture_output=True, cwd=REPO)  # rolls back (or finishes): try the next point
        git(b, "commit", "-qa", "--amend", "--no-edit", "--allow-empty")
    else:
        pytest.fail("no write point of the refresh left a journal naming c's patch")
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "status", "-p", "p1", "--root", f"demo={clean}",
                        "--pack", str(builder.pack)], capture_output=True, text=True, cwd=REPO)
    said = " ".join(r.stderr.split())
    assert r.returncode == 3 and f"writes it all: {program()} refresh b --pack {builder.pack} (edit --abort" in said, \
        said
    assert "refresh c" not in said, said
    done = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "not ready" not in (builder.pack / "fixes/c/0001-change.patch").read_text()
    assert "+# one more line" in (builder.pack / "fixes/b/0001-change.patch").read_text()


def test_import_refuses_the_name_of_an_open_edit_and_leftover_backups_name_their_removal(pack3, tmp_path):
    """An import as the name of a `new` edit in progress was taken (and, killed, its way back named that edit's
    refresh, which wrote the edit's work in its place): refused now, exit 2, nothing written. A backups folder that
    is a link, with no journal: edit --abort said to put the pack back from git (it was whole); it says to remove
    the leftover, and that runs."""
    builder, clean = pack3
    start(builder.pack, "p1", "x", new=True, target="demo", after="a", roots={"demo": clean})
    mail = tmp_path / "in.patch"
    base = numbered(60).replace("line 10\n", "ten\n")
    mail.write_text(mail_patch(tmp_path, base, base.replace("line 12\n", "twelve\n")))
    before = pack_bytes(builder.pack)
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "import", str(mail), "--as", "x", "-p", "p1", "--root",
                        f"demo={clean}", "--pack", str(builder.pack), "--after", "a"],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and "an edit of x is in progress (.edit/x, from `fixpack new`)" in r.stderr, r.stderr
    assert pack_bytes(builder.pack) == before
    (builder.pack / ".fixpack").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (builder.pack / ".fixpack/journal").symlink_to(tmp_path / "elsewhere")
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "edit", "--abort", "--pack", str(builder.pack)],
                       capture_output=True, text=True, cwd=REPO)
    said = " ".join(r.stderr.split())
    assert r.returncode == 3 and "there is no journal, so the pack is whole: remove it (rm -rf -- " in said, said
    assert "git" not in said, said
    subprocess.run(said.split("remove it (", 1)[1].split(")", 1)[0], shell=True, check=True)
    assert (tmp_path / "elsewhere").is_dir() and (builder.pack / ".edit/x.json").is_file()
    assert engine.status(builder.request(clean)).ok


@pytest.mark.parametrize("by", [{"command": "refresh", "fix": "zzz"}, {"command": "import", "fix": "zzz"},
                                {"command": "import", "fix": "b"}, {"command": "refresh", "fix": "a"}])
def test_a_journal_s_by_naming_what_it_holds_no_file_of_is_damaged(pack3, by):
    """The journal's record of what wrote it is untrusted too: one naming a fix of which it holds no file (or an
    import whose fix.toml it does not create) was taken as a real kill, and its way back (edit --abort zzz) rolled the
    pack back with a "then refresh it again" that could not be done. Damaged state now: exit 3, nothing written."""
    builder, clean = pack3
    killed_refresh(builder, clean)  # b's refresh, killed: its journal holds fixes/b/...
    path = builder.pack / ".fixpack/journal.json"
    data = json.loads(path.read_text())
    assert data["by"] == {"command": "refresh", "fix": "b"}, data
    path.write_text(json.dumps({**data, "by": by}))
    before = pack_bytes(builder.pack)
    for words in (["status", "-p", "p1", "--root", f"demo={clean}"], ["edit", "--abort", by["fix"]], ["refresh", "b"]):
        r = subprocess.run([sys.executable, "-m", "fixpack.cli", *words, "--pack", str(builder.pack)],
                           capture_output=True, text=True, cwd=REPO)
        said = " ".join(r.stderr.split())
        assert r.returncode == 3 and f"it says the {by['command']} of {by['fix']} wrote it, but it holds" in said, \
            (words, said)
        assert pack_bytes(builder.pack) == before


@pytest.mark.parametrize("made", ["gone", "empty folder", "link", "empty .git", "git init"])
def test_a_work_tree_that_is_not_edit_s_is_refused_before_git_runs_there(pack3, tmp_path, made):
    """Found by a fresh user: with `.edit/b/` replaced by an empty folder, refresh ran git there, which read the
    repository above it, the pack's own: "has uncommitted edits (fixes/series, ...)" named the pack's files, and with
    a fixpack-base tag there it read the pack's last commit as the fix. With the work tree gone, refresh printed
    git's own words (exit 5) and edit said "refresh it". Each is damaged state now (exit 3), before git runs, naming
    the way out; nothing is written, and a folder there is kept."""
    from fixpack.editwork import abort
    from fixpack.errors import DamagedStateError

    builder, clean = pack3
    git(builder.pack, "init", "-q")
    git(builder.pack, "add", "-A")
    git(builder.pack, "commit", "-qm", "the pack")
    state = start(builder.pack, "p1", "b", roots={"demo": clean})
    work = Path(state.work)
    shutil.rmtree(work)
    if made == "empty folder":
        work.mkdir()
    elif made == "empty .git":  # (git skips a .git that is no repository, and finds the pack's above: a 2nd finding)
        (work / ".git").mkdir(parents=True)
    elif made == "git init":  # (a repository, but not edit's: no fixpack-base, and `git rebase` on it fails)
        work.mkdir()
        git(work, "init", "-q")
    elif made == "link":
        (tmp_path / "elsewhere").mkdir()
        work.symlink_to(tmp_path / "elsewhere")
    before = snapshot(builder.pack)
    for run in (lambda: refresh_from_work(builder.pack, "b"), lambda: start(builder.pack, "p1", "b",
                                                                            roots={"demo": clean})):
        with pytest.raises(DamagedStateError) as exc:
            run()
        said = str(exc.value)
        assert exc.value.exit_code == 3 and f"the state in {work} is damaged" in said, said
        assert ("is gone" in said) == (made == "gone") and "edit --abort b" in said, said
        assert ("move it out of" in said) == (made != "gone"), said
        assert snapshot(builder.pack) == before
    if made != "gone":
        (work.unlink() if made == "link" else shutil.rmtree(work))  # moved out, as it says
    assert abort(builder.pack, "b") == builder.pack / ".edit/b.json"  # (said "removed .edit/b", not there)
    assert not (builder.pack / ".edit").exists()


@pytest.mark.parametrize("fix", ["b", "n"])
def test_a_binary_file_committed_undeclared_is_named_at_the_commit(pack3, fix):
    """Found by a fresh user: a work tree commit that adds a binary file was refused at the patch file refresh had not
    written (fixes/n/0001-binary.patch:10), saying to declare it in a fix.toml a new fix does not have yet. It is
    named at the commit now, with the way on: the [binary] line, and for a new fix the order that gets there."""
    builder, clean = pack3
    extra = {"new": True, "target": "demo", "after": "a"} if fix == "n" else {}
    work = Path(start(builder.pack, "p1", fix, roots={"demo": clean}, **extra).work)
    (work / "demo_pkg/blob.bin").write_bytes(b"a\0b\n")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "add a binary file")
    sha = git(work, "rev-parse", "HEAD").strip()[:12]
    before = pack_bytes(builder.pack)
    with pytest.raises(BadInputError) as exc:
        refresh_from_work(builder.pack, fix)
    said = str(exc.value)
    assert said.startswith(f"{work} commit {sha} ('add a binary file'): binary change to 'demo_pkg/blob.bin' is not "
                           "declared"), said
    assert '[binary] "demo_pkg/blob.bin" = "patch"' in said and ".patch:" not in said, said
    assert ("a new fix has no fix.toml until its first refresh" in said) == (fix == "n"), said
    assert pack_bytes(builder.pack) == before


def test_edit_on_a_full_disk_names_the_file_and_the_errno(pack3, monkeypatch):
    """Found by a fresh user: `edit` whose copy of the release ran out of space said "...: None" (copytree's error,
    a shutil.Error, has no strerror). It names copytree's first failure, its reason and errno; nothing is kept."""
    import shutil as sh

    from fixpack.errors import EnvironmentProblem

    builder, clean = pack3
    work = builder.pack / ".edit/b"

    def full(src, dst, **kw):  # type: ignore[no-untyped-def]
        Path(dst).mkdir(parents=True)
        raise sh.Error([(str(clean / MOD), str(Path(dst) / MOD),
                         f"[Errno 28] No space left on device: '{clean / MOD}' -> '{Path(dst) / MOD}'")])

    monkeypatch.setattr(sh, "copytree", full)
    before = pack_bytes(builder.pack)
    with pytest.raises(EnvironmentProblem) as exc:
        start(builder.pack, "p1", "b", roots={"demo": clean})
    said = str(exc.value)
    assert f"cannot make the work tree {work}: {work / MOD}: No space left on device (ENOSPC); nothing was kept" \
        in said and "None" not in said, said
    assert not work.exists() and pack_bytes(builder.pack) == before


def test_an_edit_begun_by_an_older_fixpack_refreshes_as_it_would_have(pack3):
    """The edit state's change digest is now the lock's notion of a change (ranges and context too); an edit begun
    before holds the old digest (removed and added lines only). Its refresh reads that as the pack's fix it began
    from: a change made in the work tree is bumped once, never refused as "changed in the pack since the edit
    began"."""
    import json

    from fixpack.editstate import legacy_digest, state_path
    from fixpack.patchfiles import patch_again

    builder, clean = pack3
    work = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    path = state_path(builder.pack, "b")
    doc = json.loads(path.read_text())
    fix = load_pack(builder.pack).fixes["b"]
    doc["change"] = legacy_digest([patch_again(pf, then="x") for pf in fix.patches])
    path.write_text(json.dumps(doc, indent=2) + "\n")
    (work / MOD).write_text((work / MOD).read_text().replace("# a comment\n", "# a clearer comment\n"))
    git(work, "commit", "-qa", "--amend", "--no-edit")
    done = refresh_from_work(builder.pack, "b")
    assert done is not None and "fixes/b/0001-change.patch" in done.outcome.written
    assert "version = 2\n" in (builder.pack / "fixes/b/fix.toml").read_text()


def test_an_edit_given_a_relative_root_refreshes_from_any_folder(pack3, monkeypatch):
    """Found by a fresh user: `edit --root demo=../../clean` kept the path as typed, so its refresh, run from any
    other folder (the work tree itself too), said the release did not match the pin. The edit keeps it absolute."""
    import json
    import os

    from fixpack.editstate import state_path

    builder, clean = pack3
    monkeypatch.chdir(builder.pack)
    work = Path(start(builder.pack, "p1", "b", roots={"demo": Path(os.path.relpath(clean, builder.pack))}).work)
    assert json.loads(state_path(builder.pack, "b").read_text())["release"] == str(clean)
    (work / MOD).write_text((work / MOD).read_text().replace("# a comment\n", "# a clearer comment\n"))
    git(work, "commit", "-qa", "--amend", "--no-edit")
    monkeypatch.chdir(work)
    done = refresh_from_work(builder.pack, "b")
    assert done is not None and "fixes/b/0001-change.patch" in done.outcome.written


def test_a_refusal_after_a_killed_refresh_was_rolled_back_says_so(pack3):
    """Carried from a fresh user: a pack update (refresh, edit, import) that rolled a killed one back and was then
    refused said nothing of that rollback ("nothing was written", or no word at all) though it had put the pack's
    files back. Now the refusal says it: exit 2 as before, its "nothing was written" made "a killed pack update was
    rolled back first (said above), and nothing else was written", or the rollback added where it claims nothing."""
    builder, clean = pack3
    killed_refresh(builder, clean)
    work = builder.pack / ".edit" / "b"
    (work / MOD).write_text((work / MOD).read_text() + "# not committed\n")  # refresh refuses uncommitted edits
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "refresh", "b", "--pack", str(builder.pack)],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and "uncommitted edits" in r.stderr, r.stderr
    assert "(a killed pack update was rolled back first (said above))" in r.stderr, r.stderr
    assert not (builder.pack / ".fixpack").exists()


def test_recovered_first_rewords_a_refusal_only_after_a_rollback(tmp_path, monkeypatch):
    """A claim of nothing written becomes the rollback's words after one, and stays as it is without one."""
    from fixpack import packupdate

    for rolled, said in ((True, "x; a killed pack update was rolled back first (said above), and nothing else was "
                                "written"), (False, "x; nothing was written")):
        monkeypatch.setattr(packupdate, "recover_pack", lambda root, progress, r=rolled: r)
        for claim in ("nothing was written", "nothing in the pack was written"):  # (the staging's words: a fresh user)
            with pytest.raises(BadInputError) as exc, packupdate.recovered_first(tmp_path):
                raise BadInputError(f"x; {claim}")
            assert str(exc.value) == (said if rolled else f"x; {claim}") and exc.value.exit_code == 2


def test_an_imported_binary_file_names_the_edit_of_the_import_s_profile(pack3):
    """Found by a maintainer: the refusal of a mail that changes a binary file said `edit FIX --profile P`, a
    placeholder, though the import was given its profile; the command it names is runnable as printed."""
    builder, clean = pack3
    repo = builder.base / "bin-repo"
    (repo / "demo_pkg").mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "a@example.org")
    git(repo, "config", "user.name", "A Author")
    (repo / "demo_pkg/blob.bin").write_bytes(b"PNG\0\1\2\3\xff")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "Add a blob")
    mail = builder.base / "bin.patch"
    mail.write_text(git(repo, "format-patch", "--root", "--binary", "--stdout"))
    before = snapshot(builder.base)
    with pytest.raises(BadInputError) as caught:
        import_mails(builder.pack, mail, "t-binary", "p1", roots={"demo": clean})
    said = str(caught.value)
    assert f"`{program()} edit t-binary --profile p1 --pack {builder.pack}`" in said and "--profile P" not in said, said
    assert snapshot(builder.base) == before


@pytest.mark.parametrize("where", ["fixes/newexp", "profiles/x", ".", ".rebase/out", "link-to-fixes/sub"])
def test_export_into_a_folder_the_pack_reads_as_its_own_is_refused(pack3, where):
    """Found by a maintainer: `export --out fixes/newexp` wrote the series inside the pack's fixes/, and check still
    said the pack was clean (rebase refuses its --work there). Exit 2, nothing written; a folder of its own in the
    checkout is the user's."""
    builder, _clean = pack3
    (builder.pack / "link-to-fixes").symlink_to(builder.pack / "fixes")
    before = snapshot(builder.base)
    with pytest.raises(BadInputError, match=r"^--out .*: (inside the pack's (fixes|profiles|\.rebase)/|the pack itself) "
                                            r"\(.*\), whose files the pack reads as its own: give a folder of its own"):
        export(builder.pack, "p1", (), builder.pack / where)
    assert snapshot(builder.base) == before
    assert export(builder.pack, "p1", (), builder.pack / "series-out")[-1].name == "series"


def test_an_import_refused_at_a_line_of_its_patch_names_the_mail_s_line(pack3):
    """Found by a maintainer: an imported mail whose `\\ No newline at end of file` marker follows a hunk's last line in a
    file that goes on was refused (exit 4) at a line of fixes/t/0001-....patch, a file the import never wrote ("nothing
    was written"), two lines off the mail's own (the patch drops the mail's index line). The mail's line is named."""
    builder, clean = pack3
    base = numbered(60).replace("line 10\n", "ten\n").replace("line 30\n", "# a comment\nthirty\n")
    base = base.replace("line 50\n", "fifty\n")
    lines = mail_patch(builder.base, base, base.replace("line 40\n", "forty\n")).split("\n")
    at = max(k for k, ln in enumerate(lines) if ln.startswith(" line 43"))
    lines.insert(at + 1, "\\ No newline at end of file")
    mail = builder.base / "in.patch"
    mail.write_text("\n".join(lines))
    before = snapshot(builder.base)
    with pytest.raises(ConflictError) as caught:
        import_mails(builder.pack, mail, "t", "p1", roots={"demo": clean})
    said = str(caught.value)
    assert f"marker is misplaced ({mail}:{at + 2})" in said and "fixes/t/" not in said, said
    assert snapshot(builder.base) == before
