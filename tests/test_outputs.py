"""apply's ``--reject DIR`` and ``--sbom FILE``, and ``sbom --out FILE``: a place that cannot take the output
is refused before anything is written (inside a target, a missing or non-folder parent: exit 2; not
writable: exit 5), naming the option as given; a write that fails after all is exit 5 naming the path."""

import errno
import json
import os
import stat
import subprocess

import pytest
from conftest import one_fix_pack, snapshot

from fixpack import nofollow
from fixpack.cli import main

MOD = "demo_pkg/mod.py"


@pytest.fixture
def image(builder):
    return builder, one_fix_pack(builder, MOD)


def run(capsys, b, target, *args):
    with pytest.raises(SystemExit) as exc:
        main.main(args=[args[0], "-p", "p1", "--pack", str(b.pack), "--root", f"demo={target}", *args[1:]],
                  standalone_mode=True)
    out, err = capsys.readouterr()
    return exc.value.code, out, err


@pytest.mark.parametrize("as_json", [False, True])
def test_a_reject_folder_inside_the_target_is_refused_before_the_apply(image, capsys, as_json):
    b, target = image
    before = snapshot(target)
    code, out, err = run(capsys, b, target, "apply", "--reject", str(target / "rej"), *(["--json"] * as_json))
    assert code == 2
    said = json.loads(out)["error"] if as_json else err
    assert "--reject" in said and "inside the target demo" in said
    assert snapshot(target) == before  # nothing patched, no manifest


@pytest.mark.parametrize("option", ["--reject", "--sbom"])
def test_a_missing_parent_is_named_not_made(image, capsys, tmp_path, option):
    b, target = image
    before = snapshot(target)
    code, _out, err = run(capsys, b, target, "apply", option, str(tmp_path / "no/such/out"))
    assert code == 2 and f"{option} " in err and f"{tmp_path / 'no/such'} does not exist" in err, err
    assert not (tmp_path / "no").exists() and snapshot(target) == before
    (tmp_path / "file").write_text("")
    code, _out, err = run(capsys, b, target, "apply", option, str(tmp_path / "file/out"))
    assert code == 2 and "is not a folder" in err and snapshot(target) == before


def _unwritable(path):
    """Make ``path`` unwritable even for root (chattr +i); skip where that cannot be done."""
    if os.geteuid() != 0:
        path.chmod(0o555 if path.is_dir() else 0o444)
        return lambda: path.chmod(0o755)
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i does not work here")
    return lambda: subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.mark.parametrize("what", ["file", "folder"])
def test_an_unwritable_sbom_is_exit_5_before_the_apply(image, capsys, tmp_path, what):
    b, target = image
    before = snapshot(target)
    folder = tmp_path / "out"
    folder.mkdir()
    out_file = folder / "s.json"
    if what == "file":
        out_file.write_text("{}")
    undo = _unwritable(out_file if what == "file" else folder)
    try:
        code, _out, err = run(capsys, b, target, "apply", "--sbom", str(out_file))
        assert code == 5 and "--sbom" in err and "cannot be written" in err, err
        assert snapshot(target) == before
        code, _out, err = run(capsys, b, target, "sbom", "--out", str(out_file))
        assert code == 5 and "--out" in err and "--sbom" not in err, err
    finally:
        undo()


def test_an_sbom_write_that_fails_is_exit_5_with_the_report(image, capsys, tmp_path, monkeypatch):
    b, target = image
    real = nofollow.atomic_write
    out_file = tmp_path / "s.json"

    def full(path, *a, **kw):
        if path == out_file:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(path, *a, **kw)

    monkeypatch.setattr(nofollow, "atomic_write", full)
    code, out, err = run(capsys, b, target, "apply", "--sbom", str(out_file))
    assert code == 5, err
    assert "one v1: absent, applied" in out and f"FAILED (exit 5): --sbom {out_file}" in out, out
    assert "ENOSPC" in out and "the apply itself is done" in out
    assert f" sbom --out {out_file}` and the same options" in " ".join(out.split())  # the program as it runs here
    assert "`fixpack sbom --out FILE`" not in out  # (not on PATH in a lean image: found by a fresh user)
    assert "three" in (target / MOD).read_text()
    code, out, err = run(capsys, b, target, "sbom", "--out", str(out_file))
    assert code == 5 and f"--out {out_file}" in err and "ENOSPC" in err and "internal error" not in err, err


