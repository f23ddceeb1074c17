"""import takes a diff in the forms other tools write (quilt's, ``diff -u`` with ``X.orig``, ``-p0``), as git am and
quilt push read them, and writes it into the pack in git's form with ``a/`` and ``b/`` prefixes, so that every tool
that reads the pack's patch (git am, GNU patch -p1, quilt push) finds the same file the engine changes."""

from __future__ import annotations

import re
import subprocess

import pytest
from conftest import git
from test_authoring import MOD, mail_patch, pack3  # noqa: F401 (the fixture)
from test_import_dep3 import MID, TOP

from fixpack.diff import diff_body, parse_patch
from fixpack.errors import PatchParseError
from fixpack.exchange import import_mails
from fixpack.loader import load_pack
from fixpack.patchtext import normalize_text

HEAD = "From: A <a@example.org>\nSubject: Say fifty-five\n\nWhy it matters.\n\n"
SEP = "=" * 67  # quilt's line under 'Index:'


def _hunks(tmp_path, before: str, after: str) -> str:
    """diff -u's hunks (its '---' / '+++' lines left out) from ``before`` to ``after``."""
    (tmp_path / "x").write_text(before)
    (tmp_path / "y").write_text(after)
    out = subprocess.run(["diff", "-u", "x", "y"], cwd=tmp_path, capture_output=True, text=True).stdout
    return out.split("\n", 2)[2]


def _bare(body: str) -> str:
    return re.sub(r"(?m)^(@@ [^@]+ @@).*$", r"\1", body)


def _forms(tmp_path) -> dict[str, str]:
    hunks = _hunks(tmp_path, TOP, MID)
    stamp = "\t2026-12-06 10:00:00.000000000 +0000"
    return {
        "quilt": f"Index: image/{MOD}\n{SEP}\n--- image.orig/{MOD}{stamp}\n+++ image/{MOD}{stamp}\n{hunks}",
        "X.orig": f"--- {MOD}.orig{stamp}\n+++ {MOD}{stamp}\n{hunks}",
        "-p0": f"--- {MOD}{stamp}\n+++ {MOD}{stamp}\n{hunks}",
        "a/ b/": f"--- a/{MOD}{stamp}\n+++ b/{MOD}{stamp}\n{hunks}",
        "diff -ruN OLD NEW": f"diff -ruN old/{MOD} new/{MOD}\n--- old/{MOD}{stamp}\n+++ new/{MOD}{stamp}\n{hunks}",
        "git --no-prefix": f"diff --git {MOD} {MOD}\nindex 1234567..89abcde 100644\n--- {MOD}\n+++ {MOD}\n{hunks}",
    }


@pytest.mark.parametrize("form", ["quilt", "X.orig", "-p0", "a/ b/", "diff -ruN OLD NEW", "git --no-prefix"])
def test_a_diff_of_another_tool_is_imported_as_git_s_with_its_prefixes(pack3, tmp_path, form):  # noqa: F811
    """found by a fresh user: quilt's patch was refused ('+++ image/X' names another file than '--- image.orig/X'), as
    was one of a file copied to X.orig; a -p0 diff went into the pack as 'diff --git X X', which git am (-p1) and
    quilt push apply to another file than the engine does, and so did one of git diff --no-prefix; diff -ruN OLD NEW
    was refused as a rename (git am reads it -p1). Each is now the patch git format-patch makes of the same
    change, and git apply -p1 of it changes the file the engine changes."""
    builder, clean = pack3
    mail = builder.base / "in.patch"
    mail.write_text(HEAD + _forms(tmp_path)[form])
    import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    got = load_pack(builder.pack).fixes["imp"].patches[0].path.read_text()
    want = diff_body(mail_patch(tmp_path, TOP, MID))
    assert _bare(got.partition("\n---\n")[2]) == _bare(want)  # (diff -u writes no function name after @@)
    tree = tmp_path / "tree"
    (tree / "demo_pkg").mkdir(parents=True)
    (tree / MOD).write_text(TOP)
    git(tree, "init", "-q")
    (tmp_path / "fix.patch").write_text(got)
    git(tree, "apply", "-p1", str(tmp_path / "fix.patch"))
    assert (tree / MOD).read_text() == MID


