"""A patch's trailers are read as ``git interpret-trailers --parse`` reads them (README, "Patch headers"). Found by a
reviewer: a Fix-Id naming another fix of the pack, written as a value folded onto the next line, before a
``(cherry picked from commit ...)`` line, in a last paragraph that is a quarter trailers with a ``Signed-off-by:``
among them, or after an empty ``Fix-Id:``, was read by git but not by fixpack: `check`, `format --check` and `rebase`
let the swapped patch through, and `format` appended a second trailer block, after which git read the tool's id
(the swap hidden). Each is read as git reads it now, and refused as a plain swapped trailer is (exit 2, at the
trailer's first line, nothing written); a paragraph git reads as no trailer block is none for fixpack either."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GIT_ENV, REPO
from test_pack_tools import _two_fixes

from fixpack.loader import load_pack
from fixpack.patchmail import read_mail, split, trailer_lines

CHERRY = "(cherry picked from commit 0123456789abcdef0123456789abcdef01234567)"
# each form names fix "two" in a patch of fix "one" ({id}); git interpret-trailers --parse reads Fix-Id: two in each
FORMS = {
    "folded": "Fix-Id:\n {id}",
    "cherry-picked": "Fix-Id: {id}\n" + CHERRY,
    "a-quarter-trailers": "Fix-Id: {id}\nthis line is no trailer\nSigned-off-by: A B <a@b.org>",
    "empty-then-set": "Fix-Id:\nFix-Id: {id}",
}
# git reads no trailer block here (no line git generates, and not all trailers): fixpack reads none either
CONTROL = {"not-a-trailer-block": "Fix-Id: {id}\nthis line is no trailer\nAcked-by: A B <a@b.org>"}
# more of git's rules, read alike
MORE = {
    "folded-over-two-lines": "Acked-by: A\n  B  \n\tC <c@x.org>\nFix-Id:{id}",
    "comment-in-block": "Fix-Id: {id}\n# a comment\nAcked-by: A <a@x.org>",
    "comment-after-block": "Fix-Id: {id}\n\n# a comment\n#\n",
    "conflicts-after-block": "Fix-Id: {id}\n\nConflicts:\n\tdemo_pkg/mod.py\n",
    "white-space-line-after": "Fix-Id: {id}\n \t",
    "a-quarter-trailers-exactly": "Signed-off-by: A <a@x.org>\nt1\nt2\nt3\nt4\nt5\nt6\nFix-Id: {id}",
    "under-a-quarter-trailers": "Signed-off-by: A <a@x.org>\nt1\nt2\nt3\nt4\nt5\nt6\nt7\nFix-Id: {id}",
    "signed-off-by-without-its-space": "Fix-Id: {id}\nthis line is no trailer\nSigned-off-by:A <a@x.org>",
    "scissors": "Fix-Id: {id}\n# ------------------------ >8 ------------------------\nAcked-by: A <a@x.org>",
    "indented-first-line": " indented\nFix-Id: {id}\nSigned-off-by: A <a@x.org>",
    "key-with-space": "Fix Id: {id}\nSigned-off-by: A <a@x.org>",
    "url-paragraph": "https://example.org/x\nFix-Id : {id}",
    "trailer-in-description-only": "Fix-Id: {id}\n\nJust text.",
    # git's white space is space, tab, CR and LF (a fresh user: \f and \v were taken for white space, so a line of
    # them ended the block, and one led by them continued the trailer above it)
    "form-feed-line": "Fix-Id: {id}\nSigned-off-by: A <a@x.org>\n\f\nFix-Id: one",
    "vertical-tab-line": "Fix-Id: {id}\nSigned-off-by: A <a@x.org>\n\v\nAcked-by: B <b@x.org>",
    "form-feed-led-line": "Signed-off-by: A <a@x.org>\nFix-Id: {id}\n\fmore text",
}


def _patch(form: str, fid: str = "two") -> str:
    body = "why\n\n" + form.format(id=fid) + "\n---\n"
    return ("From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nFrom: t <t@invalid>\n"
            "Subject: [PATCH] s\n\n" + body + "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")


def git_reads(patch_text: str, tmp: Path) -> list[tuple[str, str]]:
    """``git interpret-trailers --parse`` on the patch's commit message (as git am makes it: the subject, a blank
    line, the body), no git configuration read."""
    head = split(patch_text)[0]
    body = head.split("\n\n", 1)[1]
    env = {**os.environ, **GIT_ENV, "HOME": str(tmp)}
    out = subprocess.run(["git", "interpret-trailers", "--parse"], input="s\n\n" + body, capture_output=True,
                         text=True, check=True, env=env, cwd=tmp).stdout
    return [(k, v[1:] if v.startswith(" ") else v) for k, _sep, v in (ln.partition(":") for ln in out.splitlines())]


def fixpack_reads(patch_text: str) -> list[tuple[str, str]]:
    return [(k, v) for k, v in read_mail(patch_text).trailers if k]


@pytest.mark.parametrize("form", [*FORMS.values(), *CONTROL.values(), *MORE.values()],
                         ids=[*FORMS, *CONTROL, *MORE])
def test_trailers_are_read_as_git_interpret_trailers_reads_them(form, tmp_path):
    text = _patch(form)
    said = git_reads(text, tmp_path)
    assert fixpack_reads(text) == said
    lines = text.split("\n")
    at = [n for n, _v in trailer_lines(text, "fix-id")]
    assert [v for k, v in said if k.lower() == "fix-id"] == [v for _n, v in trailer_lines(text, "fix-id")]
    assert all(n is not None and re.match(r"Fix-Id[ \t]*:", lines[n - 1]) for n in at), (at, text)
    if form in FORMS.values():
        assert ("Fix-Id", "two") in said
    if form in CONTROL.values():
        assert said == []


def _line(text: str, form: str) -> int:
    """The line of the form's ``Fix-Id`` trailer naming ``two`` (its first line: ``Fix-Id:`` for a folded one)."""
    lines = text.splitlines()
    start = lines.index("why") + 2
    said = form.format(id="two").split("\n")
    at = next(i for i, ln in enumerate(said) if "two" in ln)
    return start + (at if said[at].startswith("Fix-Id") else at - 1) + 1


