import re

import pytest
from conftest import make_diff

from fixpack.diff import diff_body, format_patch, parse_patch
from fixpack.errors import PatchParseError


def test_parse_header_and_kinds(tmp_path):
    diff = make_diff({"a.py": "x\n" * 20, "gone.py": "bye\n", "old.py": "same\n" * 10},
                     {"a.py": "x\n" * 19 + "y\n", "gone.py": None, "new.py": "hi\n", "old.py": None,
                      "moved.py": "same\n" * 10}, tmp_path)
    text = ("From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nFrom: a <a@b>\n"
            "Subject: [PATCH] do a thing\n\nBecause.\n\nUpstream-Status: Pending\n---\n" + diff)
    parsed = parse_patch(text.encode())
    assert parsed.header.subject == "do a thing"
    assert ("Upstream-Status", "Pending") in parsed.header.fields
    kinds = {fp.path: fp.kind for fp in parsed.files}
    assert kinds == {"a.py": "modify", "gone.py": "delete", "new.py": "add", "moved.py": "rename"}


def test_crlf_patch_is_refused_with_line():
    data = b"diff --git a/x b/x\n--- a/x\r\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
    with pytest.raises(PatchParseError) as exc:
        parse_patch(data, "p.patch")
    assert "p.patch:2" in str(exc.value) and "CRLF" in str(exc.value)


@pytest.mark.parametrize("path,word", [("/etc/passwd", "absolute"), ("../outside.py", "climbs out"),
                                       ("pkg/../../x.py", "climbs out")])
def test_escaping_paths_are_refused(path, word):
    data = f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n".replace("a//", "/").replace("b//", "/")
    with pytest.raises(PatchParseError) as exc:
        parse_patch(data.encode(), "p.patch")
    assert word in str(exc.value)


def test_a_dotdot_that_stays_inside_is_not_canonical_not_an_escape():
    """Found by a fresh user: ``vllm/v1/../v1/x.py`` was said to escape the target root; it stays inside, and is
    refused as a path git would not write (exit 2 all the same), with how git writes it."""
    data = b"--- a/vllm/v1/../v1/x.py\n+++ b/vllm/v1/../v1/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    with pytest.raises(PatchParseError) as exc:
        parse_patch(data, "p.patch")
    said = str(exc.value)
    assert "path 'vllm/v1/../v1/x.py' is not canonical: a '..' segment" in said and "climbs out" not in said, said
    assert "escapes" not in " ".join(str(p) for p in exc.value.problems)


def test_malformed_hunk_is_refused():
    data = b"--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n-a\n+b\n"
    with pytest.raises(PatchParseError) as exc:
        parse_patch(data, "bad.patch")
    assert "bad.patch:5:" in str(exc.value) and "starts at line 3 ends early" in str(exc.value)


def test_format_patch_is_deterministic(tmp_path):
    body = make_diff({"a.py": "1\n2\n"}, {"a.py": "1\n3\n"}, tmp_path) + "-- \n2.39.5\n"
    one = format_patch("Fix it", "Why it matters.", [("Upstream-Status", "Pending")], body)
    two = format_patch("Fix it", "Why it matters.", [("Upstream-Status", "Pending")], diff_body(one))
    assert one == two
    assert "index " not in one and "2.39.5" not in one and one.startswith("From 0000000")
    assert parse_patch(one.encode()).files[0].path == "a.py"


def test_lost_hunk_header_close_is_refused(tmp_path):
    diff = make_diff({"a.py": "".join(f"{i}\n" for i in range(30))},
                     {"a.py": "".join(f"{i}\n" for i in range(30)).replace("15\n", "fifteen\n")}, tmp_path)
    broken = diff.replace(" @@\n", "\n", 1)  # "@@ -13,7 +13,7" without its closing @@
    with pytest.raises(PatchParseError) as exc:
        parse_patch(broken.encode(), "p.patch")
    assert "p.patch:5: malformed hunk header" in str(exc.value)


def test_lost_hunk_line_is_refused(tmp_path):
    before = "".join(f"{i}\n" for i in range(60))
    after = before.replace("5\n", "five\n").replace("50\n", "fifty\n")
    diff = make_diff({"a.py": before}, {"a.py": after}, tmp_path)
    lines = diff.splitlines(keepends=True)
    second = max(i for i, ln in enumerate(lines) if ln.startswith("@@"))
    broken = "".join(lines[:second] + lines[second + 1:])  # the second hunk's header is gone
    with pytest.raises(PatchParseError) as exc:
        parse_patch(broken.encode(), "p.patch")
    said = str(exc.value)  # (the lines of the lost header's hunk run on past the first hunk: both readings said)
    assert f"p.patch:{second + 1}: the hunk that starts at line " in said and "has more lines than its header" in said
    assert f"or the @@ line of a hunk that starts at line {second + 1} was lost" in said, said


def test_wrong_hunk_counts_are_refused_with_line(tmp_path):
    diff = make_diff({"a.py": "1\n2\n3\n"}, {"a.py": "1\ntwo\n3\n"}, tmp_path)
    broken = diff.replace("@@ -1,3 +1,3 @@", "@@ -1,5 +1,5 @@")
    with pytest.raises(PatchParseError, match="ends early"):
        parse_patch(broken.encode(), "p.patch")


