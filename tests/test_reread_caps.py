"""The reads of a pack's files after its load (found by review): the load reads each patch file capped
(``MAX_PATCH_BYTES``), without blocking, never through a link, but later readers read it again with a plain
``read_bytes``/``read_text``: a FIFO put there since hung them, a file of any size was read whole, a link was
followed. Each now reads it again as the load did (``patchfiles.patch_again``) and takes only the bytes the load
read: a file changed since is exit 2, named, with what to do; nothing hangs, nothing is written. The same for a
pack's text files read again to be rewritten (``documents.pack_text``) or for a message's line
(``documents.text_for_lines``), and the files hashed whole (``safepath.sha256_regular``: in blocks, never a
FIFO)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import git, one_fix_pack, reads_of, within
from test_authoring import MOD, pack3  # noqa: F401 (fixture)
from test_rebase import BASE, OTHER, OTHER_BASE, new_release, pack, req  # noqa: F401 (fixtures)

from fixpack import documents, patchfiles
from fixpack.errors import FixpackError

KINDS = ["fifo", "link", "big", "other-bytes", "gone"]


def disk(root: Path) -> dict[str, Any]:
    """Every entry under ``root`` as it is, nothing followed nor waited on: a file's bytes and mode, a link's
    target, a FIFO as such."""
    out: dict[str, Any] = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(top) / name
            st = os.lstat(p)
            key = p.relative_to(root).as_posix()
            if stat.S_ISLNK(st.st_mode):
                out[key] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                out[key] = (p.read_bytes(), stat.S_IMODE(st.st_mode))
            else:
                out[key] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode))
    return out


def plant(path: Path, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the patch file ``path`` no longer the one the load read: a FIFO, a link to a file of the very same
    bytes, a file grown past the cap (lowered: no 64 MiB written), other bytes (a reworded subject), or nothing."""
    data = path.read_bytes()
    if kind == "fifo":
        path.unlink()
        os.mkfifo(path)
    elif kind == "link":
        elsewhere = path.parent.parent.parent / "elsewhere.patch"
        elsewhere.write_bytes(data)  # the very bytes: taken for the patch when read through the link
        path.unlink()
        path.symlink_to(elsewhere)
    elif kind == "gone":
        path.unlink()
    elif kind == "big":  # the cap lowered to the largest patch file of the pack, this one grown past it
        cap = max(p.stat().st_size for p in path.parents[2].rglob("*.patch"))
        monkeypatch.setattr(patchfiles, "MAX_PATCH_BYTES", cap)
        path.write_bytes(data + b"\n" * (cap - len(data) + 100))
    else:
        path.write_bytes(data.replace(b"[PATCH] ", b"[PATCH] Reworded: ", 1))


def plant_after_load(path: Path, kind: str, monkeypatch: pytest.MonkeyPatch, at: int = 1) -> dict[str, Any]:
    """Plant ``kind`` at ``path`` once the pack's load has read it (its ``at``-th load: a command may load the pack
    more than once, the last one's bytes are those it uses), and keep what the pack's folder and its parent hold
    right then under ``"after"`` (what must not change from there on)."""
    read, seen, reads = patchfiles._patch_bytes, {}, []

    def read_then_plant(p: Path, *args: Any) -> bytes | None:
        data = read(p, *args)
        reads.extend([p] if p == path else [])
        if p == path and len(reads) == at:
            plant(path, kind, monkeypatch)
            seen["after"] = disk(path.parents[3])
        return data
    monkeypatch.setattr(patchfiles, "_patch_bytes", read_then_plant)
    return seen


def refused(call: Callable[[], object], path: Path, seen: dict[str, Any],
            during: str = "since the pack was loaded", aside: str = "") -> str:
    """``call`` fails at once with exit 2, naming ``path``, and nothing under the pack's parent folder changed
    since the plant (but what lies under ``aside``); the message."""
    with within(30), pytest.raises(FixpackError) as exc:
        call()
    said = str(exc.value)
    assert exc.value.exit_code == 2, said
    assert f"{path}: changed {during} (" in said, said
    assert "it is no longer the patch file the pack's load read" in said, said
    def kept(files: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in files.items() if not aside or not k.startswith(aside)}
    assert seen and kept(disk(path.parents[3])) == kept(seen["after"])
    return said


NOW = {"fifo": "it is now a FIFO (named pipe)", "link": "it is now a symbolic link to ", "big": "it is now ",
       "other-bytes": "its bytes are no longer those the load read", "gone": "it is gone"}


