"""A lock edited by hand (a file's sha256, a fix's version) was said only at its "digest" line ("its fingerprints do
not match its digest (edited by hand?)"), not where it was edited. The seal cannot say where; what can be told
is said, nothing guessed: a file's pre-image that is not the post-image the fix before it left (both lines:
either was edited), an entry's version or patch hash that is not the pack's (at its line, with the pack's),
else that the lock alone cannot tell; and how to regenerate it. Exit 2, nothing written."""

from __future__ import annotations

import json

import pytest
from conftest import snapshot
from test_lock_bump import MOD, fixpack

from fixpack.progname import program

BASE = "".join(f"line {i}\n" for i in range(1, 21))



def refused_by_all_three(b, image, code: int = 2):
    """status, a dry run and apply of profile p1 on ``image``, each refused with ``code`` and nothing written under
    ``b.base``: each one's stderr, its whitespace folded (yielded once the run is checked)."""
    before = snapshot(b.base)
    for args in (["status"], ["apply", "--dry-run"], ["apply"]):
        r = fixpack(*args, "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
        said = " ".join(r.stderr.split())
        assert r.returncode == code and snapshot(b.base) == before, (args, said)
        yield said

@pytest.fixture
def two(builder):
    """Fixes one (line 3) and two (line 9) of MOD in profile p1, locked; an image of the release."""
    b = builder
    clean = b.tree("clean", {MOD: BASE})
    b.add_fix("one", {MOD: BASE}, {MOD: BASE.replace("line 3\n", "three\n")})
    b.add_fix("two", {MOD: BASE.replace("line 3\n", "three\n")},
              {MOD: BASE.replace("line 3\n", "three\n").replace("line 9\n", "nine\n")})
    b.profile(["one", "two"])
    b.lock(clean)
    return b, b.tree("image", {MOD: BASE})


def _line(lines: list[str], after: str, key: str) -> int:
    """The 1-based line of ``key`` first after the line ``after`` (both stripped of a trailing comma)."""
    start = next(n for n, ln in enumerate(lines) if ln.strip().rstrip(",") == after)
    return next(n for n in range(start, len(lines)) if lines[n].strip().startswith(key)) + 1


def _edit_version(b, new: str) -> tuple[list[str], int]:
    """Fix two's ``"version": 1`` line of the lock made ``"version": NEW``; its lines (as edited) and that line."""
    lock = b.pack / "profiles/p1.lock"
    lines = lock.read_text().splitlines()
    at = _line(lines, '"id": "two"', '"version": ')
    lines[at - 1] = lines[at - 1].replace("1", new)
    lock.write_text("\n".join(lines) + "\n")
    return lines, at


def _refused(b, image, *needles: str) -> str:
    lock = b.pack / "profiles/p1.lock"
    digest = next(n for n, ln in enumerate(lock.read_text().splitlines(), 1) if '"digest": ' in ln)
    before = snapshot(b.base)
    for command in ("status", "apply"):
        r = fixpack(command, "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
        said = " ".join(r.stderr.split())
        assert r.returncode == 2 and snapshot(b.base) == before, (command, said)
        assert f"{lock}:{digest}: its content does not match its seal (its \"digest\"): it was edited by hand " \
               f"after `fixpack lock` wrote it" in said, said
        assert all(n in said for n in needles), (needles, said)
        assert f"; regenerate it from clean release copies: {program()} lock --profile p1 --pack {b.pack}" in said
    return said


def test_a_files_sha256_edited_is_named_with_the_line_the_chain_says_it_must_equal(two):
    b, image = two
    lock = b.pack / "profiles/p1.lock"
    data = json.loads(lock.read_text())
    pre = data["fixes"][1]["files"][0]["pre"]
    lock.write_text(lock.read_text().replace(f'"pre": "{pre}"', f'"pre": "{"0" * 64}"'))
    lines = lock.read_text().splitlines()
    post_at = _line(lines, f'"path": "{MOD}"', '"post": ')  # fix one's entry comes first
    pre_at = _line(lines[post_at:], f'"path": "{MOD}"', '"pre": ') + post_at  # fix two's
    assert lines[pre_at - 1].strip() == f'"pre": "{"0" * 64}"', lines[pre_at - 1]
    said = _refused(b, image, f"fix one's post-image of {MOD} ({lock}:{post_at}) and fix two's pre-image of it "
                              f"({lock}:{pre_at}) differ, where a lock has them equal: one of the two was edited")
    assert "which line" not in said and "not what the pack says" not in said, said


def test_a_fixs_version_edited_is_named_at_its_line_with_the_packs(two):
    b, image = two
    lock = b.pack / "profiles/p1.lock"
    _lines, at = _edit_version(b, "7")
    _refused(b, image, "(which line, the lock alone cannot tell); where it is not what the pack says: fix two's "
                       f"version at {lock}:{at} is 7, the pack's 1 ({b.pack / 'fixes/two/fix.toml'}:2)")


def test_an_edit_nothing_can_place_says_so_and_names_no_line(two):
    b, image = two
    lock = b.pack / "profiles/p1.lock"
    data = json.loads(lock.read_text())
    post = data["fixes"][0]["hunks"][0]["post"]
    lock.write_text(lock.read_text().replace(post, "1" * 64))
    said = _refused(b, image, "it was edited by hand after `fixpack lock` wrote it (which line, the lock alone "
                              "cannot tell); regenerate it")
    assert "not what the pack says" not in said, said


def test_an_entry_that_is_not_as_lock_writes_one_is_named_at_its_line(two):
    """An entry of "fixes" whose version is no integer (a per-entry check, before the seal) was "not a fixpack
    lock", no line: it is named at the line of the key, with its id and what is wrong there."""
    b, image = two
    lock = b.pack / "profiles/p1.lock"
    _lines, at = _edit_version(b, '"1"')
    before = snapshot(b.base)
    r = fixpack("status", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
    said = " ".join(r.stderr.split())
    assert r.returncode == 2 and snapshot(b.base) == before, said
    assert f"{lock}:{at}: entry 2 of its \"fixes\" (id \"two\") is not one `fixpack lock` writes: its \"version\" is " \
           f"\"1\", not an integer from 1 to " in said and " lock --profile p1 " in said, said


@pytest.mark.parametrize("edit", ["schema removed", "schema 999", "schema a string", "profile removed",
                                  "profile a number"])
def test_the_keys_outside_the_seal_are_checked_at_their_line(two, edit):
    """The seal covers the fingerprints, not "schema" and "profile" (a fresh user removed both, set the schema to
    999: apply, status, lock --check and check went on). A lock of another schema, or without a profile's name, is
    refused at the key's line (where it is there), exit 2, nothing written, with the
    command that regenerates it."""
    b, image = two
    lock = b.pack / "profiles/p1.lock"
    data = json.loads(lock.read_text())
    key = edit.split()[0]
    if edit.endswith("removed"):
        del data[key]
    else:
        data[key] = {"schema 999": 999, "schema a string": "1", "profile a number": 7}[edit]
    lock.write_text(json.dumps(data, indent=2) + "\n")
    before = snapshot(b.base)
    for args in (["status"], ["apply"], ["lock", "--check"]):
        r = fixpack(*args, "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
        said = " ".join(r.stderr.split())
        assert r.returncode == 2 and snapshot(b.base) == before, (args, said)
        if key == "schema":
            want = 'its schema is ' + ("missing" if "removed" in edit else json.dumps(data["schema"]))
            assert want + "; this fixpack (" in said and ") reads lock schema 1 only; regenerate it" in said, said
        else:
            assert "its \"profile\" is " + ("missing" if "removed" in edit else "7") in said, said
        if "removed" not in edit:
            at = next(n for n, ln in enumerate(lock.read_text().splitlines(), 1) if ln.strip().startswith(f'"{key}"'))
            assert f"{lock}:{at}: " in said, said


def _reseal(lock, edits: list[tuple[int, str]]) -> None:
    """Set the ``post`` (n >= 0: of fix n's first file) or ``pre`` (-n - 1: of fix n's) hashes given, in the lock's own
    text (its layout kept), and seal it again: its digest is a plain sha256 anyone can recompute."""
    from fixpack.records import lock_digest

    text = lock.read_text()
    data = json.loads(text)
    for n, new in edits:
        key, entry = ("post", data["fixes"][n]["files"][0]) if n >= 0 else ("pre", data["fixes"][-n - 1]["files"][0])
        head, _, tail = text.partition(f'"id": "{data["fixes"][max(n, -n - 1)]["id"]}"')
        before, _, after = head.rpartition(f'"{key}": "{entry[key]}"')  # (its files come before its id)
        text = f'{before}"{key}": "{new}"{after}"id": "{data["fixes"][max(n, -n - 1)]["id"]}"{tail}'
        entry[key] = new
    lock.write_text(text.replace(data["digest"], lock_digest(data)))


@pytest.mark.parametrize("case", ["the last fix's post-image", "a post-image and the next pre-image alike"])
def test_a_post_image_hash_edited_and_sealed_again_is_refused_before_anything_is_written(two, case):
    """Found by a fresh user: a lock whose post-image sha256 for a file was edited and sealed again was taken, and
    apply wrote the file its patch makes, which is not that post-image (exit 0). Each file a fix makes from the
    pre-image the lock records is now held to the post-image the lock records: exit 2 naming the lock's line and
    the fix, with the command that regenerates the lock, for status, a dry run and apply alike; nothing written."""
    b, image = two
    lock = b.pack / "profiles/p1.lock"
    data = json.loads(lock.read_text())
    n, fid = (1, "two") if case.startswith("the last") else (0, "one")
    real = data["fixes"][n]["files"][0]["post"]
    _reseal(lock, [(n, "0" * 64)] if n else [(0, "0" * 64), (-2, "0" * 64)])
    lines = lock.read_text().splitlines()
    at = next(i for i, ln in enumerate(lines, 1) if ln.strip().rstrip(",") == f'"post": "{"0" * 64}"')
    assert (n == 1) == (at > next(i for i, ln in enumerate(lines, 1) if '"id": "one"' in ln)), at
    before = snapshot(b.base)
    for args in (["status"], ["apply", "--dry-run"], ["apply"]):
        r = fixpack(*args, "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
        said = " ".join(r.stderr.split())
        assert r.returncode == 2 and snapshot(b.base) == before, (args, said)
        assert (f"{lock}:{at}: fix {fid}'s post-image of {MOD} is sha256 {'0' * 12}, but its patch makes sha256 "
                f"{real[:12]} of the pre-image the lock records for it: the lock was edited by hand and sealed again "
                f"(its \"digest\" is a plain sha256 anyone can recompute), so nothing was written; regenerate it from "
                f"clean release copies: {program()} lock --profile p1 --pack {b.pack}") in said, (args, said)


def test_check_holds_a_change_fingerprint_edited_and_sealed_again_to_the_patches(two):
    """Found by a fresh user: a lock whose patch_sha256 was edited and sealed again (the seal is a plain sha256) passed
    `check` ("pack is clean"): the lock's patch_bytes_sha256 still named the patch files' bytes, so their change
    fingerprint was taken from the lock unparsed. `check` parses them (it is no image's hot path): the entry is stale
    at its line in the lock, exit 2, nothing written."""
    from fixpack.records import lock_digest

    b, _image = two
    lock = b.pack / "profiles/p1.lock"
    data = json.loads(lock.read_text())
    real = data["fixes"][0]["patch_sha256"]
    forged = "0" * 64
    lock.write_text(lock.read_text().replace(real, forged).replace(data["digest"], lock_digest(
        {**data, "fixes": [{**data["fixes"][0], "patch_sha256": forged}, *data["fixes"][1:]]})))
    before = snapshot(b.pack)
    r = fixpack("check", "--pack", str(b.pack))
    line = next(i for i, ln in enumerate(lock.read_text().splitlines(), 1) if ln.strip() == '"id": "one",')
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"profiles/p1.lock:{line}: the lock is stale: one: its change fingerprint (patch_sha256) is not its " \
           f"patch's, whose bytes are the very ones the lock records (patch_bytes_sha256): the lock was edited by " \
           f"hand and sealed again" in r.stdout + r.stderr, r.stdout + r.stderr
    assert snapshot(b.pack) == before


def test_apply_holds_the_fixes_it_lays_to_their_patches_not_to_a_resealed_fingerprint(two):
    """Found by a fresh user: a lock whose patch_sha256 was edited and sealed again passed status and apply (exit 0):
    apply patched the image and wrote the forged fingerprint into its manifest, and the real pack's status and revert
    then refused the image ('applied with another patch'). The fixes a writing run lays are parsed anyway: they are
    held to their patches before anything is written (exit 2, the lock's line); so are those a status or a dry run
    parsed (a status the lock vouches for on an applied image parses none, and takes the lock's word)."""
    from fixpack.records import lock_digest

    b, image = two
    lock = b.pack / "profiles/p1.lock"
    data = json.loads(lock.read_text())
    real, forged = data["fixes"][0]["patch_sha256"], "0" * 64
    lock.write_text(lock.read_text().replace(real, forged).replace(data["digest"], lock_digest(
        {**data, "fixes": [{**data["fixes"][0], "patch_sha256": forged}, *data["fixes"][1:]]})))
    line = next(i for i, ln in enumerate(lock.read_text().splitlines(), 1) if ln.strip() == '"id": "one",')
    before = snapshot(b.base)
    for more in ([], ["--strict"]):
        r = fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}", *more)
        said = " ".join(r.stderr.split())
        assert r.returncode == 2 and snapshot(b.base) == before, said
        assert f"{lock} is stale: one: its change fingerprint (patch_sha256) is not its patch's, whose bytes are " \
               f"the very ones the lock records (patch_bytes_sha256): the lock was edited by hand and sealed again " \
               f"(its patch_sha256; or its patch_bytes_sha256, set to a patch edited under the same version 1: if " \
               f"that edit is meant, bump version in {b.pack / 'fixes/one/fix.toml'}:2 before locking, else put the " \
               f"patch back as it was locked) (at {lock}:{line})" in said, said


@pytest.mark.parametrize("side", ["pre", "post"])
def test_a_hunk_hash_edited_and_sealed_again_is_named_wherever_the_patches_are_parsed(two, side):
    """Found by a user: a lock whose hunk "pre" sha256 was edited and sealed again was never noticed (nothing but the
    lock reads it). A hunk's sides are the patch's own: where the patches are parsed anyway (apply's writing path for
    the fixes it lays, `check`, `lock --check`), each hunk the lock records is held to them, exit 2 at the lock's line,
    naming the fix, the hunk and the line of the edited hash, with the command that regenerates the lock; nothing
    written. Status and a dry run too, since they parsed the fixes they placed (a status the lock vouches for on an
    applied image parses none, and takes the lock's word)."""
    from fixpack.records import lock_digest

    b, image = two
    lock = b.pack / "profiles/p1.lock"
    data = json.loads(lock.read_text())
    real = data["fixes"][1]["hunks"][0][side]
    data["fixes"][1]["hunks"][0][side] = "0" * 64
    lock.write_text(lock.read_text().replace(real, "0" * 64).replace(data["digest"], lock_digest(data)))
    lines = lock.read_text().splitlines()
    at = next(i for i, ln in enumerate(lines, 1) if ln.strip().rstrip(",") == f'"{side}": "{"0" * 64}"')
    fid = next(i for i, ln in enumerate(lines, 1) if ln.strip() == '"id": "two",')
    what = (f"two: its hunk #1 of {MOD} (line {at} of the lock) records its {side}-image as sha256 {'0' * 12} where "
            f"its patch gives sha256 {real[:12]}: the lock was edited by hand and sealed again")
    redo = f"regenerate it from clean release copies: {program()} lock --profile p1 --pack {b.pack}"
    before = snapshot(b.base)
    r = fixpack("check", "--pack", str(b.pack))
    said = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 2 and f"profiles/p1.lock:{fid}: the lock is stale: {what} ({redo}" in said, said
    r = fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
    said = " ".join(r.stderr.split())
    assert r.returncode == 2 and f"{lock} is stale: {what} (at {lock}:{fid}); {redo}" in said, said
    r = fixpack("lock", "--check", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={b.base / 'clean'}")
    said = " ".join(r.stderr.split())
    assert r.returncode == 2 and f"{lock}:{fid}: {what}; {redo}" in said and "release copy" not in said, said
    for args in (["status"], ["apply", "--dry-run"]):  # (the clean image: each fix placed, its patches parsed)
        r = fixpack(*args, "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
        said = " ".join(r.stderr.split())
        assert r.returncode == 2 and f"{lock} is stale: {what} (at {lock}:{fid}); {redo}" in said, (args, said)
    assert snapshot(b.base) == before


@pytest.mark.parametrize("n", [0, 1])
def test_a_file_pre_image_hash_edited_and_sealed_again_is_named_not_taken_for_a_drift(two, n):
    """Found by a user: a lock whose "pre" sha256 of a file was edited and sealed again made the clean release show
    `drifted` (its file is not the lock's pre-image), and apply went on. Laid at its stated lines, a patch makes the
    post-image the lock records of one pre-image only: a file of which it makes that post-image is the pre-image, and
    the lock's is wrong. Status, a dry run and apply say so at the lock's "pre" line (exit 2, nothing written);
    `lock --check` names the lock's pre-image as edited, not the release copy; `check`, which has no copy, tells a
    later fix's pre-image that is not the post-image the fix before it leaves (the first fix's is the release's)."""
    b, image = two
    lock = b.pack / "profiles/p1.lock"
    real = json.loads(lock.read_text())["fixes"][n]["files"][0]["pre"]
    _reseal(lock, [(-n - 1, "0" * 64)])
    lines = lock.read_text().splitlines()
    at = next(i for i, ln in enumerate(lines, 1) if ln.strip().rstrip(",") == f'"pre": "{"0" * 64}"')
    fid = ("one", "two")[n]
    redo = f"regenerate it from clean release copies: {program()} lock --profile p1 --pack {b.pack}"
    before = snapshot(b.base)
    for said in refused_by_all_three(b, image):
        if n:  # (fix two's: the lock's own chain is broken, held in every run before a file is read)
            assert (f"{lock} is stale: two: its pre-image of {MOD} (line {at} of the lock) and fix one's post-image "
                    f"of it") in said and "one of the two was edited by hand and the lock sealed again" in said, said
        else:
            assert (f"{lock}:{at}: fix {fid}'s pre-image of {MOD} is sha256 {'0' * 12}, but the file is sha256 "
                    f"{real[:12]}, of which its patch makes the very post-image the lock records: the lock was edited "
                    f"by hand and sealed again (its \"digest\" is a plain sha256 anyone can recompute), so nothing was "
                    f"written; {redo}") in said, said
        assert "drifted" not in said, said
    r = fixpack("lock", "--check", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={b.base / 'clean'}")
    said = " ".join(r.stderr.split())
    assert r.returncode == 2 and (f"{MOD}: its pre-image (the copy's file, of which the fix makes the post-image the "
                                  f"lock records, is sha256 {real[:12]}, the lock's sha256 {'0' * 12}: the lock was "
                                  f"edited by hand and sealed again)") in said, said
    r = fixpack("check", "--pack", str(b.pack))
    said = " ".join((r.stdout + r.stderr).split())
    if n:  # fix one's post-image of the file: the hash the lock had as fix two's pre-image
        post = next(i for i, ln in enumerate(lines, 1) if ln.strip().rstrip(",") == f'"post": "{real}"')
        assert r.returncode == 2 and (f"the lock is stale: two: its pre-image of {MOD} (line {at} of the lock) and "
                                      f"fix one's post-image of it (line {post}) differ, where a lock has them equal: "
                                      f"one of the two was edited by hand and the lock sealed again") in said, said
    else:
        assert "the lock is stale" not in said, said
    assert snapshot(b.base) == before


def test_a_renamed_file_is_held_to_the_lock_by_the_pre_image_of_its_old_path(builder):
    """Found while fixing the above: a fix that renames and changes a file, laid on a drifted image (a line of the old
    file changed elsewhere), was refused as a lock edited by hand and sealed again: the new path, with no pre-image
    either way, was held to the lock's post-image, which it cannot be when the file it is made of drifted. A renamed
    file is held by its old path's pre-image: the drifted image is patched (drifted, exit 0); on the clean release a
    resealed "pre" of the old path is named at its line (exit 2, nothing written)."""
    b = builder
    old, new = "demo_pkg/a.py", "demo_pkg/b.py"
    diff = (f"diff --git a/{old} b/{new}\nsimilarity index 90%\nrename from {old}\nrename to {new}\n--- a/{old}\n"
            f"+++ b/{new}\n@@ -2,3 +2,3 @@\n line 2\n-line 3\n+three\n line 4\n")
    b.add_fix("one", {}, {}, diff=diff)
    b.profile(["one"])
    clean = b.tree("clean", {old: BASE})
    b.lock(clean)
    image = b.tree("image", {old: BASE.replace("line 15\n", "LINE 15\n")})
    r = fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
    assert r.returncode == 0 and "one v1: drifted, applied" in r.stdout, r.stdout + r.stderr
    assert (image / new).read_text() == BASE.replace("line 3\n", "three\n").replace("line 15\n", "LINE 15\n")
    lock = b.pack / "profiles/p1.lock"
    real = json.loads(lock.read_text())["fixes"][0]["files"][0]["pre"]  # (its files in path order: the old path's)
    _reseal(lock, [(-1, "0" * 64)])
    at = next(i for i, ln in enumerate(lock.read_text().splitlines(), 1) if ln.strip().rstrip(",") ==
              f'"pre": "{"0" * 64}"')
    before = snapshot(clean)
    r = fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={clean}")
    said = " ".join(r.stderr.split())
    assert r.returncode == 2 and snapshot(clean) == before, said
    assert f"{lock}:{at}: fix one's pre-image of {old} is sha256 {'0' * 12}, but the file is sha256 {real[:12]}" in said


def test_lock_check_names_a_hunk_count_edited_and_sealed_again(two):
    """A fresh user: a lock whose hunk "pre_count" was edited and sealed again is seen by `lock --check` only (the
    count is the release's: an image that is not it cannot tell it), which blamed the release copy ("other fingerprints
    on the release copy ... its hunks"). With the hashes the same and the copy's file the lock's pre-image, the counts
    are what lock writes: it says the lock was edited by hand and sealed again."""
    from fixpack.records import lock_digest

    b, image = two
    lock = b.pack / "profiles/p1.lock"
    text = lock.read_text()
    data = json.loads(text)
    data["fixes"][0]["hunks"][0]["pre_count"] = 2
    edited = text.replace('"pre_count": 1', '"pre_count": 2', 1)
    lock.write_text(edited.replace(data["digest"], lock_digest(data)))
    r = fixpack("lock", "--check", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={b.base / 'clean'}")
    said = " ".join(r.stderr.split())
    assert r.returncode == 2 and f"{MOD}: its hunks' counts of their sides in the pre- and post-image (the copy's " \
        f"file is the lock's pre-image, of which these counts are what lock writes: the lock was edited by hand and " \
        f"sealed again)" in said, said


def test_a_broken_chain_in_a_resealed_lock_is_refused_on_an_applied_image_too(two):
    """A fresh user: fixes one and two both change MOD; their lock entries' pre- and post-image of it swapped (fix two's
    pre-image no longer fix one's post-image) and the lock sealed again. On a clean image status, a dry run and apply
    refused it (exit 2, both lines named); applied with the honest lock first, all three passed it (exit 0) and said
    the image had drifted ("laid on a drifted file, not as the lock has it"), where the lock was edited. The lock's
    chain needs no parse: it is held in every run, applied image or clean."""
    b, image = two
    lock = b.pack / "profiles/p1.lock"
    assert fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}").returncode == 0
    data = json.loads(lock.read_text())
    one, two_ = data["fixes"][0]["files"][0], data["fixes"][1]["files"][0]
    one["pre"], one["post"], two_["pre"], two_["post"] = two_["pre"], two_["post"], one["pre"], one["post"]
    from fixpack.records import dumps, lock_digest

    data["digest"] = lock_digest(data)
    lock.write_bytes(dumps(data))
    for said in refused_by_all_three(b, image):
        assert f"{lock} is stale: " in said and "differ, where a lock has them equal: one of the two was edited by " \
            "hand and the lock sealed again" in said, said
        assert "drifted" not in said, said


def test_a_hunk_listed_twice_is_named_at_the_second_entry_s_line(two):
    """A reviewer: a fix entry's hunk entry given twice (the lock sealed again) was said as a count, "it records 2
    hunk(s) where its patch has 1", at the fix's "id" line only. `lock --check` and `check` say the hunk is listed
    twice, at the second entry's line in the lock."""
    from fixpack.records import dumps, lock_digest

    b, _image = two
    lock = b.pack / "profiles/p1.lock"
    data = json.loads(lock.read_text())
    data["fixes"][1]["hunks"].append(dict(data["fixes"][1]["hunks"][0]))
    data["digest"] = lock_digest(data)
    lock.write_bytes(dumps(data))
    lines = lock.read_text().splitlines()
    start = _line(lines, '"id": "one"', '"hunks": [')  # fix two's hunks (its keys sorted: after fix one's id)
    second = [n + 1 for n in range(start, len(lines)) if lines[n] == "        {"][1]
    want = (f"two: its hunk #1 of {MOD} is listed twice: its hunk entry 2 (line {second} of the lock) is entry 1 "
            f"again, and `fixpack lock` records each hunk of a patch once: the lock was edited by hand and sealed again")
    for args in (["lock", "--check", "-p", "p1", "--root", f"demo={b.base / 'clean'}"], ["check"]):
        r = fixpack(*args, "--pack", str(b.pack))
        said = " ".join((r.stdout + r.stderr).split())
        assert r.returncode == 2 and want in said and "hunk(s) where its patch has" not in said, (args, said)
