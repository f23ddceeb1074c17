"""Paths a careless user gives (found by a fresh user): a name too long, a loop of symbolic links, a file where a
folder is on the way, a folder of copies with a typo. Each is said with the path and what to do, exit 2 (the path
given) or 3 (a target not there), never an internal error, and nothing is written; a folder of copies never falls
back to the running Python's install."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO, one_fix_pack, snapshot, within


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fixpack.cli", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


@pytest.mark.parametrize("json", [False, True])
@pytest.mark.parametrize("where", ["--root", "--pack", "--copies", "--reject", "--sbom"])
@pytest.mark.parametrize("bad", ["too long", "a loop of links", "through a file"])
def test_a_path_that_cannot_be_one_is_bad_input_naming_it(builder, tmp_path, where, bad, json):
    image = one_fix_pack(builder)
    (tmp_path / "l1").symlink_to(tmp_path / "l2")
    (tmp_path / "l2").symlink_to(tmp_path / "l1")
    (tmp_path / "afile").write_text("x\n")
    path = {"too long": str(tmp_path / ("a" * 300)), "a loop of links": str(tmp_path / "l1" / "x"),
            "through a file": str(tmp_path / "afile" / "x")}[bad]
    args = {"--root": ["--root", f"demo={path}"], "--pack": ["--pack", path, "--root", f"demo={image}"],
            "--copies": ["--copies", path], "--reject": ["--reject", path, "--root", f"demo={image}"],
            "--sbom": ["--sbom", path, "--root", f"demo={image}"]}[where]
    if where != "--pack":
        args += ["--pack", str(builder.pack)]
    before = snapshot(image), snapshot(builder.pack)
    r = _cli("apply", "-p", "p1", *args, *(["--json"] if json else []))
    said = r.stdout + r.stderr
    assert r.returncode in (2, 3) and "internal error" not in said and "Traceback" not in said, said
    if r.returncode == 2:
        why = {"too long": "a name too long", "a loop of links": "a loop of symbolic links",
               "through a file": "file where a folder is"}[bad]
        assert any(w in said for w in (why, "does not exist", "not a folder", "no such folder")), said
    assert (snapshot(image), snapshot(builder.pack)) == before


def test_a_folder_of_copies_without_the_target_never_falls_back_to_the_install(builder, tmp_path):
    """--copies (or $GAUDI_FIXES_ROOT) with a typo: the target is missing (exit 3), not the running Python's
    install (which apply then patched)."""
    one_fix_pack(builder)
    for env, args in (({}, ["--copies", str(tmp_path / "typo")]), ({"GAUDI_FIXES_ROOT": str(tmp_path / "typo")}, [])):
        r = _cli("apply", "--dry-run", "-p", "p1", "--pack", str(builder.pack), *args, env=env)
        said = " ".join(r.stdout.split())
        assert r.returncode == 3 and "target demo: missing" in said, r.stdout + r.stderr
        assert f"has no {tmp_path / 'typo' / 'demo'}" in said and "installed" in said, said
    copies = tmp_path / "copies"
    copies.mkdir()
    os.symlink(builder.base / "image", copies / "demo")  # the folder of copies, with the target in it
    r = _cli("status", "-p", "p1", "--pack", str(builder.pack), "--copies", str(copies))
    assert r.returncode == 0, r.stdout + r.stderr


def test_an_os_error_no_engine_error_caught_is_said_with_its_file_and_what_to_do_not_as_a_bug():
    """An unreadable file or folder (a target file, .fixpack/, the pack's fixes/, as another user) raised a bare
    PermissionError: exit 1, "internal error". Now exit 5 with the file, the errno and what to do; a path's own
    failure (too long, a loop, a file on the way) exit 2; any other error is still a bug."""
    import errno

    from fixpack.cli_plain import exit_code, failure_text

    denied = PermissionError(errno.EACCES, "Permission denied", "/img/vllm/x.py")
    assert exit_code(denied) == 5
    assert failure_text(denied) == ("/img/vllm/x.py: Permission denied (EACCES): run as a user who may read and write "
                                    "it, or fix its permissions")
    assert exit_code(OSError(errno.ENAMETOOLONG, "File name too long", "/a" * 200)) == 2
    assert exit_code(RuntimeError("Symlink loop from '/tmp/l1'")) == 2
    assert failure_text(RuntimeError("Symlink loop from '/tmp/l1'")).startswith("'/tmp/l1': a loop of symbolic links")
    assert exit_code(OSError(errno.EACCES, "Permission denied")) == 1  # no file named: nothing to say what to do with
    assert exit_code(ValueError("x")) == 1 and exit_code(RuntimeError("other")) == 1


@pytest.mark.parametrize("head", ["a FIFO", "too large"])
def test_a_git_head_that_is_no_small_regular_file_says_no_commit_without_hanging(tmp_path, head):
    """found by a fresh user: a FIFO at .git/HEAD of a --root hung every run in reading it."""
    from fixpack.gitutil import head_commit

    (tmp_path / ".git").mkdir()
    if head == "a FIFO":
        os.mkfifo(tmp_path / ".git/HEAD")
    else:
        (tmp_path / ".git/HEAD").write_text("ref: refs/heads/" + "x" * 10000 + "\n")
    with within(30):
        assert head_commit(tmp_path) is None
    (tmp_path / ".git/HEAD").unlink()
    (tmp_path / ".git/HEAD").write_text("a" * 40 + "\n")
    assert head_commit(tmp_path) == "a" * 40


@pytest.mark.parametrize("command", ["status", "apply"])
def test_a_huge_file_where_a_fix_reads_one_is_refused_unread(builder, command):
    """A file of 300 MiB (sparse here) at a path a fix changes, a core dump or a planted file: exit 3 naming it and
    its size, never read whole into memory (every run read it whole, then decoded it: twice its size held), nothing
    written."""
    image = one_fix_pack(builder)
    mod = image / "demo_pkg/mod.py"
    with open(mod, "r+b") as f:
        f.truncate(300 << 20)
    before = mod.stat().st_mtime_ns
    with within(20):
        r = _cli(command, "-p", "p1", "--pack", str(builder.pack), "--root", f"demo={image}", "--color", "never")
    said = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 3, said
    assert f"{mod}: {300 << 20} bytes, more than the 256 MiB a file of the target that a fix or component reads may " \
           f"have (no source file of a release is): put the release's file back there, then run again" in said, said
    assert not (image / ".fixpack").exists() and (mod.stat().st_size, mod.stat().st_mtime_ns) == (300 << 20, before)


def test_revert_with_fix_names_says_revert_takes_none(builder):
    """`revert ... FIX`: click said only "Got unexpected extra argument" (found by a fresh user)."""
    image = one_fix_pack(builder)
    r = _cli("revert", "-p", "p1", "--pack", str(builder.pack), "--root", f"demo={image}", "one")
    assert r.returncode == 2 and "revert takes no fix names (one): it takes out every fix the image's manifest " \
                                 "records. To drop one opt-in fix, revert, then apply without it" in r.stderr, r.stderr


def test_an_unknown_target_says_which_option_named_it(builder):
    """`--root vlm=...` (a typo) was said as "unknown target 'vlm'", as if --target had named it (found by a fresh
    user)."""
    image = one_fix_pack(builder)
    for args, said in ((["--root", f"dmeo={image}"], "--root dmeo=...: unknown target 'dmeo'"),
                       (["--target", "dmeo"], "--target dmeo: unknown target 'dmeo'")):
        r = _cli("status", "-p", "p1", "--pack", str(builder.pack), *args)
        assert r.returncode == 2 and said in r.stderr, r.stderr


def test_a_path_that_ends_in_a_space_is_taken_as_git_makes_it_and_quoted_in_messages(builder):
    """Found in a closing note: a patch path that ends in a space printed as another file ("mod.py : no such
    file"). git makes such a name (``diff --git a/x  b/x `` and a TAB after it on the ``---``/``+++`` lines), so it is
    taken, and a message quotes it: ``"demo_pkg/sp ": no such file``."""
    from conftest import numbered

    from fixpack import engine

    base = numbered(10)
    name = "demo_pkg/sp "
    clean = builder.tree("clean", {name: base})
    folder = builder.add_fix("one", {name: base}, {name: base.replace("line 3\n", "three\n")})
    assert "\n--- a/demo_pkg/sp \t\n" in (folder / "0001-change.patch").read_text()  # (what git diff writes)
    builder.profile(["one"])
    builder.lock(clean)
    image = builder.tree("image", {name: base})
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and "three\n" in (image / name).read_text(), r.as_dict()
    gone = builder.tree("gone", {})
    before = snapshot(gone)
    r = engine.apply(builder.request(gone))
    said = r.fix("one").messages
    assert r.exit_code != 0 and any(m.startswith('"demo_pkg/sp ": no such file') for m in said), said
    assert snapshot(gone) == before