def test_a_hunk_header_whose_sides_do_not_add_up_is_refused_at_its_line(tmp_path):
    """Found by a fresh user: a hunk placed by its pre-image start is put back (re-apply's check, revert) by its
    post-image start; a wrong '+' start passed check, lock and apply, then re-apply said 'tampered' and revert could
    not undo it. The '+' start must be the '-' start plus the file's earlier hunks' line changes (a start with count
    0 names the line before), and hunks come in order. git diff's own output, insertions and deletions, is taken."""
    before = "".join(f"{i}\n" for i in range(1, 41))
    after = before.replace("3\n", "3\nnew a\nnew b\n", 1).replace("20\n", "").replace("35\n", "35\nlast\n")
    diff = make_diff({"a.py": before}, {"a.py": after}, tmp_path)
    headers = re.findall(r"^@@ .* @@", diff, flags=re.M)
    assert len(headers) == 3, headers
    parse_patch(diff.encode(), "p.patch")  # as git wrote it
    line = diff.split("\n").index(headers[1]) + 1
    m = re.match(r"@@ -(\d+),(\d+) \+(\d+),(\d+) @@", headers[1])
    assert m
    off_by_one = diff.replace(headers[1], f"@@ -{m[1]},{m[2]} +{int(m[3]) + 1},{m[4]} @@")
    with pytest.raises(PatchParseError, match=rf"p.patch:{line}: hunk header .* does not add up: its post-image start "
                                              rf"{int(m[3]) + 1} is not its pre-image start {m[1]} plus the line "
                                              rf"changes of the file's hunks before it \(\+2\)"):
        parse_patch(off_by_one.encode(), "p.patch")
    swapped = diff.replace(headers[1], "@@ -1,2 +3,2 @@")
    first = diff.split("\n").index(headers[0]) + 1
    with pytest.raises(PatchParseError, match=rf"p.patch:{line}: .* starts at pre-image line 1, inside or before the "
                                              rf"file's previous hunk \(the one at patch line {first}: "):
        parse_patch(swapped.encode(), "p.patch")
    # a side of lines starting at line 0 (only an empty side may): refused at its line, either side
    m0 = re.match(r"@@ -(\d+),(\d+) \+(\d+),(\d+) @@", headers[0])
    assert m0 and int(m0[2]) > 0
    for zero in (f"@@ -0,{m0[2]} +0,{m0[4]} @@", f"@@ -{m0[1]},{m0[2]} +0,{m0[4]} @@"):
        with pytest.raises(PatchParseError, match=rf"p.patch:{first}: hunk header .* does not add up: a side of \d+ "
                                                  rf"lines cannot start at line 0"):
            parse_patch(diff.replace(headers[0], zero).encode(), "p.patch")
    created = make_diff({}, {"n.py": "x\n"}, tmp_path / "new")
    assert "@@ -0,0 +1 @@" in created
    parse_patch(created.encode(), "n.patch")  # an empty pre-image side starts at 0, as git writes it


def test_non_utf8_bytes_in_an_added_line_are_refused():
    data = (b"diff --git a/p/m.py b/p/m.py\n--- a/p/m.py\n+++ b/p/m.py\n@@ -1,2 +1,2 @@\n line 1\n-line 2\n"
            b"+caf\xe9\n")
    with pytest.raises(PatchParseError) as exc:
        parse_patch(data, "x.patch")
    assert "x.patch:7: an added line holds bytes that are not UTF-8" in str(exc.value)


@pytest.mark.parametrize("twice", ["+++ b/pkg/mod.py", "--- a/pkg/mod.py"])
def test_a_second_header_line_for_one_file_is_refused(twice):
    """Two '+++' (or '---') lines for one file: unidiff kept the last one silently; git apply refuses it. A
    plain diff's next file (a '---' after a hunk) is still a new section."""
    text = (f"diff --git a/pkg/mod.py b/pkg/mod.py\n--- a/pkg/mod.py\n+++ b/pkg/mod.py\n{twice}\n"
            "@@ -1,2 +1,2 @@\n a\n-b\n+c\n")
    with pytest.raises(PatchParseError, match=rf":4: a second '{re.escape(twice[:3])}' line for one file: "):
        parse_patch(text.encode(), "x.patch")
    two_files = ("--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
                 "--- a/pkg/two.py\n+++ b/pkg/two.py\n@@ -1 +1 @@\n-x\n+y\n")
    assert [fp.path for fp in parse_patch(two_files.encode(), "y.patch").files] == ["pkg/mod.py", "pkg/two.py"]