def test_sbom_out_inside_the_target_names_out(image, capsys):
    b, target = image
    code, _out, err = run(capsys, b, target, "sbom", "--out", str(target / "x.json"))
    assert code == 2 and "--out " in err and "--sbom" not in err and not (target / "x.json").exists()


def _special(tmp_path, kind):
    path = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # what /dev/null is
    else:
        (tmp_path / "real.json").write_text("{}\n")
        path.symlink_to(tmp_path / "real.json")
    return path


def _node(path):
    st = os.lstat(path)
    return stat.S_IFMT(st.st_mode), st.st_ino, st.st_rdev


@pytest.mark.parametrize("kind", ["fifo", "device", "link"])
@pytest.mark.parametrize("how", ["sbom", "apply"])
def test_an_sbom_file_that_is_no_regular_file_is_refused_and_kept(image, capsys, tmp_path, kind, how):
    # found by a fresh user: `sbom --out /dev/full` renamed a new file over the device node (and over a FIFO,
    # or the symbolic link itself), exit 0
    b, target = image
    path = _special(tmp_path, kind)
    node, before = _node(path), snapshot(target)
    args = ("sbom", "--out", str(path)) if how == "sbom" else ("apply", "--sbom", str(path))
    code, _out, err = run(capsys, b, target, *args)
    assert code == 2, err
    assert ("a symbolic link" if kind == "link" else "not a regular file") in err and "nothing was written" in err
    assert _node(path) == node and snapshot(target) == before
    if kind == "link":
        assert (tmp_path / "real.json").read_text() == "{}\n"


def test_a_dry_run_with_sbom_says_it_wrote_none(image, capsys, tmp_path):
    """Found by a fresh user: apply --dry-run --sbom FILE wrote no SBOM and said nothing of it."""
    b, target = image
    out_file = tmp_path / "s.json"
    code, _out, err = run(capsys, b, target, "apply", "--dry-run", "--sbom", str(out_file))
    assert code == 0 and f"no SBOM written to {out_file}: a dry run applies nothing" in err and not out_file.exists()


def test_a_folder_at_the_sbom_s_temp_path_is_refused_before_the_apply(image, capsys, tmp_path):
    """Found by a fresh user: apply --sbom FILE with a folder at .FILE.fixpack-tmp patched the image, then failed
    (EISDIR, exit 5); it is refused first (exit 2), as a target file's temp path is."""
    b, target = image
    out_file = tmp_path / "s.json"
    (tmp_path / ".s.json.fixpack-tmp").mkdir()
    before = snapshot(target)
    code, _out, err = run(capsys, b, target, "apply", "--sbom", str(out_file))
    assert code == 2 and ".s.json.fixpack-tmp is a folder where the file is written" in err and \
        snapshot(target) == before, err


@pytest.mark.parametrize("option,inside", [("--sbom", "profiles/p1.lock"), ("--sbom", "fixes/series"),
                                           ("--reject", "fixes")])
def test_an_output_inside_the_pack_is_refused_before_the_apply(image, capsys, option, inside):
    """Found by a fresh user: `apply --sbom PACK/profiles/v0.30.0.lock` wrote the SBOM over the lock (exit 0), and
    over fixes/series the next run stopped on the pack (exit 2); `--reject PACK/fixes` wrote .rej files among the
    patches. The pack the run reads is refused as a place for its outputs, as a target is: exit 2, nothing written,
    in the pack or the target."""
    b, target = image
    before, pack_before = snapshot(target), snapshot(b.pack)
    code, _out, err = run(capsys, b, target, "apply", option, str(b.pack / inside))
    assert code == 2 and f"{option} " in err and "inside the pack" in err, err
    assert snapshot(target) == before and snapshot(b.pack) == pack_before


def test_sbom_out_inside_the_pack_is_refused(image, capsys):
    """The same for `sbom --out` (the one place that checks where both commands write)."""
    b, target = image
    assert run(capsys, b, target, "apply")[0] == 0
    before, pack_before = snapshot(target), snapshot(b.pack)
    code, _out, err = run(capsys, b, target, "sbom", "--out", str(b.pack / "fixes" / "series"))
    assert code == 2 and "--out " in err and "inside the pack" in err, err
    assert snapshot(target) == before and snapshot(b.pack) == pack_before
