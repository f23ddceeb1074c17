"""Bad input is exit 2 with the file and line (or byte offset), never an internal error (exit 1), and a
pack that would drop a change silently (a non-canonical path, a misplaced no-newline marker) is refused
when it is loaded."""

from __future__ import annotations

import json

import pytest
from conftest import numbered, one_fix_pack, snapshot

from fixpack import engine
from fixpack.diff import parse_patch
from fixpack.errors import BadInputError, FixpackError, PackError, PatchParseError
from fixpack.loader import load_pack

MOD = "demo_pkg/mod.py"


@pytest.fixture
def pack(builder):
    base = numbered(10)
    clean = builder.tree("clean", {MOD: base})
    builder.add_fix("a", {MOD: base}, {MOD: base.replace("line 2\n", "two\n")})
    builder.profile(["a"])
    builder.lock(clean)
    return builder, clean


def _patch(path_a: str, path_b: str) -> bytes:
    return (f"diff --git a/{path_a} b/{path_b}\n--- a/{path_a}\n+++ b/{path_b}\n@@ -1,2 +1,2 @@\n line 1\n"
            f"-line 2\n+two\n").encode()


@pytest.mark.parametrize("path", ["./demo_pkg/mod.py", "demo_pkg//mod.py", "demo_pkg/mod.py/.", "demo_pkg/./mod.py",
                                  "demo_pkg\\\\mod.py", "demo_pkg/mod.py/", ".fixpack/demo.manifest.json"])
def test_a_path_that_is_not_canonical_is_refused_with_its_line(path):
    with pytest.raises(PatchParseError) as exc:
        parse_patch(_patch(path, path), "x.patch")
    assert str(exc.value).startswith("x.patch:")
    assert "not canonical" in str(exc.value) or "state folder" in str(exc.value) or "escapes" in str(exc.value)


def test_a_non_canonical_patch_path_stops_the_pack_from_loading(pack):
    """Before: `./` passed the lock, apply said OK and the change was not in the file."""
    b, clean = pack
    patch = b.pack / "fixes/a/0001-change.patch"
    patch.write_text(patch.read_text().replace("b/demo_pkg/mod.py", "b/./demo_pkg/mod.py"))
    before = snapshot(clean)
    with pytest.raises(PackError, match="not canonical"):
        engine.apply(b.request(clean))
    assert snapshot(clean) == before


def test_a_no_newline_marker_inside_a_hunk_is_refused():
    text = (b"diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n line 1\n"
            b"\\ No newline at end of file\n-line 2\n+two\n line 3\n")
    with pytest.raises(PatchParseError, match=r":6: a '\\ No newline at end of file' marker in the middle"):
        parse_patch(text, "x.patch")


@pytest.mark.parametrize("after", ["", "index 1234567..89abcde 100644\n"])
def test_a_file_section_that_changes_nothing_is_refused_at_its_line(after):
    """A section that is its ``diff --git`` line alone (a patch cut after it), or with an index line and nothing more:
    it loaded, a lock recorded the file with pre == post, and apply said "ambiguous ... a twin block?" of a file that
    was exactly the lock's image. git never writes one; it is refused where it is, as a section with ---/+++ lines
    and no hunk is."""
    text = "diff --git a/pkg/mod.py b/pkg/mod.py\n" + after
    with pytest.raises(PatchParseError, match=r"x.patch:1: the file section for pkg/mod.py changes nothing"):
        parse_patch(text.encode(), "x.patch")
    mode_only = "diff --git a/pkg/mod.py b/pkg/mod.py\nold mode 100644\nnew mode 100755\n"
    assert parse_patch(mode_only.encode(), "x.patch").files[0].new_mode == "100755"  # a mode change carries one


def test_a_no_newline_marker_after_each_side_is_accepted():
    text = (b"diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n line 1\n-line 2\n"
            b"\\ No newline at end of file\n+two\n\\ No newline at end of file\n")
    fp = parse_patch(text, "x.patch").files[0]
    assert fp.hunks[0].old_lines == ("line 1\n", "line 2") and fp.hunks[0].new_lines == ("line 1\n", "two")


def _load_error(b) -> str:
    with pytest.raises(PackError) as exc:
        load_pack(b.pack)
    return str(exc.value)


def test_fix_toml_types_are_checked(pack):
    b, _ = pack
    toml = b.pack / "fixes/a/fix.toml"
    toml.write_text(toml.read_text().replace('summary = """fix a"""', "summary = {a = 1}")
                    + '[upstream]\nlink = 3\n')
    msg = _load_error(b)
    assert f"{toml}:" in msg and "'summary' must be a non-empty string" in msg and "'link' must be a string" in msg


def test_a_patch_listed_twice_is_named_at_its_line(pack):
    """It would be applied twice (the second a conflict): the lock and apply said 'stale' or 'conflict'."""
    b, _ = pack
    toml = b.pack / "fixes/a/fix.toml"
    text = toml.read_text()
    toml.write_text(text.replace('patches = ["0001-change.patch"]', 'patches = ["0001-change.patch", "0001-change.patch"]'))
    line = next(n for n, ln in enumerate(toml.read_text().splitlines(), 1) if ln.startswith("patches"))
    msg = _load_error(b)
    assert f"{toml}:{line}: patch '0001-change.patch' is listed twice in 'patches'" in msg and "list each patch once" in msg


