"""The commands that write a patch again (edit, refresh, refresh --root, import, rebase) refuse one whose ``Fix-Id:``
trailer names another fix of the pack, as ``format`` does (exit 2, at the trailer's line, nothing written): found by a
reviewer, each wrote fix.toml's id over the trailer without a word, which hid a patch swapped with, or copied from,
another fix's (``check`` then passed)."""

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import git, numbered
from test_authoring import MOD, mail_patch, pack3, pack_bytes  # noqa: F401 (the fixture)

from fixpack.editrefresh import refresh_from_work
from fixpack.editwork import start
from fixpack.errors import BadInputError
from fixpack.exchange import import_mails


def said_by(patch: Path, fid: str) -> Path:
    """``patch`` with its ``Fix-Id:`` trailer saying ``fid``, as a patch swapped or copied from that fix says it."""
    text, n = re.subn(r"\nFix-Id: [^\n]*\n", f"\nFix-Id: {fid}\n", patch.read_text())
    assert n == 1
    patch.write_text(text)
    return patch


def line_of(text: str, said: str) -> int:
    return text.splitlines().index(said) + 1


@contextmanager
def refused(pack: Path, match: str | None = None) -> Iterator[pytest.ExceptionInfo[BadInputError]]:
    """The block is refused (BadInputError, exit 2, its message matching ``match``) and leaves the pack's bytes as
    they were."""
    before = pack_bytes(pack)
    with pytest.raises(BadInputError, match=match) as exc:
        yield exc
    assert exc.value.exit_code == 2 and pack_bytes(pack) == before


def test_edit_refuses_a_patch_whose_fix_id_names_another_fix(pack3):  # noqa: F811
    builder, clean = pack3
    patch = said_by(builder.pack / "fixes/b/0001-change.patch", "c")
    with refused(builder.pack) as exc:
        start(builder.pack, "p1", "b", roots={"demo": clean})
    said = str(exc.value)
    assert said.startswith(f"{patch}:{line_of(patch.read_text(), 'Fix-Id: c')}: its Fix-Id trailer says 'c' (the id "
                           f"of fix c, fixes/c/), but the patch is listed under fix 'b' (fixes/b/fix.toml's patches); "
                           f"writing it again would put fix.toml's Fix-Id: b over the trailer"), said
    assert "nothing was written (were two fixes' patches swapped?" in said, said
    assert not (builder.pack / ".edit" / "b").exists()


def test_refresh_refuses_a_commit_or_a_moved_later_patch_whose_fix_id_names_another_fix(pack3):  # noqa: F811
    builder, clean = pack3
    work = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    (work / MOD).write_text((work / MOD).read_text().replace("# a comment\n", "# a comment\n# on two lines\n"))
    message = git(work, "log", "-1", "--format=%B").replace("\nFix-Id: b\n", "\nFix-Id: a\n")
    git(work, "commit", "-qa", "--amend", "-m", message)
    with refused(builder.pack) as exc:
        refresh_from_work(builder.pack, "b")
    sha = git(work, "rev-parse", "HEAD").strip()[:12]
    assert str(exc.value).startswith(f"{work} commit {sha} message:{line_of(message, 'Fix-Id: a')}: its Fix-Id "
                                     f"trailer says 'a' (the id of fix a, fixes/a/), but it is a commit of the edit "
                                     f"of fix 'b'; "), str(exc.value)
    assert "a commit taken from fix a? drop it (git rebase -i fixpack-base)" in str(exc.value)
    # the commit is b's again; c, moved a line down by it, is regenerated: its own patch says another fix
    git(work, "commit", "-q", "--amend", "-m", message.replace("\nFix-Id: a\n", "\nFix-Id: b\n"))
    c_patch = said_by(builder.pack / "fixes/c/0001-change.patch", "a")
    with refused(builder.pack, rf"^{c_patch}:{line_of(c_patch.read_text(), 'Fix-Id: a')}: its Fix-Id trailer says 'a' "
                               rf".* but the patch is listed under fix 'c'"):
        refresh_from_work(builder.pack, "b")