@pytest.mark.parametrize("check", [True, False])
@pytest.mark.parametrize("kind", KINDS)
def test_format_takes_only_the_patch_bytes_the_load_read(builder, monkeypatch, kind, check):
    """`fixpack format` (and --check) read each patch file again, whole, through a link, waiting on a FIFO; now
    one changed since the load is exit 2 naming it, what it is now and what to do, no patch written."""
    from fixpack.loader import load_pack
    from fixpack.pack_tools import rewrite_patches, stale_patches

    one_fix_pack(builder)
    path = builder.pack / "fixes/one/0001-change.patch"
    seen = plant_after_load(path, kind, monkeypatch)
    loaded = load_pack(builder.pack)
    said = refused(lambda: (stale_patches if check else rewrite_patches)(loaded), path, seen)
    assert NOW[kind] in said and "run `" in said and "format` again; no patch was written" in said, said


@pytest.mark.parametrize("kind", KINDS)
def test_export_takes_only_the_patch_bytes_the_load_read(builder, tmp_path, monkeypatch, kind):
    """`fixpack export` (its re-read was capped already): a FIFO, a link, a larger or another file since the load
    is exit 2 naming it, --out not made."""
    from fixpack import exchange

    one_fix_pack(builder)
    path = builder.pack / "fixes/one/0001-change.patch"
    seen = plant_after_load(path, kind, monkeypatch)
    out = tmp_path / "series"
    said = refused(lambda: exchange.export(builder.pack, "p1", (), out), path, seen, "while the pack was exported")
    assert "run the export again; nothing was written" in said and not out.exists(), said


@pytest.mark.parametrize("kind", KINDS)
def test_edit_takes_only_the_patch_bytes_the_load_read(pack3, monkeypatch, kind):  # noqa: F811
    """`fixpack edit` hashed the fix's patches and made its commits from a second read of each: exit 2 naming the
    file, and the work tree it had begun is not kept."""
    from fixpack.editwork import start

    builder, clean = pack3
    path = builder.pack / "fixes/b/0001-change.patch"
    seen = plant_after_load(path, kind, monkeypatch)
    said = refused(lambda: start(builder.pack, "p1", "b", roots={"demo": clean}), path, seen)
    assert "run the edit again; nothing was kept" in said and not (builder.pack / ".edit/b").exists(), said


@pytest.mark.parametrize("kind", KINDS)
def test_refresh_takes_only_the_patch_bytes_the_load_read(pack3, monkeypatch, kind):  # noqa: F811
    """`fixpack refresh` read the old patch again for its message: exit 2 naming it, nothing written to the pack."""
    from fixpack.editrefresh import refresh_from_work
    from fixpack.editwork import start

    builder, clean = pack3
    work = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    (work / MOD).write_text((work / MOD).read_text().replace("# a comment\n", "# a clearer comment\n"))
    git(work, "commit", "-qa", "--amend", "--no-edit")
    path = builder.pack / "fixes/b/0001-change.patch"
    seen = plant_after_load(path, kind, monkeypatch)
    said = refused(lambda: refresh_from_work(builder.pack, "b"), path, seen)
    assert "run the refresh again; nothing was written" in said, said


@pytest.mark.parametrize("kind", KINDS)
def test_sbom_takes_only_the_patch_bytes_the_load_read(builder, tmp_path, monkeypatch, kind):
    """`fixpack sbom` put each applied fix's patch text in the document, read again with read_text: exit 2 naming
    it, no SBOM written."""
    from fixpack import engine
    from fixpack import sbom as sbom_mod

    image = one_fix_pack(builder)
    engine.apply(builder.request(image))
    path = builder.pack / "fixes/one/0001-change.patch"
    seen = plant_after_load(path, kind, monkeypatch, at=2)  # (its status check loads the pack a second time)
    out = tmp_path / "image.cdx.json"
    said = refused(lambda: sbom_mod.sbom(builder.request(image), out), path, seen)
    assert "run the sbom command again; nothing was written" in said and not out.exists(), said


@pytest.mark.parametrize("kind", KINDS)
def test_rebase_takes_only_the_patch_bytes_the_load_read(pack, monkeypatch, kind):  # noqa: F811
    """A rebase compared and carried each patch from a second, plain read: exit 2 naming it, nothing written to
    the pack (its work folder dropped, as for any error while merging)."""
    from fixpack import rebase

    b, old = pack
    new = new_release(b, {MOD: BASE, OTHER: OTHER_BASE})
    path = b.pack / "fixes/first/0001-change.patch"
    seen = plant_after_load(path, kind, monkeypatch, at=2)  # (the start loads the pack, then its run again)
    refused(lambda: rebase.start(req(b, old, new, allow_dirty=True)), path, seen, aside="pack/.rebase")
    assert not (b.pack / ".rebase/v2.0").exists()