def test_quilt_s_new_and_deleted_files_and_its_index_lines_between_files(tmp_path):
    """A quilt patch of three files (one changed, one new, one deleted), each under its 'Index:' line: the files the
    pack's reader finds, and git's form of it, with no 'Index:' line left. Line numbers stay the file's: a hunk's fault
    is named at its line in the file."""
    hunks = _hunks(tmp_path, "a\nb\nc\n", "a\nB\nc\n")
    text = (f"Subject: x\n\nIndex: d/pkg/mod.py\n{SEP}\n--- d.orig/pkg/mod.py\n+++ d/pkg/mod.py\n{hunks}"
            f"Index: d/pkg/new.py\n{SEP}\n--- /dev/null\n+++ d/pkg/new.py\n@@ -0,0 +1 @@\n+new\n"
            f"Index: d/pkg/gone.py\n{SEP}\n--- d.orig/pkg/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-old\n")
    files = parse_patch(text.encode(), "q.patch").files
    assert [(f.old_path, f.new_path) for f in files] == [("pkg/mod.py", "pkg/mod.py"), (None, "pkg/new.py"),
                                                         ("pkg/gone.py", None)]
    body = diff_body(text)
    assert "Index:" not in body and SEP not in body
    assert body.startswith("diff --git a/pkg/mod.py b/pkg/mod.py\n--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@")
    assert "diff --git a/pkg/new.py b/pkg/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/pkg/new.py\n" in body
    assert "diff --git a/pkg/gone.py b/pkg/gone.py\ndeleted file mode 100644\n--- a/pkg/gone.py\n+++ /dev/null\n" in body
    lines = text.split("\n")
    at = lines.index("+B") + 1
    with pytest.raises(PatchParseError) as exc:
        parse_patch("\n".join(lines[:at - 1] + ["+B", "+C"] + lines[at:]).encode(), "q.patch")
    assert f"q.patch:{at + 2}: the hunk that starts at line 7 has more lines than its header '@@ -1,3 +1,3 @@' " \
        f"states (3 pre-image and 3 post-image lines): line {at + 2} is one post-image line past them" in str(exc.value)


def test_a_quilt_patch_of_two_trees_is_not_guessed(tmp_path):
    """quilt names one tree's folder; a patch whose sections name two (d.orig/ d/, e.orig/ e/) is no quilt patch
    whose folder can be told: read as it stands, its names differ and it is refused at the line, not rewritten, with
    the forms a plain diff may take (it said to declare a rename with git diff -M, which a plain diff cannot)."""
    hunks = _hunks(tmp_path, "a\nb\nc\n", "a\nB\nc\n")
    text = (f"--- d.orig/pkg/mod.py\n+++ d/pkg/mod.py\n{hunks}"
            f"--- e.orig/pkg/two.py\n+++ e/pkg/two.py\n{hunks}")
    with pytest.raises(PatchParseError) as exc:
        parse_patch(text.encode(), "q.patch")
    assert "q.patch:2: '+++ d/pkg/mod.py' names another file than '--- d.orig/pkg/mod.py'" in str(exc.value), exc.value
    assert "the same two in every section" in str(exc.value) and "git diff -M" not in str(exc.value)  # (no rename)


def test_a_pack_patch_without_git_s_prefixes_is_stale_to_format_and_exported_with_them(pack3, tmp_path):  # noqa: F811
    """A pack patch in git diff --no-prefix's form ('diff --git X X', '--- X'): the engine changes X, git am and
    patch -p1 of the exported series X less its first folder. Its deterministic form (what format writes and format
    --check holds it to) has a/ and b/, and git am of the series exported then changes X."""
    import re as _re

    from fixpack.exchange import export

    builder, clean = pack3
    fix = load_pack(builder.pack).fixes["a"]
    path = fix.patches[0].path
    text = path.read_text()
    bare = _re.sub(r"(?m)^(diff --git )a/(\S+) b/(\S+)$", r"\1\2 \3", text)
    bare = _re.sub(r"(?m)^(---|\+\+\+) [ab]/", r"\1 ", bare)
    assert bare != text and "a/" not in bare.partition("\n---\n")[2].split("@@")[0]
    path.write_text(bare)
    assert normalize_text(fix, bare) == text  # what format writes, and what format --check holds it to
    path.write_text(text)
    out = export(builder.pack, "p1", (), tmp_path / "series")
    repo = tmp_path / "repo"
    (repo / "demo_pkg").mkdir(parents=True)
    (repo / MOD).write_text(clean.joinpath(MOD).read_text())
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=A", "-c", "user.email=a@b", "commit", "-qm", "release")
    git(repo, "-c", "user.name=A", "-c", "user.email=a@b", "am", "-q", *[str(p) for p in out if p.name != "series"])
    assert "ten\n" in (repo / MOD).read_text() and "fifty\n" in (repo / MOD).read_text()