def test_refresh_on_a_root_refuses_a_patch_whose_fix_id_names_another_fix(pack3):  # noqa: F811
    from fixpack.pack_tools import refresh

    builder, clean = pack3
    patch = said_by(builder.pack / "fixes/c/0001-change.patch", "b")
    with refused(builder.pack, rf"^{patch}:{line_of(patch.read_text(), 'Fix-Id: b')}: its Fix-Id trailer says 'b' "
                               rf".*; nothing was written"):
        refresh(builder.pack, "p1", "c", clean)


def test_import_refuses_a_mail_whose_fix_id_names_a_fix_of_the_pack(pack3):  # noqa: F811
    builder, clean = pack3
    top = numbered(60).replace("line 10\n", "ten\n").replace("line 30\n", "# a comment\nthirty\n")
    top = top.replace("line 50\n", "fifty\n")
    mail = builder.base / "in.mbox"
    one = mail_patch(builder.base, top, top.replace("line 55\n", "fifty-five\n"), subject="One")
    two = mail_patch(builder.base, top, top.replace("line 5\n", "five\n"), subject="Two",
                     body="Copied.\n\nSigned-off-by: J <j@example.org>\nFix-Id: a\n")
    mail.write_text(one + two)
    with refused(builder.pack) as exc:
        import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    said = str(exc.value)
    assert said.startswith(f"{mail}:{line_of(one + two, 'Fix-Id: a')}: its Fix-Id trailer says 'a' (the id of fix a, "
                           f"fixes/a/), but the mail is imported as fix 'imp'; "), said
    assert "a patch of fix a, which the pack holds already? `" in said and "write its trailer as Fix-Id: imp" in said


def first_and_second(builder) -> Path:
    """A pack of two fixes, first (on MOD) and second (on OTHER), in profile p1, for a rebase: the old release copy."""
    from test_rebase import BASE, OTHER, OTHER_BASE

    old = builder.tree("old", {MOD: BASE, OTHER: OTHER_BASE})
    builder.add_fix("first", {MOD: BASE}, {MOD: BASE.replace("line 5\n", "five\n")})
    builder.add_fix("second", {OTHER: OTHER_BASE}, {OTHER: OTHER_BASE.replace("other 20\n", "twenty\n")})
    builder.profile(["first", "second"])
    return old


def test_rebase_refuses_a_patch_whose_fix_id_names_another_fix(builder):
    from test_rebase import BASE, OTHER, OTHER_BASE, commit_pack, new_release, pack_files, req

    from fixpack import rebase
    from fixpack.loader import load_pack
    from fixpack.patchtext import normalized

    old = first_and_second(builder)
    fix = load_pack(builder.pack).fixes["first"]
    patch = fix.patches[0].path
    patch.write_text(normalized(fix, fix.patches[0]).replace("\nFix-Id: first\n", "\nFix-Id: second\n"))
    builder.lock(old)
    commit_pack(builder)
    before = pack_files(builder)
    new = new_release(builder, {MOD: "# new header\n" * 3 + BASE, OTHER: OTHER_BASE})  # first moves: written again
    with pytest.raises(BadInputError, match=rf"^1 Fix-Id trailer\(s\) .*nothing was fetched or written\n  - {patch}:"
                                            rf"{line_of(patch.read_text(), 'Fix-Id: second')}: its Fix-Id trailer "
                                            rf"says 'second' .* listed under fix 'first' .*\(were two fixes' patches "
                                            rf"swapped\?"):
        rebase.start(req(builder, old, new))
    assert pack_files(builder) == before and not (builder.pack / ".rebase" / "v2.0").exists()