# --- a pack's text files read again -----------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["fifo", "big"])
def test_refresh_rewrites_a_fix_toml_only_as_the_load_reads_it(pack3, monkeypatch, kind):  # noqa: F811
    """A refresh rewrote fix.toml from a plain read_text: a FIFO put there since hung it, a file of any size was
    read whole. Read again as the load reads it: exit 2 naming the file, what it is, what to do; nothing written."""
    from fixpack import editrefresh

    builder, clean = pack3
    work = Path(_start(builder, clean))
    (work / MOD).write_text((work / MOD).read_text().replace("# a comment\n", "# a clearer comment\n"))
    git(work, "commit", "-qa", "--amend", "--no-edit")
    toml = builder.pack / "fixes/b/fix.toml"
    load, seen = editrefresh.load_pack, {}

    def load_then_plant(*args: Any, **kwargs: Any) -> Any:
        loaded = load(*args, **kwargs)
        toml.unlink()
        if kind == "fifo":
            os.mkfifo(toml)
        else:
            with toml.open("wb") as f:
                f.truncate(documents.MAX_PACK_TEXT_BYTES + 1)
        seen["after"] = disk(builder.base)
        asked.extend([] if kind == "fifo" else [reads_of(toml, monkeypatch)])
        return loaded
    asked: list[list[int]] = []
    monkeypatch.setattr(editrefresh, "load_pack", load_then_plant)
    with within(30), pytest.raises(FixpackError) as exc:
        editrefresh.refresh_from_work(builder.pack, "b")
    said = str(exc.value)
    assert exc.value.exit_code == 2 and f"{toml}: changed since the pack was loaded" in said, said
    assert ("a FIFO (named pipe)" if kind == "fifo" else "more than the 4 MiB a pack text file may have") in said
    assert "run the command again; nothing was written" in said and asked in ([], [[]]), (said, asked)
    monkeypatch.undo()
    assert disk(builder.base) == seen["after"]


def _start(builder, clean) -> str:
    from fixpack.editwork import start

    return start(builder.pack, "p1", "b", roots={"demo": clean}).work


def test_a_line_for_a_message_is_read_capped_never_from_a_fifo(tmp_path, monkeypatch):
    """A line number for a message (the loader's requires/conflicts, check's findings, a lock's stale entry) came
    from a plain read_text of the file: a FIFO hung it, a large file was read whole. No line now, nothing waited on
    nor read whole; a regular file gives its text."""
    fifo, large, fine = tmp_path / "fix.toml", tmp_path / "series", tmp_path / "p1.toml"
    os.mkfifo(fifo)
    with large.open("wb") as f:
        f.truncate(documents.MAX_PACK_TEXT_BYTES + 1)
    fine.write_text('name = "p1"\n')
    asked = reads_of(large, monkeypatch)
    with within(30):
        assert documents.text_for_lines(fifo) == "" and documents.text_for_lines(large) == ""
    assert asked == [] and documents.text_for_lines(fine) == 'name = "p1"\n'
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_the_loader_names_a_fix_toml_changed_under_it_without_waiting(builder, monkeypatch):
    """The loader read every fix.toml a second time, whole, for the line of a bad ``requires``: one made a FIFO
    after its read waited for ever. It is read again only for a problem, capped: the problem named (exit 2), no
    line, nothing waited on."""
    from fixpack import loader

    one_fix_pack(builder)
    toml = builder.pack / "fixes/one/fix.toml"
    toml.write_text(toml.read_text() + 'requires = ["nope"]\n')
    read = loader.read_toml

    def read_then_fifo(path: Path, *args: Any) -> Any:
        got = read(path, *args)
        if path == toml:
            toml.unlink()
            os.mkfifo(toml)
        return got
    monkeypatch.setattr(loader, "read_toml", read_then_fifo)
    with within(30), pytest.raises(FixpackError) as exc:
        loader.load_pack(builder.pack)
    assert exc.value.exit_code == 2 and f"{toml}: requires unknown fix 'nope'" in str(exc.value), str(exc.value)
    assert stat.S_ISFIFO(os.lstat(toml).st_mode)


# --- files hashed in blocks ---------------------------------------------------------------------------------------