@pytest.mark.parametrize(("old_time", "new_time", "want"), [
    ("2026-12-06 10:00:00.000000000 +0000", "2026-12-06 10:05:00.000000000 +0000", ("pkg/x.py", "pkg/x.py")),
    ("", "", ("pkg/x.py", "pkg/x.py")),  # (-p0, no times)
    ("1970-01-01 00:00:00.000000000 +0000", "2026-12-06 10:05:00.000000000 +0000", (None, "pkg/x.py")),
    ("1969-12-31 19:00:00.000000000 -0500", "2026-12-06 10:05:00.000000000 +0000", (None, "pkg/x.py")),
])
def test_a_plain_hunk_filling_an_empty_file_creates_it_only_at_the_epoch(tmp_path, old_time, new_time, want):
    """found by a fresh user: a plain diff's lone '@@ -0,0 +1 @@' hunk was read as creating its file whatever its
    '---' line said, so one filling a file the release has empty (an __init__.py) was refused on the chain ('exists
    already'), though git apply and patch fill it. diff -N writes a missing side at the epoch (in any zone); only that
    side, or /dev/null, is a file that is not there."""
    tabs = (f"\t{old_time}" if old_time else "", f"\t{new_time}" if new_time else "")
    text = f"--- a/pkg/x.py{tabs[0]}\n+++ b/pkg/x.py{tabs[1]}\n@@ -0,0 +1 @@\n+x = 1\n"
    (f,) = parse_patch(text.encode(), "p.patch").files
    assert (f.old_path, f.new_path) == want
    body = diff_body(text)
    assert ("new file mode 100644\n--- /dev/null\n" in body) == (want[0] is None), body


@pytest.mark.parametrize("epoch", [False, True])
def test_a_plain_hunk_emptying_a_file_deletes_it_only_at_the_epoch(tmp_path, epoch):
    """found by a fresh user: diff -ruN of a file emptied (both sides with real times) went into the pack as its
    deletion, and apply removed the file (a package's __init__.py: the package became a namespace package); git apply
    and patch leave it there, empty."""
    when = "1970-01-01 00:00:00.000000000 +0000" if epoch else "2026-12-06 10:05:00.000000000 +0000"
    text = f"--- a/pkg/x.py\t2026-12-06 10:00:00.000000000 +0000\n+++ b/pkg/x.py\t{when}\n@@ -1 +0,0 @@\n-x = 1\n"
    (f,) = parse_patch(text.encode(), "p.patch").files
    assert (f.old_path, f.new_path) == (("pkg/x.py", None) if epoch else ("pkg/x.py", "pkg/x.py"))
    assert ("deleted file mode 100644\n" in diff_body(text)) == epoch


@pytest.mark.parametrize(("path", "said"), [(MOD, "exists already"), ("demo_pkg/none.py", "no such file")])
def test_a_mail_refused_on_the_chain_names_no_patch_file_of_the_pack(pack3, tmp_path, path, said):  # noqa: F811
    """found by a fresh user: a mail creating a file the chain has refused as 'exists already (the patch creates it;
    its file section is at PACK/fixes/NEW/0001-....patch:14)', a file import never wrote; a second one the same in
    'no such file (its file section is at ...)', a plain hunk filling a file the release lacks. The mail is named (at
    its line of the file given), no patch of the pack."""
    from fixpack.errors import ConflictError

    builder, clean = pack3
    mail = builder.base / "in.patch"
    old = "/dev/null" if path == MOD else f"a/{path}"
    mail.write_text(HEAD + f"--- {old}\n+++ b/{path}\n@@ -0,0 +1 @@\n+x = 1\n")
    with pytest.raises(ConflictError) as exc:
        import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    text = str(exc.value)
    assert text.startswith(f"{mail}:1: the mail there: patch 1 of imp") and said in text, text
    assert "fixes/imp" not in text and "()" not in text and not (builder.pack / "fixes/imp").exists(), text


def test_diff_s_command_line_above_a_plain_diff_is_the_diff_s_not_the_message(pack3, tmp_path):  # noqa: F811
    """found by a fresh user: the 'diff -ruN a/X b/X' line diff -r writes above a file's section became the fix's
    description (fix.toml's why, and the patch's message above its trailers); git mailinfo puts it in the patch."""
    import tomllib

    builder, clean = pack3
    mail = builder.base / "in.patch"
    stamp = "\t2026-12-06 10:00:00.000000000 +0000"
    mail.write_text("From: A <a@example.org>\nSubject: Say fifty-five\n\n"
                    f"diff -ruN a/{MOD} b/{MOD}\n--- a/{MOD}{stamp}\n+++ b/{MOD}{stamp}\n{_hunks(tmp_path, TOP, MID)}")
    import_mails(builder.pack, mail, "imp", "p1", roots={"demo": clean})
    got = load_pack(builder.pack).fixes["imp"].patches[0].path.read_text()
    assert "diff -ruN" not in got and "diff -ruN" not in (builder.pack / "fixes/imp/fix.toml").read_text(), got
    assert "diff -ruN" not in tomllib.loads((builder.pack / "fixes/imp/fix.toml").read_text()).get("why", "")