def test_a_file_section_with_one_of_its_two_path_lines_is_refused_as_git_apply_refuses_it():
    """Found in a review: a mail whose diff lost its '+++' line was taken (the hunk read against a file with no
    post-image path), and a conflict report on it gave negative line numbers; a lost '---' line was said as a
    rename typo against an empty path. Now git apply's rule ("git diff header lacks filename information"): in a
    'diff --git' section one name without the other is refused at the lone line, unless the section creates the
    file (no pre-image name needed) or deletes it (no post-image name), /dev/null naming none; neither line is
    fine (the 'diff --git' line names the file). A fresh reviewer found the first rule too strict for those, and
    a plain diff's first file never checked at all: a '---' / 'index' / '+++' header there hid a lost '@@' line
    (a hunk dropped in silence). A plain diff needs '---' then '+++' for every file, the first included."""
    head = "diff --git a/pkg/mod.py b/pkg/mod.py\nindex 94c99a3..e661339 100644\n"
    hunk = "@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
    refused = {
        "git, no '+++'": (head + "--- a/pkg/mod.py\n" + hunk, 3, "a '---' line with no '+++' line after it"),
        "git, no '---'": (head + "+++ b/pkg/mod.py\n" + hunk, 3, "a '+++' line with no '---' line before it"),
        "git, swapped": (head + "+++ b/pkg/mod.py\n--- a/pkg/mod.py\n" + hunk, 4,
                         "a '---' line after the file's '+++' line"),
        "git, second file": (head + "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n" + hunk + "diff --git a/pkg/n.py b/pkg/n.py\n"
                             "--- a/pkg/n.py\n" + hunk, 10, "a '---' line with no '+++' line after it"),
        "git, mode change": ("diff --git a/m.sh b/m.sh\nold mode 100644\nnew mode 100755\n--- a/m.sh\n", 4,
                             "a '---' line with no '+++' line after it"),
        "plain, first file": ("--- a/x.py\n" + hunk + "--- a/y.py\n+++ b/y.py\n" + hunk, 1,
                              "a '---' line with no '+++' line after it"),
        "plain, no '---'": ("+++ b/x.py\n" + hunk, 1, "a '+++' line with no '---' line before it"),
        "plain, second file": ("--- a/x.py\n+++ b/x.py\n" + hunk + "--- a/y.py\n" + hunk, 7,
                               "a '---' line with no '+++' line after it"),
        "plain, index inside": ("--- a/x.py\nindex 1..2\n+++ b/x.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n a\n-b\n+c\n", 2,
                                "'index 1..2' between a file's '---' and '+++' lines"),
        # a second reviewer: /dev/null where no mode line says new / deleted (git reads a file named dev/null), a
        # '+++' line past a hunk's counts (its added line lost), a plain section above the first 'diff --git'
        "git, '--- /dev/null' not new": ("diff --git a/t.txt b/t.txt\nindex 0000000..3333333\n--- /dev/null\n"
                                         "@@ -0,0 +1 @@\n+n\n", 3, "'--- /dev/null' in a section with no 'new file "
                                                                  "mode' line"),
        "git, '+++ /dev/null' not deleted": ("diff --git a/g.py b/g.py\nindex 1..0\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n",
                                             3, "'+++ /dev/null' in a section with no 'deleted file mode' line"),
        "git, new file named on '---'": ("diff --git a/n.py b/n.py\nnew file mode 100644\nindex 0..1\n--- a/n.py\n"
                                         "+++ b/n.py\n@@ -0,0 +1 @@\n+x\n", 4, "a new file's '---' line names a file"),
        "git, '+++' past a hunk": (head + "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1,2 +1,1 @@\n a\n-- old\n"
                                   "+++ b/pkg/mod.py\n@@ -3 +3 @@\n-b\n+B\n", 8, "'+++ b/pkg/mod.py' after the "
                                                                                 "file's hunks, outside any hunk"),
        "plain above git": ("--- a/f3.txt\n+++ b/f3.txt\n@@ -1 +1 @@\n-x\n+y\n" + head + hunk, 1,
                            "a file section above the first 'diff --git' line"),
        # a fresh user: both lines lost, the hunk right under 'diff --git' (check and apply took it; git am refused
        # the export); with an 'index' line between, git takes it too, and so does this parser (below)
        "git, both lines lost": (head.split("\n")[0] + "\n" + hunk, 2, "a hunk right under the 'diff --git' line"),
        "plain above git, its @@ lost": ("--- a/f3.txt\n+++ b/f3.txt\n x\n-y\n+z\n" + head + hunk, 1,
                                         "a file section above the first 'diff --git' line"),
    }
    for what, (text, line, says) in refused.items():
        with pytest.raises(PatchParseError) as exc:
            parse_patch(text.encode(), "x.patch")
        assert str(exc.value).startswith(f"x.patch:{line}: {says}"), (what, str(exc.value))
    taken = {
        "git, neither": (head + hunk, ("pkg/mod.py", "pkg/mod.py")),
        "deleted, '---' only": ("diff --git a/g.py b/g.py\ndeleted file mode 100644\nindex 1..0\n--- a/g.py\n"
                                "@@ -1 +0,0 @@\n-x\n", ("g.py", None)),
        "deleted, '+++ /dev/null' only": ("diff --git a/g.py b/g.py\ndeleted file mode 100644\nindex 1..0\n"
                                          "+++ /dev/null\n@@ -1 +0,0 @@\n-x\n", ("g.py", None)),
        "new, '--- /dev/null' only": ("diff --git a/n.py b/n.py\nnew file mode 100644\nindex 0..1\n--- /dev/null\n"
                                      "@@ -0,0 +1 @@\n+x\n", (None, "n.py")),
        "new, '+++' only": ("diff --git a/n.py b/n.py\nnew file mode 100644\nindex 0..1\n+++ b/n.py\n"
                            "@@ -0,0 +1 @@\n+x\n", (None, "n.py")),
        "a hunk's lines reading '--- x', '+++ y'": (head + "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1,2 +1,2 @@\n a\n"
                                                    "--- x\n+++ y\n", ("pkg/mod.py", "pkg/mod.py")),
    }
    for what, (text, paths) in taken.items():
        (fp,) = parse_patch(text.encode(), "z.patch").files
        assert (fp.old_path, fp.new_path, len(fp.hunks)) == (*paths, 1), what