@pytest.mark.parametrize("where", ["fixes/a/fix.toml", "fixes/series", "profiles/p1.toml"])
def test_bytes_that_are_not_utf8_are_named_with_line_and_offset(pack, where):
    b, clean = pack
    path = b.pack / where
    raw = path.read_bytes()
    path.write_bytes(raw + b"# \xff\n")
    with pytest.raises(FixpackError) as exc:
        engine.apply(b.request(clean))
    assert exc.value.exit_code == 2
    assert f"byte offset {len(raw) + 2}" in str(exc.value) and str(path) in str(exc.value)
    assert "missing from the series" not in str(exc.value)  # one finding, not one more per fix


@pytest.mark.parametrize("kind, problem", [
    ("absolute", "is an absolute path: name the file relative to the fix's folder"),
    ("dotdot", "has a '..' segment: it climbs out of the fix's folder"),
    ("link", "is, or lies under, a symbolic link"),
])
def test_a_binary_source_outside_the_fix_folder_is_refused(pack, tmp_path, kind, problem):
    """A bad [binary] source is named as the fix's source file, at its line of fix.toml, not in the words
    meant for a path in the target ('relative to the target root', 'climbs out of the target')."""
    b, _ = pack
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"\0secret")
    folder = b.pack / "fixes/a"
    src = {"absolute": str(secret), "dotdot": "../../../secret.bin", "link": "logo.bin"}[kind]
    if kind == "link":
        (folder / "logo.bin").symlink_to(secret)
    toml = folder / "fix.toml"
    toml.write_text(toml.read_text() + f'[binary]\n"demo_pkg/x.bin" = "{src}"\n')
    line = len(toml.read_text().splitlines())
    msg = _load_error(b)
    assert f"{toml}:{line}: [binary] 'demo_pkg/x.bin': the fix's source file {src!r} {problem}" in msg, msg
    assert "target" not in msg.split(f"{toml}:{line}:")[1].split("(put the file")[0]


def test_a_lock_byte_that_is_not_utf_8_is_named_at_its_line(pack):
    """Found by a user: a lock's byte that is not UTF-8 was named by its byte offset alone, where every other pack
    file's is named at its line. Named at its line and its place in it too; exit 2, nothing written."""
    b, clean = pack
    lock = b.pack / "profiles/p1.lock"
    lines = lock.read_bytes().split(b"\n")
    lines[2] = lines[2][:4] + b"\xff" + lines[2][4:]
    lock.write_bytes(b"\n".join(lines))
    offset = len(lines[0]) + len(lines[1]) + 2 + 4
    before = snapshot(b.pack), snapshot(clean)
    with pytest.raises(BadInputError) as exc:
        engine.apply(b.request(clean))
    assert exc.value.exit_code == 2 and str(exc.value).startswith(
        f"{lock}:3: bytes that are not UTF-8 at byte offset {offset} (byte 5 of the line); regenerate"), str(exc.value)
    assert (snapshot(b.pack), snapshot(clean)) == before


@pytest.mark.parametrize("damage", ["not utf-8", "entries of the wrong shape"])
def test_a_damaged_profile_lock_is_bad_input(pack, damage):
    b, clean = pack
    lock = b.pack / "profiles/p1.lock"
    if damage == "not utf-8":
        lock.write_bytes(lock.read_bytes() + b"\xff")
    else:
        data = json.loads(lock.read_text())
        data["fixes"][0]["files"] = "oops"
        lock.write_text(json.dumps(data))
    with pytest.raises(BadInputError):
        engine.apply(b.request(clean))


def test_a_file_section_of_context_lines_alone_changes_nothing():
    """Its one hunk has no + or - line (found by a fresh user): check and lock passed, then every apply on the clean
    release said 'ambiguous ... the file is not the lock's pre- or post-image'. A context-only hunk beside one that
    changes lines stays accepted."""
    head = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n"
    with pytest.raises(PatchParseError, match=r"x.patch:1: the file section for m.py changes nothing \(no hunk with "
                                              r"a \+ or - line"):
        parse_patch((head + "@@ -1,3 +1,3 @@\n a\n b\n c\n").encode(), "x.patch")
    both = head + "@@ -1,3 +1,3 @@\n a\n b\n c\n@@ -10,3 +10,3 @@\n j\n-k\n+K\n l\n"
    assert len(parse_patch(both.encode(), "x.patch").files[0].hunks) == 2


def test_a_patch_with_cr_line_ends_alone_is_said_so():
    """Classic-Mac line ends (CR, no LF at all): it was said to have CRLF line endings, with dos2unix to convert,
    which leaves lone CRs as they are (found by a fresh user)."""
    text = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a\n+b\n".replace("\n", "\r")
    with pytest.raises(PatchParseError) as exc:
        parse_patch(text.encode(), "x.patch")
    said = str(exc.value) + " ".join(p.hint for p in exc.value.problems)
    assert "x.patch:1: CR line endings in the patch file itself (classic Mac: it holds no LF at all)" in said, said
    assert "tr '\\r' '\\n', or mac2unix" in said and "CRLF" not in said, said


def test_a_fix_that_lists_no_patch_is_refused_at_its_patches_line(builder):
    """``patches = []`` (found by a fresh user): it locked, then apply called the clean release 'ambiguous'."""
    one_fix_pack(builder)
    toml = builder.pack / "fixes/one/fix.toml"
    toml.write_text(toml.read_text().replace('patches = ["0001-change.patch"]', "patches = []"))
    with pytest.raises(PackError) as exc:
        load_pack(builder.pack)
    assert any(p.path == toml and p.line is not None and "'patches' lists no patch" in p.message
               for p in exc.value.problems), str(exc.value)