def test_rebase_refuses_every_carried_patch_whose_fix_id_names_another_fix_before_any_work(builder):
    """Found by a reviewer: rebase read a patch's Fix-Id only when it wrote the patch again, after carrying the fixes
    before it, and a patch it kept byte for byte (nothing moved) went through with the other fix's id. Now every
    patch it carries is held to format's rule at the start, before anything is fetched or written: exit 2, at each
    trailer's line with both ids and what to do, in format's words. A Fix-Id naming no fix of the pack (a fix
    renamed) is carried as before."""
    import os
    import shutil
    import subprocess
    import sys

    from conftest import REPO
    from test_rebase import BASE, OTHER, OTHER_BASE, commit_pack, new_release, pack_files, req

    from fixpack import rebase
    from fixpack.loader import load_pack
    from fixpack.patchtext import normalized

    old = first_and_second(builder)
    pack = load_pack(builder.pack)
    texts = {fid: normalized(pack.fixes[fid], pack.fixes[fid].patches[0]) for fid in ("first", "second")}
    first, second = (builder.pack / f"fixes/{fid}/0001-change.patch" for fid in ("first", "second"))
    first.write_text(texts["first"].replace("\nFix-Id: first\n", "\nFix-Id: first-old-name\n"))  # a fix renamed
    second.write_text(texts["second"].replace("\nFix-Id: second\n", "\nFix-Id: first\n"))  # copied from first
    builder.lock(old)
    commit_pack(builder)
    before = pack_files(builder)
    new = new_release(builder, {MOD: BASE, OTHER: OTHER_BASE})  # nothing moves: each patch kept byte for byte
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [sys.executable, "-m", "fixpack.cli", "rebase", "--profile", "p1", "--root", f"demo={new}", "--old-root",
            f"demo={old}", "--allow-unproven", "--color", "never", "--pack", str(builder.pack)]
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    line = line_of(second.read_text(), "Fix-Id: first")
    assert r.returncode == 2, r
    said = " ".join(r.stderr.split())
    assert ("1 Fix-Id trailer(s) name another fix of the pack than the one that lists the patch: a rebase writes each "
            "carried patch's Fix-Id from the fix that lists it, which would hide two fixes' patches swapped; nothing "
            "was fetched or written") in said, r.stderr
    assert (f"{second}:{line}: its Fix-Id trailer says 'first' (the id of fix first, fixes/first/), but the patch is "
            f"listed under fix 'second' (fixes/second/fix.toml's patches) (were two fixes' patches swapped? put each "
            f"back in its own fix's folder and lock again; if this patch is second's after all, write its trailer as "
            f"Fix-Id: second)") in said, r.stderr
    assert "first-old-name" not in said
    assert pack_files(builder) == before and not (builder.pack / ".rebase").exists()
    assert not (builder.pack / "reports").exists()
    check = subprocess.run([sys.executable, "-m", "fixpack.cli", "check", "--pack", str(builder.pack)],
                           capture_output=True, text=True, env=env)  # check names it at the same line
    assert check.returncode == 2 and f"fixes/second/0001-change.patch:{line}: its Fix-Id trailer says 'first'" in \
        " ".join(check.stdout.split() + check.stderr.split()), check
    second.write_text(texts["second"])  # the swapped patch in second's variant for p1, which p1 (so the rebase) uses
    variant = builder.pack / "fixes/second/p1"
    variant.mkdir()
    (variant / "variant.toml").write_text("version = 1\n")
    (variant / second.name).write_text(texts["second"].replace("\nFix-Id: second\n", "\nFix-Id: first\n"))
    builder.lock(old)
    commit_pack(builder)
    before = pack_files(builder)
    with refused(builder.pack, rf"^1 Fix-Id trailer\(s\) .*\n  - {variant / second.name}:{line}: its Fix-Id trailer says "
                               rf"'first' .* listed under fix 'second' \(its variant for profile p1, fixes/second/p1/\)"):
        rebase.start(req(builder, old, new, allow_unproven=True))
    assert pack_files(builder) == before and not (builder.pack / ".rebase").exists()
    shutil.rmtree(variant)  # put back: the renamed fix's trailer is carried as before
    builder.lock(old)
    commit_pack(builder)
    done = subprocess.run(args, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done
    assert first.read_text().count("Fix-Id: first-old-name") == 1