def test_git_s_no_prefix_form_of_a_name_with_a_space_is_read_as_its_prefixed_form(tmp_path):
    """A fresh user: git format-patch --no-prefix of a file whose folder holds a space ('diff --git vllm/my dir/x.py
    vllm/my dir/x.py', '--- vllm/my dir/x.py<TAB>') was refused by unidiff ('Target without source'), with no line; a
    renamed one too. Such a line is split as git splits it (the same name twice at its middle; a rename's names from
    its 'rename from' / 'rename to' lines), so the patch reads as git's default form of the same commits does, and
    import writes that form."""
    repo = tmp_path / "r"
    (repo / "pkg dir").mkdir(parents=True)
    (repo / "pkg dir/x.py").write_text("a\nb\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=A", "-c", "user.email=a@b", "commit", "-qm", "base")
    (repo / "pkg dir/x.py").write_text("a\nb\nc\n")
    git(repo, "-c", "user.name=A", "-c", "user.email=a@b", "commit", "-qam", "Change x")
    git(repo, "mv", "pkg dir/x.py", "pkg dir/y z.py")
    (repo / "pkg dir/y z.py").write_text("a\nb\nc\nd\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=A", "-c", "user.email=a@b", "commit", "-qm", "Rename x")
    for rev, want in (("HEAD~1", ("pkg dir/x.py", "pkg dir/x.py")), ("HEAD", ("pkg dir/x.py", "pkg dir/y z.py"))):
        bare = git(repo, "format-patch", "--stdout", "--no-prefix", "-1", rev)
        prefixed = git(repo, "format-patch", "--stdout", "-1", rev)
        assert f"diff --git {want[0]} {want[1]}\n" in bare, bare
        (f,) = parse_patch(bare.encode(), "bare.patch").files
        assert (f.old_path, f.new_path) == want
        assert parse_patch(bare.encode()).files == parse_patch(prefixed.encode()).files
        assert diff_body(bare) == diff_body(prefixed)
    # a rename whose line splits in two like names at its middle ('a b a b': 'a' to 'b a b'): its rename lines decide
    tie = "diff --git a b a b\nsimilarity index 90%\nrename from a\nrename to b a b\n--- a\t\n+++ b a b\t\n@@ -1 +1 @@\n-a\n+b\n"
    (f,) = parse_patch(tie.encode(), "tie.patch").files
    assert (f.old_path, f.new_path) == ("a", "b a b")
    # a name holding ' b/' is split as git splits it, but unidiff reads git's 'diff --git a/X b/X' line at its last
    # ' b/' (git apply takes it): refused, at the line unidiff stopped at, quoting the file's line, not the rewritten one
    b_in = "diff --git d/p b/q.py d/p b/q.py\n--- d/p b/q.py\t\n+++ d/p b/q.py\t\n@@ -1 +1 @@\n-p\n+P\n"
    with pytest.raises(PatchParseError) as exc:
        parse_patch(b_in.encode(), "b.patch")
    assert str(exc.value).startswith("b.patch:3: malformed patch: Target without source: +++ d/p b/q.py ("), exc.value
    # names no split makes the '---' / '+++' lines' (a space typed after one): left to the checks, refused at the line
    odd = "diff --git p q/x.py p q/x.py q\n--- p q/x.py\t\n+++ p q/x.py\t\n@@ -1 +1 @@\n-a\n+b\n"
    with pytest.raises(PatchParseError) as exc:
        parse_patch(odd.encode(), "odd.patch")
    assert str(exc.value).startswith("odd.patch:1: 'diff --git p q/x.py p q/x.py q' does not name the files its "
                                     "'---' and '+++' lines name"), exc.value


def test_a_quilt_section_after_git_s_is_said_as_such_not_as_an_undeclared_rename():
    """A fresh user: a format-patch mail with a quilt patch pasted after it (no mbox line between) was refused as
    "'diff --git' names two files ... regenerate with git diff -M" at a line with no 'diff --git': its section is a
    plain diff among git's, whose D.orig/X and D/X are read as git's two paths. Said so, with the ways on."""
    text = ("From: J <j@x.org>\nSubject: [PATCH] A mail\n\nText.\n---\ndiff --git a/pkg/x.py b/pkg/x.py\n--- a/pkg/x.py\n"
            "+++ b/pkg/x.py\n@@ -1 +1 @@\n-a\n+b\n-- \n2.39.5\n\n"
            f"Index: d/pkg/y.py\n{SEP}\n--- d.orig/pkg/y.py\n+++ d/pkg/y.py\n@@ -1 +1 @@\n-b\n+c\n")
    with pytest.raises(PatchParseError) as exc:
        parse_patch(text.encode(), "m.patch")
    assert str(exc.value).startswith("m.patch:18: a plain diff section ('---' / '+++', no 'diff --git' line) among git "
                                     "sections names two files ('d.orig/pkg/y.py', 'd/pkg/y.py')"), exc.value
    assert "git diff -M" not in str(exc.value) and "import the plain diff as a patch of its own" in str(exc.value)