def test_a_plus_path_that_differs_without_rename_headers_is_refused():
    """A typo in '+++' of a plain diff would read as a rename and delete the upstream file: bad input."""
    text = ("--- a/pkg/mod.py\n+++ b/pkg/other.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n")
    with pytest.raises(PatchParseError, match=r":2: '\+\+\+ b/pkg/other.py' names another file.*rename"):
        parse_patch(text.encode(), "x.patch")
    git_rename = ("diff --git a/pkg/mod.py b/pkg/other.py\nsimilarity index 50%\nrename from pkg/mod.py\n"
                  "rename to pkg/other.py\n--- a/pkg/mod.py\n+++ b/pkg/other.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n")
    assert parse_patch(git_rename.encode(), "y.patch").files[0].kind == "rename"


@pytest.mark.parametrize("git_line", ["diff --git a/pkg/mod.py b/pkg/mod.py ", "diff --git a/pkg/mod.py b/pkg/other.py x"])
def test_a_diff_git_line_whose_names_hold_a_space_names_the_files_of_its_side_lines(git_line):
    """A fresh user: a space typed after 'b/X' on the 'diff --git' line was read by unidiff as another file ("malformed
    patch: Target without source", at the '+++' line). Names that hold a space are held to the '---' / '+++' lines
    (split at some space), and refused at the 'diff --git' line where no split names their files; real names with
    spaces, a new file's among them, are read."""
    text = f"{git_line}\nindex 1111111..2222222 100644\n--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
    with pytest.raises(PatchParseError, match=r"^x.patch:1: .* does not name the files its '---' and '\+\+\+' lines name "
                                              r"\('pkg/mod.py', 'pkg/mod.py'; a space before or after a name\?\)"):
        parse_patch(text.encode(), "x.patch")
    spaced = ("diff --git a/pkg/my mod.py b/pkg/my mod.py\nindex 1111111..2222222 100644\n--- a/pkg/my mod.py\t\n"
              "+++ b/pkg/my mod.py\t\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n")
    assert parse_patch(spaced.encode(), "y.patch").files[0].new_path == "pkg/my mod.py"
    new = ("diff --git a/pkg/new mod.py b/pkg/new mod.py\nnew file mode 100644\nindex 0000000..2222222\n--- /dev/null\n"
           "+++ b/pkg/new mod.py\n@@ -0,0 +1 @@\n+c\n")
    assert parse_patch(new.encode(), "z.patch").files[0].new_path == "pkg/new mod.py"


RENAME = ("diff --git a/pkg/mod.py b/pkg/other.py\nsimilarity index 50%\nrename from pkg/mod.py\nrename to pkg/other.py\n"
          "--- a/pkg/mod.py\n+++ b/pkg/other.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n")


@pytest.mark.parametrize("header,line,side,applies", [
    ("rename to pkg/other.py", 4, "b", "write the renamed file to 'pkg/evil.py', fixpack to 'pkg/other.py'"),
    ("rename from pkg/mod.py", 3, "a", "rename 'pkg/evil.py', fixpack 'pkg/mod.py'")])
def test_a_rename_line_that_disagrees_with_the_diff_git_line_is_refused(header, line, side, applies):
    """'rename to X' under 'diff --git a/M b/Y' was accepted: the engine wrote Y where git apply writes X (and
    read M where git renames the file 'rename from' names). Refused at the rename line, exit 2."""
    word = header.rsplit(" ", 1)[0]
    for text in (RENAME, RENAME.split("--- ")[0].replace("50%", "100%")):  # with a hunk, and a pure rename
        with pytest.raises(PatchParseError) as exc:
            parse_patch(text.replace(header, f"{word} pkg/evil.py").encode(), "x.patch")
        want = "pkg/other.py" if side == "b" else "pkg/mod.py"
        assert str(exc.value).startswith(f"x.patch:{line}: '{word} pkg/evil.py' names another file than its 'diff "
                                         f"--git' line's {side}-path ('{want}', line 1): git apply would {applies}")
        assert exc.value.exit_code == 2 and "make the two lines name the same file" in exc.value.problems[0].hint


@pytest.mark.parametrize("header,line,applies", [
    ("rename to pkg/other.py", 4, "write the renamed file to 'pkg/other.py ', fixpack to 'pkg/other.py'"),
    ("rename from pkg/mod.py", 3, "rename 'pkg/mod.py ', fixpack 'pkg/mod.py'")])
def test_a_rename_line_with_a_trailing_space_shows_it(header, line, applies):
    """Found by a fresh user: a rename line whose only difference was a trailing space printed both names alike
    ("would write the renamed file to x.py , fixpack to x.py"). The names are quoted, and the difference said."""
    with pytest.raises(PatchParseError) as exc:
        parse_patch(RENAME.replace(header, header + " ").encode(), "x.patch")
    said = exc.value.args[0]  # (str() adds what to do)
    assert said.startswith(f"x.patch:{line}: '{header} ' names another file than its 'diff --git' line's"), said
    assert said.endswith(f"git apply would {applies} (the two differ only in white space at an end)"), said
    assert exc.value.exit_code == 2


def test_a_rename_whose_lines_agree_is_read_as_one():
    pure = RENAME.split("--- ")[0].replace("50%", "100%")
    quoted = ('diff --git a/pkg/mod.py "b/pkg/\\303\\274.py"\nsimilarity index 100%\nrename from pkg/mod.py\n'
              'rename to "pkg/\\303\\274.py"\n')  # git's quoting of a path with a byte past ASCII (pkg/\u00fc.py)
    for text, new in ((RENAME, "pkg/other.py"), (pure, "pkg/other.py"), (quoted, "pkg/\u00fc.py")):
        (fp,) = parse_patch(text.encode(), "y.patch").files
        assert (fp.kind, fp.old_path, fp.new_path) == ("rename", "pkg/mod.py", new)