def test_files_are_hashed_in_blocks_never_from_a_fifo_nor_through_a_link(tmp_path, monkeypatch):
    """sbom's hash of an image file, release.file_sha256 and prove's tree digest read each file whole (a FIFO:
    waited on for ever). Each hashes in blocks of HASH_BLOCK (1 MiB); a FIFO or a link is no regular file, unread."""
    import hashlib

    from fixpack import release, safepath
    from fixpack import sbom as sbom_mod
    from fixpack.prove import tree_digest

    pkg = tmp_path / "root/demo_pkg"
    pkg.mkdir(parents=True)
    large = pkg / "large.bin"
    with large.open("wb") as f:
        f.truncate(5 << 20)
    (pkg / "fifo.py").parent.mkdir(exist_ok=True)
    os.mkfifo(pkg / "fifo.py")
    (pkg / "link.py").symlink_to(large)
    want = hashlib.sha256(bytes(5 << 20)).hexdigest()
    before = disk(tmp_path)
    asked = reads_of(large, monkeypatch)
    with within(30):
        assert sbom_mod._sha(large) == release.file_sha256(large) == want
        assert sbom_mod._sha(pkg / "fifo.py") == sbom_mod._sha(pkg / "link.py") == "not a regular file"
        assert sbom_mod._sha(pkg / "gone.py") == "missing"
        for path in (pkg / "fifo.py", pkg / "link.py"):
            with pytest.raises(OSError):
                release.file_sha256(path)
        first = tree_digest(tmp_path / "root", "demo_pkg")
        assert tree_digest(tmp_path / "root", "demo_pkg") == first
    assert asked and all(0 < n <= safepath.HASH_BLOCK for n in asked), asked[:5]
    monkeypatch.undo()
    assert disk(tmp_path) == before


def test_a_proof_file_that_is_a_fifo_is_named_never_waited_on(builder):
    """A rebase's proof reuse hashed each fix's test_*.py with read_bytes: a FIFO there hung it. Exit 2 naming it."""
    from fixpack.loader import load_pack
    from fixpack.rebase_proof import tests_digest

    one_fix_pack(builder)
    fix = load_pack(builder.pack).fixes["one"]
    (fix.folder / "test_one.py").write_text("def test_it():\n    pass\n")
    digest = tests_digest(fix)
    os.mkfifo(fix.folder / "test_two.py")
    before = disk(builder.pack)
    with within(30), pytest.raises(FixpackError) as exc:
        tests_digest(fix)
    said = str(exc.value)
    assert exc.value.exit_code == 2 and str(fix.folder / "test_two.py") in said and "FIFO" in said, said
    assert "put the proof's own test file there" in said and disk(builder.pack) == before
    (fix.folder / "test_two.py").unlink()
    assert tests_digest(fix) == digest


# --- a rebase's and a refresh's other re-reads --------------------------------------------------------------------