def _cli(pack: Path, cwd: Path):
    """The CLI of the fixpack under test on ``pack`` in a child process: (exit code, its output on one line)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("FIXPACK_PACK", None)

    def run(*args: str) -> tuple[int, str]:
        r = subprocess.run([sys.executable, "-m", "fixpack.cli", *args, "--pack", str(pack)],
                           capture_output=True, text=True, env=env, cwd=cwd)
        return r.returncode, " ".join((r.stdout + r.stderr).split())

    return run


@pytest.mark.parametrize("form", [*FORMS.values(), *CONTROL.values()], ids=[*FORMS, *CONTROL])
def test_check_and_format_refuse_each_form_git_reads_with_nothing_written(builder, form, tmp_path):
    clean, patches = _two_fixes(builder)
    for fid in patches:  # (each with its proof: the pack is clean but for the patch's trailers)
        (builder.pack / f"fixes/{fid}/test_{fid}.py").write_text("def test_it():\n    pass\n")
    patch = patches["one"]
    text, n = re.subn(r"\nFix-Id: one\n", "\nwhy\n\n" + form.format(id="two") + "\n", patch.read_text())
    assert n == 1
    patch.write_text(text)
    builder.lock(clean)
    before = {p: p.read_bytes() for p in builder.pack.rglob("*") if p.is_file()}
    run = _cli(builder.pack, tmp_path)
    said_at = f"{patch}:{_line(text, form)}: its Fix-Id trailer says 'two' (the id of fix two, fixes/two/), but the " \
              f"patch is listed under fix 'one'"
    checked = run("check")
    if form in CONTROL.values():  # no trailer: check passes it, format writes its own block (git reads that alone)
        assert checked[0] == 0 and "Fix-Id" not in checked[1], checked
        assert run("format", "--check")[0] == 2  # (stale: no Fix-Id trailer yet)
        assert run("format")[0] == 0
        assert git_reads(patch.read_text(), tmp_path)[-1] == ("Fix-Id", "one")
        return
    assert checked[0] == 2 and f"fixes/one/0001-change.patch:{_line(text, form)}: its Fix-Id trailer says 'two'" \
        in checked[1], checked
    for args in (("format", "--check"), ("format",)):
        rc, said = run(*args)
        assert rc == 2 and said_at in said and "no patch was written" in said, (args, said)
    assert {p: p.read_bytes() for p in builder.pack.rglob("*") if p.is_file()} == before


def test_rebase_refuses_each_form_git_reads_before_any_work(builder):
    from test_fix_id_rewrite import MOD, first_and_second
    from test_rebase import BASE, OTHER, OTHER_BASE, commit_pack, new_release, pack_files, req

    from fixpack import rebase
    from fixpack.errors import BadInputError
    from fixpack.patchtext import normalized

    old = first_and_second(builder)
    fix = load_pack(builder.pack).fixes["first"]
    patch, own = fix.patches[0].path, normalized(fix, fix.patches[0])
    new = new_release(builder, {MOD: BASE, OTHER: OTHER_BASE})
    for form in FORMS.values():
        text = own.replace("\nFix-Id: first\n", "\nwhy\n\n" + form.format(id="second") + "\n")
        patch.write_text(text)
        builder.lock(old)
        commit_pack(builder)
        before = pack_files(builder)
        at = _line(text.replace("second", "two"), form)
        with pytest.raises(BadInputError, match=rf"^1 Fix-Id trailer\(s\) .*nothing was fetched or written\n  - "
                                                rf"{patch}:{at}: its Fix-Id trailer says 'second' .* listed under fix "
                                                rf"'first' "):
            rebase.start(req(builder, old, new, allow_unproven=True))
        assert pack_files(builder) == before and not (builder.pack / ".rebase").exists()


def test_format_refuses_a_block_that_would_no_longer_read_as_trailers_once_written(builder, tmp_path):
    """Found by a fresh user: a last paragraph that git reads as a trailer block only by the 25% rule (trailers, one
    of them Signed-off-by:, among lines of text), whose tool-owned fields format drops (Bug:, Origin:, ... not set in
    fix.toml), was written with too few trailers left to be a block: git read none, and a second format added another
    block (format was not idempotent, and format --check failed right after format). Refused now, exit 2, at the
    block's first trailer, nothing written; with the text moved above the trailers, format writes it and a second
    format changes nothing."""
    clean, patches = _two_fixes(builder)
    patch = patches["one"]
    owned = "Bug: https://example.org/1\nOrigin: vendor\nLast-Update: 2026-12-06\nApplied-Upstream: 1.0\n"
    notes = "".join(f"note line {i}\n" for i in range(13))
    text, n = re.subn(r"\nFix-Id: one\n", "\nwhy\n\n" + owned + "Fix-Id: one\nSigned-off-by: A <a@x.org>\n" + notes,
                      patch.read_text())
    assert n == 1
    patch.write_text(text)
    builder.lock(clean)
    assert ("Fix-Id", "one") in git_reads(text, tmp_path)  # a block, by the 25% rule
    run = _cli(builder.pack, tmp_path)
    before = {p: p.read_bytes() for p in builder.pack.rglob("*") if p.is_file()}
    line = text.splitlines().index("Bug: https://example.org/1") + 1
    for args in (("format", "--check"), ("format",)):
        rc, said = run(*args)
        assert rc == 2 and f"{patch}:{line}: its trailer block holds lines of text among its trailers" in said, said
        assert "move the text above the trailers, a blank line between; nothing was written" in said, said
    assert {p: p.read_bytes() for p in builder.pack.rglob("*") if p.is_file()} == before
    patch.write_text(text.replace("why\n\n" + owned + "Fix-Id: one\nSigned-off-by: A <a@x.org>\n" + notes,
                                  "why\n\n" + notes + "\n" + owned + "Fix-Id: one\nSigned-off-by: A <a@x.org>\n"))
    assert run("format")[0] == 0
    once = patch.read_bytes()
    assert run("format")[0] == 0 and patch.read_bytes() == once and run("format", "--check")[0] == 0
    assert ("Fix-Id", "one") in git_reads(once.decode(), tmp_path) and "note line 12" in once.decode()


def test_values_as_git_reads_them_and_every_writer_holds_the_block(builder, tmp_path):
    """Found by an attacker of the read-back check: it compared fix.toml's values raw, so `origin = "vendor "` (git
    trims it) refused an ordinary patch with advice about text lines it does not have; and it ran only where `format`
    reads a patch, not where refresh, rebase (write_patches), edit and import write one (`render`), so those still
    wrote a block git reads as none. Values are compared as git reads them; a value whose line break breaks the block
    is refused with its own words; every writer goes through render's check."""
    from fixpack.diff import diff_body
    from fixpack.errors import BadInputError
    from fixpack.patchmail import read_mail, render
    from fixpack.patchtext import header_fields, write_patches

    clean, patches = _two_fixes(builder)
    run = _cli(builder.pack, tmp_path)
    toml = builder.pack / "fixes/one/fix.toml"
    plain = toml.read_text()
    for value in ('"vendor "', '" vendor"', '"vendor\\n  tree"', '"vendor\\t"'):
        toml.write_text(plain + f"\n[upstream]\norigin = {value}\n")
        assert run("format")[0] == 0, value
        once = patches["one"].read_bytes()
        assert run("format")[0] == 0 and patches["one"].read_bytes() == once and run("format", "--check")[0] == 0
        assert ("Origin", "vendor tree" if "tree" in value else "vendor") in git_reads(once.decode(), tmp_path)
        written = "vendor\n  tree" if "tree" in value else "vendor"  # (written trimmed, as git reads it: a fresh user)
        assert f"\nOrigin: {written}\n".encode() in once, once
    toml.write_text(plain + '\n[upstream]\norigin = "vendor\\nbroken"\n')
    before = patches["one"].read_bytes()
    rc, said = run("format")
    assert rc == 2 and "its trailers, written with fix.toml's [upstream] fields, would not read back as git reads " \
        "them" in said and "write it on one line in fix.toml; nothing was written" in said, said
    assert patches["one"].read_bytes() == before
    toml.write_text(plain)
    owned = "Bug: https://example.org/1\nOrigin: vendor\nLast-Update: 2026-12-06\nApplied-Upstream: 1.0\n"
    text = before.decode().replace("\nFix-Id: one\n", "\nwhy\n\n" + owned + "Fix-Id: one\nSigned-off-by: A <a@x.org>\n"
                                   + "".join(f"note line {i}\n" for i in range(13)))
    patches["one"].write_text(text)
    fix = load_pack(builder.pack).fixes["one"]
    with pytest.raises(BadInputError, match=r"0001-change\.patch:\d+: its trailer block holds lines of text"):
        write_patches(fix, [diff_body(text)], load_pack(builder.pack).fixes)  # refresh, rebase
    with pytest.raises(BadInputError, match=r"^work commit 0123: its trailer block holds lines of text"):
        render(read_mail(text), header_fields(fix), diff_body(text), "work commit 0123")  # edit, import