def test_a_copy_and_an_undeclared_rename_are_refused():
    """'copy from/to' (git diff -C) read as a rename, deleting the copied file (git keeps it); a 'diff --git a/M
    b/Y' with no rename lines (and no ---/+++ lines to catch it) read as a rename too, where git apply refuses."""
    copy = RENAME.replace("rename ", "copy ")
    with pytest.raises(PatchParseError, match=r"^x.patch:3: 'copy from pkg/mod.py': a copy \(git diff -C\) is not "
                                              r"supported: it would be read as a rename, and the copied file deleted"):
        parse_patch(copy.encode(), "x.patch")
    undeclared = "diff --git a/pkg/mod.py b/pkg/other.py\nold mode 100644\nnew mode 100755\n"
    with pytest.raises(PatchParseError, match=r"^x.patch:1: 'diff --git' names two files \('pkg/mod.py', "
                                              r"'pkg/other.py'\) but no 'rename from' and 'rename to' lines"):
        parse_patch(undeclared.encode(), "x.patch")
    with pytest.raises(PatchParseError, match=r"^x.patch:1: 'diff --git' names two files"):  # one of the two
        parse_patch(RENAME.replace("rename from pkg/mod.py\n", "").encode(), "x.patch")


@pytest.mark.parametrize("lines", [["old mode 100644", "new mode 100799"], ["old mode 100644", "new mode 160000"],
                                   ["old mode 100644", "new mode 777"], ["old mode 100644", "new mode 104755"],
                                   ["old mode 100644", "new mode １００７５５"]])
def test_a_mode_git_writes_for_no_file_is_refused_at_its_line(lines):
    """Found by a fresh user: a non-octal digit was an internal error (exit 1) at lock and import, and 160000, 777
    or a set-id mode was applied as read (the file left mode 000, or world-writable)."""
    data = ("diff --git a/x b/x\n" + "\n".join(lines) + "\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n").encode()
    with pytest.raises(PatchParseError) as exc:
        parse_patch(data, "p.patch")
    assert str(exc.value).startswith(f"p.patch:3: new mode {lines[1][9:]!r}: no mode git writes for a file"), exc.value
    ok = b"diff --git a/x b/x\nold mode 100644\nnew mode 100755\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
    assert parse_patch(ok, "p.patch").files[0].new_mode == "100755"


def test_hunk_numbers_are_ascii_digits_as_git_reads_them():
    """Found by a fresh user: fullwidth digits (Python's \\d and int() take them) were read as line numbers; git calls
    such a patch corrupt."""
    with pytest.raises(PatchParseError):
        parse_patch("--- a/x\n+++ b/x\n@@ -１ +1 @@\n-a\n+b\n".encode(), "p.patch")


def test_a_no_newline_marker_in_another_language_is_taken_as_git_takes_it():
    """Found by a fresh user: GNU diff writes the marker in the user's language; unidiff knew the English words
    only and dropped the line, so the fix applied as if the file ended in a newline (git apply takes any '\\ ')."""
    english = b"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n\\ No newline at end of file\n"
    german = english.replace(b"No newline at end of file", b"Kein Zeilenumbruch am Dateiende.")
    ours, theirs = parse_patch(english, "p.patch").files[0].hunks[0], parse_patch(german, "p.patch").files[0].hunks[0]
    assert theirs.new_lines == ours.new_lines == ("b",)


@pytest.mark.parametrize("plain", [False, True])
def test_a_second_section_for_a_file_is_refused_at_its_line(plain):
    """Found by a fresh user: two sections for one file (git apply applies them in turn) reached the applier, which
    places a file's hunks once, and failed as a conflict (exit 4) on a tree the patch fits; now the patch is bad input
    (exit 2) at the second section's line."""
    one = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n" if plain else "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
    other = one.replace("-1 +1", "-3 +3").replace("-a\n+b", "-c\n+d")
    with pytest.raises(PatchParseError, match=r"^p\.patch:(6|7): a second section for 'x' \(the first at line (1|2)\)"):
        parse_patch((one + other).encode(), "p.patch")
    renamed = "diff --git a/y b/x\nsimilarity index 90%\nrename from y\nrename to x\n"
    with pytest.raises(PatchParseError, match=r"^p\.patch:7: a second section for 'x'"):
        parse_patch((one if not plain else one.replace("--- a/x", "diff --git a/x b/x\n--- a/x", 1)).encode()
                    + renamed.encode(), "p.patch")
    assert len(parse_patch((one + other.replace("x", "z")).encode(), "p.patch").files) == 2


@pytest.mark.parametrize("header", ["@@ -0,0 +0,0 @@", "@@ -1,0 +1,0 @@"])
def test_a_hunk_of_no_lines_is_refused_at_its_header(header):
    """Found by a fresh user: the error named the line after it (unidiff's "Hunk diff line expected"), or, alone in its
    section, 'the file section for None' (unidiff took a hunk of no post-image lines for a deleted file)."""
    for rest in ("", "@@ -3 +3 @@\n-c\n+d\n"):
        data = f"diff --git a/x b/x\n--- a/x\n+++ b/x\n{header}\n{rest}".encode()
        with pytest.raises(PatchParseError, match=r"^p\.patch:4: hunk header '@@ -[01],0 \+[01],0 @@' does not add up: "
                                                  r"a hunk of no lines"):
            parse_patch(data, "p.patch")


