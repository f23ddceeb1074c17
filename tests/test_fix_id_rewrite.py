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


def test_rebase_refuses_a_patch_whose_fix_id_names_another_fix(builder):
    from test_rebase import BASE, OTHER, OTHER_BASE, commit_pack, new_release, pack_files, req

    from fixpack import rebase
    from fixpack.loader import load_pack
    from fixpack.patchtext import normalized

    old = builder.tree("old", {MOD: BASE, OTHER: OTHER_BASE})
    builder.add_fix("first", {MOD: BASE}, {MOD: BASE.replace("line 5\n", "five\n")})
    builder.add_fix("second", {OTHER: OTHER_BASE}, {OTHER: OTHER_BASE.replace("other 20\n", "twenty\n")})
    builder.profile(["first", "second"])
    fix = load_pack(builder.pack).fixes["first"]
    patch = fix.patches[0].path
    patch.write_text(normalized(fix, fix.patches[0]).replace("\nFix-Id: first\n", "\nFix-Id: second\n"))
    builder.lock(old)
    commit_pack(builder)
    before = pack_files(builder)
    new = new_release(builder, {MOD: "# new header\n" * 3 + BASE, OTHER: OTHER_BASE})  # first moves: written again
    with pytest.raises(BadInputError, match=rf"^{patch}:{line_of(patch.read_text(), 'Fix-Id: second')}: its Fix-Id "
                                            rf"trailer says 'second' .* listed under fix 'first' .*nothing was "
                                            rf"written \(were two fixes' patches swapped\?"):
        rebase.start(req(builder, old, new))
    assert pack_files(builder) == before and not (builder.pack / ".rebase" / "v2.0").exists()