def swapped_after_the_check(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``path`` (a FIFO) taken for a regular file by ``Path.is_file``: as when it is put there between a check and
    the read that follows it."""
    is_file = Path.is_file
    monkeypatch.setattr(Path, "is_file", lambda self: self == path or is_file(self))


def test_undo_hashes_what_the_rebase_wrote_never_from_a_fifo(pack, monkeypatch):  # noqa: F811
    """`rebase --undo` (and the record it keeps) hashed each file the rebase wrote with a plain read_bytes: a FIFO
    put there after its is_file check hung it. It is "changed since the rebase wrote it": exit 2 naming it, nothing
    written."""
    from fixpack import rebase

    b, old = pack
    new = new_release(b, {MOD: "new head\n" + BASE, OTHER: OTHER_BASE})
    assert rebase.start(req(b, old, new)).status == "done"
    written = b.pack / "profiles/v2.0.toml"
    written.unlink()
    os.mkfifo(written)
    before = disk(b.base)
    swapped_after_the_check(written, monkeypatch)
    with within(30), pytest.raises(FixpackError) as exc:
        rebase.undo(b.pack)
    said = str(exc.value)
    assert exc.value.exit_code == 2 and "changed since the rebase" in said and "profiles/v2.0.toml" in said, said
    assert disk(b.base) == before


def test_a_rebase_s_backups_are_held_against_the_files_read_capped_never_waited_on(tmp_path, monkeypatch):
    """What a cut-short write left (written_so_far) and --abort's put back (restore) read each pack file whole,
    through a link: a FIFO there hung them. Each is held against its backup, read no further than it: a FIFO or a
    link is not what was there (a FIFO put back as a file; a link named, ELOOP, left as it is, what it leads to
    untouched: a link in the pack is the user's to remove); a file to back up that is a link or past the state's cap
    is exit 2 naming it."""
    import base64
    import errno
    from types import SimpleNamespace

    from fixpack import rebase_state
    from fixpack.rebase_io import NotPutBack
    from fixpack.rebase_session import restore, written_so_far

    root = tmp_path / "pack"
    variant = root / "fixes/a/v2"
    variant.mkdir(parents=True)
    os.mkfifo(variant / "0001-x.patch")
    outside = tmp_path / "outside.toml"
    outside.write_bytes(b"old profile\n")
    (root / "profiles").mkdir()
    (root / "profiles/v2.toml").symlink_to(outside)
    session = SimpleNamespace(pack_root=root, new_name="v2", state={"backups": {
        "fixes/a/v2/0001-x.patch": base64.b64encode(b"old patch\n").decode(),
        "profiles/v2.toml": base64.b64encode(b"old profile\n").decode()}})
    with within(30):
        assert written_so_far(session) == ["fixes/a/v2/0001-x.patch", "profiles/v2.toml"]
        with pytest.raises(NotPutBack) as nb:
            restore(session)
    assert nb.value.restored == ["fixes/a/v2/0001-x.patch"] and list(nb.value.failed) == ["profiles/v2.toml"]
    assert nb.value.failed["profiles/v2.toml"].errno == errno.ELOOP  # the link named, never replaced nor followed
    assert (variant / "0001-x.patch").read_bytes() == b"old patch\n" and (root / "profiles/v2.toml").is_symlink()
    assert outside.read_bytes() == b"old profile\n" and written_so_far(session) == ["profiles/v2.toml"]
    (root / "profiles/v2.toml").unlink()
    (root / "profiles/v2.toml").symlink_to(outside)
    with pytest.raises(FixpackError) as exc:
        rebase_state.backup_bytes(root / "profiles/v2.toml")
    said = str(exc.value)
    assert exc.value.exit_code == 2 and f"{root / 'profiles/v2.toml'}: a pack file the rebase would replace is now " \
                                        f"a symbolic link to {outside}" in said and "run the rebase again" in said
    monkeypatch.setattr(rebase_state, "MAX_STATE_BYTES", 5)
    with pytest.raises(FixpackError) as exc:
        rebase_state.backup_bytes(variant / "0001-x.patch")
    assert exc.value.exit_code == 2 and "is now 10 bytes, not the file it sized" in str(exc.value), str(exc.value)


def test_a_pack_file_is_compared_with_what_a_change_writes_no_further_than_it(tmp_path, monkeypatch):
    """A refresh's or an import's "does this file change?" (packupdate._differs) read the pack file whole, through
    a link, waiting on a FIFO: a FIFO, a link or a larger file differs now, read no further than the new bytes."""
    from fixpack.packupdate import _differs

    same, fifo, link, large = (tmp_path / n for n in ("same", "fifo", "link", "large"))
    same.write_bytes(b"new\n")
    os.mkfifo(fifo)
    link.symlink_to(same)
    with large.open("wb") as f:
        f.truncate(5 << 20)
    asked = reads_of(large, monkeypatch)
    with within(30):
        assert not _differs(same, b"new\n") and _differs(fifo, b"new\n") and _differs(link, b"new\n")
        assert _differs(large, b"new\n") and asked == []


def test_fix_completion_never_waits_on_a_fifo_series(tmp_path, monkeypatch):
    """The shell completion of fix ids read fixes/series with read_text after an is_file check: one made a FIFO
    meanwhile hung the shell's tab. Read as the loader reads it: no completion, nothing waited on."""
    from fixpack import cli_common

    series = tmp_path / "fixes/series"
    series.parent.mkdir()
    series.write_text("one\ntwo\n")
    monkeypatch.setattr(cli_common, "_completion_pack", lambda ctx: tmp_path)
    assert cli_common.complete_fixes(None, None, "t") == ["two"]  # type: ignore[arg-type]
    series.unlink()
    os.mkfifo(series)
    swapped_after_the_check(series, monkeypatch)
    with within(30):
        assert cli_common.complete_fixes(None, None, "") == []  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_refresh_on_a_chain_takes_only_the_patch_bytes_the_load_read(builder, monkeypatch, kind):
    """`fixpack refresh FIX --profile P --root T=PATH` read the patch with read_bytes to tell whether it changed:
    exit 2 naming it, nothing written."""
    from click.testing import CliRunner

    from fixpack.cli_maint import refresh_cmd

    one_fix_pack(builder)
    path = builder.pack / "fixes/one/0001-change.patch"
    seen = plant_after_load(path, kind, monkeypatch)
    with within(30):
        res = CliRunner().invoke(refresh_cmd, ["--profile", "p1", "--root", f"demo={builder.base / 'clean'}",
                                               "--pack", str(builder.pack), "one"])
    assert res.exit_code == 2, res.output
    assert f"{path}: changed since the pack was loaded" in res.output, res.output
    assert "run the refresh again; nothing was written" in res.output and disk(builder.base) == seen["after"]