@pytest.mark.parametrize("name", ["evil\u202eyp.py", '"a\\tb.py"', '"e\\033[2Jx.py"', "zw\u200bsp.py", "rl\u2067m.py",
                                  "ls\u2028x.py", "ps\u2029x.py"])
def test_a_path_with_a_control_or_formatting_character_is_refused(name):
    """Found by a fresh user: a new file named with a right-to-left override (or a zero-width space) was taken; its
    name shows as another in every report, lock and SBOM that prints it (the Trojan Source trick, on a path); an escape
    (git quotes it as \\033) would drive the terminal a report is printed on."""
    a, b = (f'"{p}/{name[1:]}' if name.startswith('"') else f"{p}/{name}" for p in "ab")
    data = f"diff --git {a} {b}\nnew file mode 100644\n--- /dev/null\n+++ {b}\n@@ -0,0 +1 @@\n+x\n".encode()
    with pytest.raises(PatchParseError, match=r"^p\.patch:[14]: path .* is not canonical: a control or formatting "
                                              r"character, U\+[0-9A-F]{4}") as exc:  # (4: a separator is white space)
        parse_patch(data, "p.patch")
    assert exc.value.problems[0].hint == "name the file without it"
    fine = data.decode().replace(name.strip('"'), "ok_\u00e9.py").replace('"', "").encode()
    assert parse_patch(fine, "p.patch").files[0].new_path == "ok_\u00e9.py"


def test_a_path_with_a_byte_that_is_not_utf8_is_refused():
    """Found by a fresh user: a git-quoted path with an octal escape that is not UTF-8 (\\377) was applied, making a
    file whose name is not UTF-8."""
    data = b'diff --git "a/ev\\377il.py" "b/ev\\377il.py"\nnew file mode 100644\n--- /dev/null\n+++ "b/ev\\377il.py"\n' \
           b"@@ -0,0 +1 @@\n+x\n"
    with pytest.raises(PatchParseError, match=r"^p\.patch:1: path .* is not canonical: a byte that is not UTF-8"):
        parse_patch(data, "p.patch")


@pytest.mark.parametrize("extra", [" 4\n", "+four\n", "-4\n"])
def test_a_hunk_one_line_longer_than_its_count_says_so_with_its_header(extra):
    """Found in a closing note: a hunk whose @@ counts are one line too low was refused as "unexpected line outside
    a hunk". Now: at the line past it, the hunk has more lines than its header states, with the @@ line, its counts
    and how many lines follow (the last hunk of the file, and one before another hunk alike)."""
    head = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n 1\n-2\n+two\n"
    for after in ("", "@@ -9 +9 @@\n-9\n+nine\n"):
        with pytest.raises(PatchParseError) as exc:
            parse_patch((head + extra + after).encode(), "p.patch")
        said = str(exc.value)
        assert said.startswith("p.patch:8: the hunk that starts at line 4 has more lines than its header "
                               "'@@ -1,2 +1,2 @@' states (2 pre-image and 2 post-image lines): 1 more line follows it "
                               "(fix the @@ line's numbers"), said
        assert "outside a hunk" not in said and "was lost" not in said, said


@pytest.mark.parametrize("extra", ["+x\n\\ No newline at end of file\n", "\n", "\n@@ -9 +9 @@\n-9\n+nine\n",
                                   "\ndiff --git a/b.py b/b.py\n--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-x\n+y\n",
                                   " 4\n\n\n"])
def test_the_lines_past_a_hunks_count_are_its_hunk_lines_a_marker_not_counted_a_blank_one_counted(extra):
    """A fresh user: one line past the count followed by a '\\ No newline' marker was said as "2 more lines follow it
    ... or the @@ line ... was lost" (the marker belongs to the line before it); a blank line past the count (a context
    line whose space an editor stripped) before another hunk or file was "unexpected line outside a hunk: ''". Both
    are one more line than the header states; blank lines that end the patch are not the hunk's."""
    head = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n 1\n-2\n+two\n"
    if extra == "\n":  # a blank line that ends the patch: an editor's, taken as before
        assert parse_patch((head + extra).encode(), "p.patch")
        return
    with pytest.raises(PatchParseError) as exc:
        parse_patch((head + extra).encode(), "p.patch")
    said = str(exc.value)
    assert said.startswith("p.patch:8: the hunk that starts at line 4 has more lines than its header "
                           "'@@ -1,2 +1,2 @@' states (2 pre-image and 2 post-image lines): 1 more line follows it "
                           "(fix the @@ line's numbers"), said


@pytest.mark.parametrize("extra", ["\nsome note\n", "\n-- \n2.43.0\n"])
def test_a_blank_line_then_text_after_a_hunk_is_text_after_the_diff(extra):
    """A fresh user: a blank line after a complete hunk followed by prose (or a signature) was said as a hunk with
    more lines than its header states, with the hint to fix the @@ line's numbers, which would make it worse. Only
    where the diff goes on after it is the blank line a context line; before text it is text after the diff."""
    head = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n 1\n-2\n+two\n"
    with pytest.raises(PatchParseError) as exc:
        parse_patch((head + extra).encode(), "p.patch")
    said = str(exc.value)
    assert said.startswith("p.patch:8: unexpected line outside a hunk: '' (a lost @@ line, or text after the diff)")
    assert "more lines than its header" not in said, said


@pytest.mark.parametrize("body", ["-a\n\\ No newline at end of file\n\\ No newline at end of file\n+b\n",
                                  "-a\n+b\n\\ No newline at end of file\n\\ No newline at end of file\n"])
def test_a_second_no_newline_marker_is_said_to_be_a_second_one(body):
    """Found in a closing note: a second '\\ No newline at end of file' marker right after one was said to be a
    marker "in the middle of the hunk" (or "outside a hunk"); it is said to be a second marker, at its line."""
    with pytest.raises(PatchParseError) as exc:
        parse_patch(("--- a/x\n+++ b/x\n@@ -1 +1 @@\n" + body).encode(), "p.patch")
    said = str(exc.value)
    assert "a second '\\ No newline at end of file' marker (line " in said, said
    assert "middle of the hunk" not in said and "outside a hunk" not in said, said


@pytest.mark.parametrize("header", ["diff --git a/x.py\tb/x.py", "diff --git a/../../x\tq b/../../x\tq",
                                    "diff --git a/x.py", "diff --git "])
def test_a_file_section_unidiff_cannot_read_is_refused_not_dropped(header):
    """A fresh user: a mode-only section whose 'diff --git' line split its names with a TAB (git quotes a name that
    holds one) was dropped by unidiff without a word: check said the pack was clean, and apply wrote the rest while
    the mode change (which git apply makes) never came; an escaping path there went unseen. So was a section whose
    line names one file or none. Refused at that line (exit 2)."""
    base = "diff --git a/y.py b/y.py\n--- a/y.py\n+++ b/y.py\n@@ -1 +1 @@\n-a\n+b\n"
    with pytest.raises(PatchParseError, match=r"^p\.patch:7: ") as exc:
        parse_patch((base + header + "\nold mode 100644\nnew mode 100755\n").encode(), "p.patch")
    assert exc.value.exit_code == 2


def test_a_name_with_spaces_in_the_diff_git_line_is_still_read():
    """The guard above reads every section git writes: a name with spaces (unquoted by git) and a quoted one."""
    base = "diff --git a/y.py b/y.py\n--- a/y.py\n+++ b/y.py\n@@ -1 +1 @@\n-a\n+b\n"
    for header in ("diff --git a/my file.py b/my file.py", 'diff --git "a/\\303\\274.py" "b/\\303\\274.py"'):
        files = parse_patch((base + header + "\nold mode 100644\nnew mode 100755\n").encode(), "p.patch").files
        assert len(files) == 2 and files[1].new_mode == "100755", files


def test_a_binary_files_line_before_a_text_diff_of_the_file_is_said_as_what_it_is():
    """A fresh user: a git section whose 'Binary files ... differ' line (git diff without --binary) is followed by the
    file's '---'/'+++' and a hunk was refused as "a second section for" the file (unidiff reads two sections there).
    It is refused at the 'Binary files' line, saying what that line is, that a text diff follows, and what to do."""
    text = ("diff --git a/x b/x\nindex 1111111..2222222 100644\nBinary files a/x and b/x differ\n--- a/x\n+++ b/x\n"
            "@@ -1 +1 @@\n-a\n+b\n")
    with pytest.raises(PatchParseError) as exc:
        parse_patch(text.encode(), "p.patch")
    said = str(exc.value)
    assert said.startswith("p.patch:3: 'Binary files a/x and b/x differ' says the file's change is binary and not in "
                           "the patch (git diff without --binary), but a text diff of the file follows it at line 4: "
                           "git writes a file's section one way or the other, never both"), said
    assert "second section" not in said, said
    assert "regenerate it with git diff --binary" in exc.value.problems[0].hint
    alone = "diff --git a/x.bin b/x.bin\nnew file mode 100644\nindex 0000000..1111111\nBinary files /dev/null and " \
            "b/x.bin differ\n"  # (a new binary file's section as git writes it: read as before)
    assert parse_patch((alone + text.replace("Binary files a/x and b/x differ\n", "")).encode(), "p.patch").files


@pytest.mark.parametrize("case", ["git, after the hunks", "git, after the hunks, a section follows", "plain, before",
                                  "plain, after", "git, another file, a text diff follows", "git, another file"])
def test_a_binary_files_line_elsewhere_is_said_as_what_it_is(case):
    """A fresh user, after the line before a text diff was worded: a 'Binary files' line after a git section's hunks
    was still "a second section for 'x' (the first at line 1)"; in a plain diff before the file's text diff, "a second
    section" at the text diff; and one naming another file than its 'diff --git' line was said to be followed by "a
    text diff of the file". Each is said as what it is, at the 'Binary files' line."""
    hunk = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
    text, at, said = {
        "git, after the hunks": ("diff --git a/x b/x\n" + hunk + "Binary files a/x and b/x differ\n", 7,
                                 "'Binary files a/x and b/x differ' says the file's change is binary and not in the "
                                 "patch, but the file's text diff is above it (from line 2): a diff writes a file's "
                                 "change one way or the other, never both"),
        "git, after the hunks, a section follows": (
            "diff --git a/x b/x\n" + hunk + "Binary files a/x and b/x differ\ndiff --git a/y b/y\n" +
            hunk.replace("x", "y"), 7, "but the file's text diff is above it (from line 2)"),
        "plain, before": ("Binary files a/x and b/x differ\n" + hunk, 1,
                          "'Binary files a/x and b/x differ' says the file's change is binary and not in the patch "
                          "(diff -r writes it for a binary file), but a text diff of the file follows it at line 2: a "
                          "diff writes a file's change one way or the other, never both"),
        "plain, after": (hunk + "Binary files a/x and b/x differ\n", 6,
                         "but the file's text diff is above it (from line 1)"),
        "git, another file, a text diff follows": (
            "diff --git a/x b/x\nindex 1111111..2222222 100644\nBinary files a/y and b/y differ\n" + hunk, 3,
            "'Binary files a/y and b/y differ' names another file than its section's 'diff --git' line ('x'); the "
            "two lines disagree"),
        "git, another file": ("diff --git a/x b/x\nindex 1111111..2222222 100644\nBinary files a/y and b/y differ\n", 3,
                              "names another file than its section's 'diff --git' line ('x')"),
    }[case]
    with pytest.raises(PatchParseError) as exc:
        parse_patch(text.encode(), "p.patch")
    got = str(exc.value)
    assert got.startswith(f"p.patch:{at}: ") and said in got, got
    assert "second section" not in got, got
    assert "a text diff of the file follows" not in got or case == "plain, before", got
    assert exc.value.problems[0].line == at


def test_binary_files_lines_diff_r_and_git_write_are_read_as_before():
    """What diff -r and git write: a binary file's own line in a plain diff beside another file's text diff (either
    order), and a git section's line naming its file across a rename or from /dev/null."""
    hunk = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
    for text in ("Binary files a/y and b/y differ\n" + hunk, hunk + "Binary files a/y and b/y differ\n",
                 "diff -ru a/y b/y\nBinary files a/y and b/y differ\ndiff -ru a/x b/x\n" + hunk):
        assert sorted(f.path for f in parse_patch(text.encode(), "p.patch").files) == ["x", "y"], text
    renamed = ("diff --git a/old.bin b/new.bin\nsimilarity index 90%\nrename from old.bin\nrename to new.bin\n"
               "index 1111111..2222222 100644\nBinary files a/old.bin and b/new.bin differ\n")
    created = "diff --git a/n.bin b/n.bin\nnew file mode 100644\nindex 0000000..1111111\nBinary files /dev/null and " \
              "b/n.bin differ\n"
    assert [f.path for f in parse_patch((renamed + created).encode(), "p.patch").files] == ["new.bin", "n.bin"]


@pytest.mark.parametrize("encoding,said", [
    ("utf-16", "UTF-16 text (little-endian, its byte-order mark FF FE first)"),
    ("utf-16-be-bom", "UTF-16 text (big-endian, its byte-order mark FE FF first)"),
    ("utf-16-le", "UTF-16 text (little-endian, no byte-order mark: a NUL byte every other byte)"),
    ("utf-16-be", "UTF-16 text (big-endian, no byte-order mark: a NUL byte every other byte)"),
    ("utf-32", "UTF-32 text (little-endian, its byte-order mark FF FE 00 00 first)"),
    ("utf-32-be-bom", "UTF-32 text (big-endian, its byte-order mark 00 00 FE FF first)"),
    ("utf-32-le", "UTF-32 text (little-endian, no byte-order mark: three NUL bytes in every four)"),
    ("utf-32-be", "UTF-32 text (big-endian, no byte-order mark: three NUL bytes in every four)"),
])
def test_a_patch_saved_as_utf16_is_named_so(encoding, said):
    """A fresh user: a patch saved in UTF-16 (a PowerShell redirect writes it) was refused as "a binary file (a NUL
    byte at byte offset 1)": it is named as the encoding it is in, with the iconv command that converts it. So is
    UTF-32 without a byte-order mark (another fresh user: "a binary file", and import's "no patch mail in it")."""
    text = "From: t <t@invalid>\nSubject: [PATCH] x\n\n---\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
    data = text.encode(encoding.removesuffix("-bom"))
    data = data if not encoding.endswith("-be-bom") else (b"\xfe\xff", b"\0\0\xfe\xff")["32" in encoding] + data
    with pytest.raises(PatchParseError) as exc:
        parse_patch(data, "p.patch")
    assert str(exc.value).startswith(f"p.patch:1: a patch saved as {said}, not UTF-8: a patch is UTF-8 text, as git "
                                     f"format-patch writes it"), str(exc.value)
    iconv = {"utf-16-le": "UTF-16LE", "utf-16-be": "UTF-16BE", "utf-32": "UTF-32", "utf-32-be-bom": "UTF-32",
             "utf-32-le": "UTF-32LE", "utf-32-be": "UTF-32BE"}.get(encoding, "UTF-16")
    assert f"iconv -f {iconv} -t UTF-8 FILE > NEW" in exc.value.problems[0].hint
    from fixpack.errors import BadInputError
    from fixpack.exchange import mails

    with pytest.raises(BadInputError) as wide:  # (import: it said "no patch mail in it")
        mails(data, "m.patch")
    assert str(wide.value) == (f"m.patch: a mail file saved as {said}, not UTF-8 as git format-patch writes it: convert "
                               f"it to UTF-8 (iconv -f {iconv} -t UTF-8 FILE > NEW) and import that; nothing was "
                               f"written"), str(wide.value)
    with pytest.raises(PatchParseError, match=r"a binary file, not a patch \(a NUL byte at byte offset 4\)"):
        parse_patch(b"\x89PNG\x00\x00\x00\rIHDR\x00\x10\x00\x10\x08\x06\x00\x00\x00", "p.patch")  # (no text: as before)
