"""The readers that read a whole file whatever its size (found by review), each now capped as
``documents.read_capped`` is: an oversized file is refused by its size, named, with its exit code, and never read
whole (a spy on every read of it: through an open file, ``Path.read_text`` or ``Path.read_bytes``). The files here
are sparse: only their size is big.

- ``verify --sbom FILE`` (``MAX_SBOM_BYTES``, exit 2), and the ``--out`` a re-run of ``sbom`` compares with
  (never read through a link, nor past the cap: it is replaced);
- a dist-info's ``direct_url.json`` (the target's facts; exit 3: no file pip wrote);
- the manifest read again for a line number (no line, nothing read whole);
- an export's record ``.fixpack-export`` (exit 2) and a release copy's marker ``.fixpack-complete`` (unpacked
  again);
- the state's manifest and journal: read to at most their cap and one byte, should they grow after the size check;
- a rebase whose ``state.json`` would hold backups past ``MAX_STATE_BYTES``: refused before anything is written;
- a fix's patch file (``MAX_PATCH_BYTES``, exit 2, by check and apply alike)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO, PackBuilder, one_fix_pack, reads_of, snapshot
from test_rebase import BASE, MOD, OTHER, OTHER_BASE, new_release, pack, req  # noqa: F401 (fixtures)
from test_rebase_trust import world

from fixpack import documents
from fixpack.errors import FixpackError


def big(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        f.truncate(size)
    return path


def whole(asked: list[int], limit: int) -> bool:
    """Whether a read asked for more than ``limit + 1`` bytes (or all of them)."""
    return any(n < 0 or n > limit + 1 for n in asked)


# --- the SBOM ---------------------------------------------------------------------------------------

def test_an_sbom_too_large_is_refused_unread(tmp_path, monkeypatch):
    """`verify --sbom` read the file whole whatever its size: past ``MAX_SBOM_BYTES`` (64 MiB) it is exit 2 naming
    it and its size, before a byte is read."""
    from fixpack.sbom import load_sbom

    assert documents.MAX_SBOM_BYTES == 64 << 20
    size = documents.MAX_SBOM_BYTES + 1
    path = big(tmp_path / "sbom.cdx.json", size)
    asked = reads_of(path, monkeypatch)
    with pytest.raises(FixpackError) as exc:
        load_sbom(path)
    assert exc.value.exit_code == 2, str(exc.value)
    assert f"the SBOM {path}: {size} bytes, more than the 64 MiB an SBOM may have" in str(exc.value), str(exc.value)
    assert asked == [], asked
    monkeypatch.undo()
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "verify", "--sbom", str(path), "-p", "v0.30.0",
                        "--target", "vllm", "--root", f"vllm={tmp_path}"], env={**os.environ, "PYTHONPATH": str(REPO)},
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 2 and f"{size} bytes, more than the 64 MiB an SBOM may have" in r.stderr, r.stderr
    assert str(path) in r.stderr and os.path.getsize(path) == size


def test_the_sbom_out_compared_is_never_read_whole_nor_through_a_link(builder, tmp_path, monkeypatch):
    """`sbom --out FILE` compares FILE with the new document (a re-run writes nothing): it read FILE whole
    whatever its size, and through a symbolic link put there after check_file looked (the link was taken for the
    file: "unchanged", the link left in place). Now a FILE past the cap is not read, only replaced, and a link is
    never read through: replaced by the file, what it points to untouched."""
    from fixpack import sbom as sbom_mod

    image = one_fix_pack(builder)
    out = tmp_path / "image.cdx.json"
    first = sbom_mod.sbom(builder.request(image), out)
    assert first.written
    size = documents.MAX_SBOM_BYTES + 1
    big(out, size)
    asked = reads_of(out, monkeypatch)
    again = sbom_mod.sbom(builder.request(image), out)
    assert again.written and not whole(asked, documents.MAX_SBOM_BYTES), asked
    assert out.read_text() == first.text
    monkeypatch.undo()
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(first.text)  # the same facts: taken for the file when read through the link
    out.unlink()
    out.symlink_to(elsewhere)
    monkeypatch.setattr(sbom_mod, "check_file", lambda *a: None)  # the link put there after the check
    asked = reads_of(elsewhere, monkeypatch)
    third = sbom_mod.sbom(builder.request(image), out)
    assert third.written and asked == [] and not out.is_symlink()
    assert out.read_text() == first.text and elsewhere.read_text() == first.text


# --- a dist-info's direct_url.json -------------------------------------------------------------------

def test_a_direct_url_too_large_is_refused_unread(builder, monkeypatch):
    """A target's facts come from its dist-info's direct_url.json too (a VCS install's commit): read whole
    whatever its size. Past the cap of the small JSON documents (4 MiB; pip writes a few hundred bytes) it is
    no file pip wrote: exit 3, naming it, unread; the image unchanged."""
    from fixpack import engine

    image = one_fix_pack(builder)
    url = big(image / "demo_pkg-1.0.dist-info/direct_url.json", 5 << 20)
    (url.parent / "METADATA").write_text("Name: demo_pkg\nVersion: 1.0\n")
    before = snapshot(image)
    asked = reads_of(url, monkeypatch)
    for call in (engine.status, engine.apply):
        with pytest.raises(FixpackError) as exc:
            call(builder.request(image))
        said = str(exc.value)
        assert exc.value.exit_code == 3, said
        assert f"{url}: {5 << 20} bytes, more than the 4 MiB a direct_url.json may have" in said, said
    assert asked == [] and snapshot(image) == before


def test_an_installed_target_s_direct_url_too_large_is_refused_unread(builder, tmp_path, monkeypatch):
    """The same file of an installed distribution (no --root: where pip put it), read through importlib.metadata
    whole: refused by its size, exit 3, unread."""
    import importlib.metadata

    from fixpack import targets
    from fixpack.loader import load_pack, load_profile

    one_fix_pack(builder)
    spec = load_profile(load_pack(builder.pack), "p1").targets[0]
    site = tmp_path / "site"
    info = site / "demo_pkg-1.0.dist-info"
    url = big(info / "direct_url.json", 5 << 20)
    (info / "METADATA").write_text("Name: demo_pkg\nVersion: 1.0\n")
    dist = importlib.metadata.PathDistribution(info)
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: dist)
    asked = reads_of(url, monkeypatch)
    with pytest.raises(FixpackError) as exc:
        targets.installed_root(spec)
    assert exc.value.exit_code == 3 and f"{url}: {5 << 20} bytes, more than the 4 MiB" in str(exc.value)
    assert asked == []


def _status_on_site(tmp_path: Path, direct_url: Callable[[Path], Path]) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``status`` (the CLI) of a one-fix pack of target vllm on a site-packages folder, as an image has it
    (``vllm/``, ``vllm-0.30.0.dist-info`` with METADATA and RECORD), whose ``direct_url.json`` ``direct_url``
    writes at the path it is given (returning it)."""
    b = PackBuilder(tmp_path, target="vllm", package="vllm", version="0.30.0")
    one_fix_pack(b, "vllm/mod.py")
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm/__init__.py").write_text("")
    info = site / "vllm-0.30.0.dist-info"
    info.mkdir()
    url = direct_url(info / "direct_url.json")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.30.0\n")
    (info / "RECORD").write_text("vllm/__init__.py,,\n")
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "status", "--pack", str(b.pack), "-p", "p1", "--root",
                        f"vllm={site}"], capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    return r, url


def test_an_oversized_direct_url_names_the_distribution_and_version_to_reinstall(tmp_path):
    """The exit-3 message of an oversized direct_url.json named what to reinstall from its dist-info folder's name
    cut at its last dash, the one in "dist-info": "reinstall vllm-0.30.0.dist". It names the distribution and its
    version: "reinstall vllm 0.30.0" (a site-packages folder, as an image has it; the file sparse)."""
    r, url = _status_on_site(tmp_path, lambda path: big(path, 80 << 20))
    assert r.returncode == 3, r.stdout + r.stderr
    assert f"{url}: {80 << 20} bytes, more than the 4 MiB a direct_url.json may have" in r.stderr, r.stderr
    assert "; reinstall vllm 0.30.0 or remove that file" in r.stderr and ".dist " not in r.stderr, r.stderr


@pytest.mark.parametrize("doc", ['{"vcs_info": "abc"}', '{"vcs_info": ["c"], "dir_info": "x"}'])
def test_a_direct_url_whose_members_are_no_objects_says_nothing(tmp_path, doc):
    """A direct_url.json whose vcs_info (or dir_info) is a string, a list or a number was AttributeError, exit 1
    (`.get` on it). Such a file is no record pip wrote: it says nothing, as an unreadable one; the run goes on from
    the version module and METADATA (here: the pin's commit is nowhere, so exit 3, the image mismatch)."""
    def write(path: Path) -> Path:
        path.write_text(doc)
        return path

    r, _url = _status_on_site(tmp_path, write)
    assert r.returncode == 3 and "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr


@pytest.mark.parametrize("dir_info", ['"x"', "[1]", "3"])
def test_an_installed_distributions_dir_info_that_is_no_object_says_nothing(tmp_path, monkeypatch, dir_info):
    """The installed distribution's direct_url.json (no --root: targets.installed_root) whose dir_info is no
    object was AttributeError, exit 1; it says nothing (no editable source), as an unreadable one."""
    import importlib.metadata

    from fixpack.model import Pin, Source, TargetSpec
    from fixpack.targets import installed_root

    info = tmp_path / "demo_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo_pkg\nVersion: 1.0\n")
    (info / "direct_url.json").write_text(f'{{"dir_info": {dir_info}, "url": "file:///nowhere"}}')
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: importlib.metadata.PathDistribution(info))
    spec = TargetSpec("demo", "demo_pkg", "demo_pkg", Pin("1.0", "abcdef1"), Source())
    assert installed_root(spec) is None


# --- the manifest, read again for a line ----------------------------------------------------------------

def test_the_manifest_read_for_a_line_is_never_read_whole_nor_through_a_link(tmp_path, monkeypatch):
    """manifest_where.manifest_line read the manifest whole (a line number for a message): past the state's cap it says
    no line, unread; a link is not read through (the state never is)."""
    from fixpack import manifest_where

    path = big(tmp_path / ".fixpack/demo.manifest.json", documents.MAX_STATE_BYTES + 1)
    asked = reads_of(path, monkeypatch)
    assert manifest_where.manifest_line(path, "one", "demo_pkg/mod.py") is None
    assert asked == []
    monkeypatch.undo()
    real = tmp_path / "real.json"
    real.write_text('{\n  "fixes": [\n    {\n      "files": {\n        "a.py": "x"\n      },\n      "id": "one"\n'
                    '    }\n  ]\n}\n')
    assert manifest_where.manifest_line(real, "one", "a.py") == 5
    link = tmp_path / ".fixpack/link.manifest.json"
    link.symlink_to(real)
    assert manifest_where.manifest_line(link, "one", "a.py") is None


# --- the export record and the release cache's marker ---------------------------------------------------------

def test_an_export_record_too_large_is_refused_unread(tmp_path, monkeypatch):
    """An export into a folder read its record (.fixpack-export) whole: past the cap of the tool's small records
    (4 MiB; a line per exported file) it is exit 2 naming it, unread, nothing written."""
    from fixpack import exchange

    out = tmp_path / "series"
    record = big(out / exchange.RECORD, 5 << 20)
    before = snapshot(out)
    asked = reads_of(record, monkeypatch)
    with pytest.raises(FixpackError) as exc:
        exchange._write_out(out, {"0001-a.patch": b"x\n"})
    said = str(exc.value)
    assert exc.value.exit_code == 2, said
    assert f"{record}: {5 << 20} bytes, more than the 4 MiB an export record may have" in said, said
    assert "nothing was written" in said and asked == [] and snapshot(out) == before


def test_a_release_marker_too_large_is_named_and_never_read(tmp_path, monkeypatch):
    """A cached release copy's marker (.fixpack-complete) was read whole, twice (is the copy changed? is its
    tarball still the index's?): past the 4 MiB cap it is named, unread, and the copy is not vouched for (fetch
    unpacks it again, which writes the marker anew); a marker that is a link is not read through."""
    from fixpack import release

    dest = tmp_path / "demo-1.0"
    marker = big(dest / release.MARKER, 5 << 20)
    asked = reads_of(marker, monkeypatch)
    why = release.changed_since_unpack(dest)
    assert why == f"its marker {marker} is {5 << 20} bytes, more than the 4 MiB a marker may have (fetch writes " \
                  f"four short lines)", why
    assert release._checked_before(dest) is None and asked == []
    monkeypatch.undo()
    marker.unlink()
    real = tmp_path / "planted"
    real.write_text(f"demo-1.0.tar.gz\n{release.TREE_KEY}{release.tree_digest(dest)}\n")
    marker.symlink_to(real)
    assert release.changed_since_unpack(dest) == f"its marker {marker} cannot be read"


# --- the state's manifest and journal --------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["manifest", "journal"])
def test_a_state_file_that_grows_after_its_size_is_told_is_read_no_further(tmp_path, monkeypatch, which):
    """The manifest's and the journal's reader checked the size, then read the whole file: one that grew after
    the check was read whole. Now at most the cap and one byte are read, and it is damaged state (exit 3) named
    with its size. (The cap is lowered here so that the growth stays small.)"""
    from fixpack import state

    root = tmp_path / "t"
    path = root / ".fixpack" / ("demo.manifest.json" if which == "manifest" else "journal.json")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"{}")
    limit = 1000
    monkeypatch.setattr(documents, "MAX_STATE_BYTES", limit)  # (its reader: documents.read_state_file)
    fstat, grown = os.fstat, []

    def grow_after_fstat(fd):  # the file grows once its size has been told by the open file, before the read
        st = fstat(fd)
        if not grown and os.readlink(f"/proc/self/fd/{fd}") == str(path):
            grown.append(1)
            with open(path, "ab") as f:
                f.write(b" " * (limit * 10))
        return st
    monkeypatch.setattr(os, "fstat", grow_after_fstat)
    asked = reads_of(path, monkeypatch)
    with pytest.raises(FixpackError) as exc:
        state.read_manifest(root, "demo") if which == "manifest" else state.load_journal(root)
    assert exc.value.exit_code == 3 and str(path) in str(exc.value), str(exc.value)
    assert "more than any state this tool writes" in str(exc.value), str(exc.value)
    assert asked and not whole(asked, limit), asked


def test_a_state_file_linked_after_the_check_is_not_read_through(tmp_path, monkeypatch):
    """The reader's O_NOFOLLOW stays: a link put in the manifest's place after the lstat is damaged state, never
    read through."""
    from fixpack import state

    root = tmp_path / "t"
    path = root / ".fixpack/demo.manifest.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"{}")
    outside = tmp_path / "outside.json"
    outside.write_bytes(b"{}")
    lstat = os.lstat

    def link_after_lstat(p, *a, **kw):
        st = lstat(p, *a, **kw)
        if os.fspath(p) == str(path) and not path.is_symlink():
            path.unlink()
            path.symlink_to(outside)
        return st
    monkeypatch.setattr(os, "lstat", link_after_lstat)
    with pytest.raises(FixpackError) as exc:
        state.read_manifest(root, "demo")
    assert exc.value.exit_code == 3 and "symbolic link" in str(exc.value), str(exc.value)


# --- a rebase whose state would pass its cap --------------------------------------------------------------------

def test_a_rebase_whose_backups_pass_the_state_cap_is_refused_before_anything_is_written(pack, monkeypatch):  # noqa: F811
    """A rebase keeps in state.json the bytes (base64) of each pack file it replaces: it wrote that state whatever
    its size, then refused to read it back (past MAX_STATE_BYTES: damaged state), so it could be neither continued
    nor aborted. Now its size is told from the files' before anything is written: exit 2 naming the files, the
    big one unread."""
    from fixpack import rebase

    b, old = pack
    new = new_release(b, {MOD: BASE, OTHER: OTHER_BASE})
    size = documents.MAX_STATE_BYTES * 3 // 4 + 1  # its base64 alone passes the cap
    variant = big(b.pack / "fixes/first/v2.0/old.patch", size)
    before = world(b.base)
    asked = reads_of(variant, monkeypatch)
    with pytest.raises(FixpackError) as exc:
        rebase.start(req(b, old, new, allow_dirty=True))
    said = str(exc.value)
    assert exc.value.exit_code == 2, said
    assert f"fixes/first/v2.0/old.patch ({size} bytes)" in said and "more than the 64 MiB a rebase's state" in said
    assert str(b.pack / ".rebase/v2.0/state.json") in said, said
    assert asked == [] and world(b.base) == before and not (b.pack / ".rebase/v2.0").exists()


def test_a_rebase_refuses_backups_past_the_cap_again_before_it_saves_them(pack, monkeypatch):  # noqa: F811
    """The same check again when write_pack takes the backups (a file may have grown since the start): here the
    start's check is left out, and write_pack refuses before the state is saved or a pack file written, the big
    file unread (refused while merging, the rebase leaves no work folder, as for any error then)."""
    from fixpack import rebase

    b, old = pack
    new = new_release(b, {MOD: BASE, OTHER: OTHER_BASE})
    variant = big(b.pack / "fixes/first/v2.0/old.patch", documents.MAX_STATE_BYTES)
    before = snapshot(b.pack / "fixes") | snapshot(b.pack / "profiles")
    monkeypatch.setattr(rebase, "check_backups_fit", lambda *a: None)
    asked = reads_of(variant, monkeypatch)
    with pytest.raises(FixpackError) as exc:
        rebase.start(req(b, old, new, allow_dirty=True))
    said = str(exc.value)
    assert exc.value.exit_code == 2 and f"fixes/first/v2.0/old.patch ({documents.MAX_STATE_BYTES} bytes)" in said, said
    assert asked == [] and snapshot(b.pack / "fixes") | snapshot(b.pack / "profiles") == before
    assert not (b.pack / ".rebase/v2.0").exists()  # (refused while merging: the start's work folder dropped)


# --- a fix's patch file ------------------------------------------------------------------------------------------

def test_a_patch_file_too_large_is_refused_unread(builder, monkeypatch):
    """A fix's patch file was read whole whatever its size (held, hashed and parsed: a 300 MB series took 4.9 GB).
    Past ``MAX_PATCH_BYTES`` (64 MiB) it is refused by its size, unread: exit 2 at fix.toml's patches line, naming
    it, its size, the cap and what to do; `fixpack check` and `fixpack apply` alike, nothing written."""
    from fixpack import engine

    image = one_fix_pack(builder)
    assert documents.MAX_PATCH_BYTES == 64 << 20
    size = documents.MAX_PATCH_BYTES + 1
    patch = big(builder.pack / "fixes/one/0001-change.patch", size)
    said = f"patch '0001-change.patch' in {patch.parent}: {size} bytes, more than the 64 MiB a patch file may have"
    before, files = snapshot(image), _stats(builder.pack)
    asked = reads_of(patch, monkeypatch)
    with pytest.raises(FixpackError) as exc:
        engine.apply(builder.request(image))
    assert exc.value.exit_code == 2 and said in str(exc.value), str(exc.value)
    assert f"{patch.parent / 'fix.toml'}:" in str(exc.value) and "split the change" in str(exc.value)
    assert asked == [] and snapshot(image) == before
    monkeypatch.undo()
    for args in (["check", "--pack", str(builder.pack)],
                 ["apply", "--pack", str(builder.pack), "-p", "p1", "--root", f"demo={image}"]):
        r = subprocess.run([sys.executable, "-m", "fixpack.cli", *args], env={**os.environ, "PYTHONPATH": str(REPO)},
                           capture_output=True, text=True, cwd=REPO, timeout=120)
        assert r.returncode == 2 and said in r.stdout + r.stderr, (args, r.stdout, r.stderr)
    assert snapshot(image) == before and os.path.getsize(patch) == size
    assert _stats(builder.pack) == files


def _stats(root: Path) -> dict[str, tuple[int, int]]:
    """Each file under ``root`` with its size and change time (what snapshot says, without reading the big one)."""
    return {p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


# --- a fix's [binary] source file ----------------------------------------------------------------------------------

def _sourced(builder) -> tuple[Path, Path, int]:
    """A locked pack whose fix "logo" adds demo_pkg/logo.bin from its folder's logo.bin, an image to run it on, and
    the line of fix.toml that names the file."""
    from test_binary import NEW_FROM_SOURCE

    builder.tree("clean", {})
    folder = builder.add_fix("logo", {}, {}, diff=NEW_FROM_SOURCE)
    with (folder / "fix.toml").open("a") as f:
        f.write('[binary]\n"demo_pkg/logo.bin" = "logo.bin"\n')
    (folder / "logo.bin").write_bytes(b"\x00first\xff")
    builder.profile(["logo"])
    builder.lock(builder.base / "clean")
    line = (folder / "fix.toml").read_text().splitlines().index('"demo_pkg/logo.bin" = "logo.bin"') + 1
    return builder.tree("image", {}), folder / "logo.bin", line


SOURCE_WHAT = {"fifo": "is a FIFO (named pipe), not a regular file",
               "big": f"is {(256 << 20) + 1} bytes, more than the 256 MiB a binary file may have",
               "link": "is, or lies under, a symbolic link"}


@pytest.mark.parametrize("kind", sorted(SOURCE_WHAT))
def test_a_binary_source_that_is_no_small_regular_file_is_refused_unread(builder, kind):
    """Found by review: a fix's [binary] source (a new binary file kept in its folder) was read with a plain
    read_bytes: a FIFO there hung `fixpack apply` (and `check` called it "missing"), a file of any size was read
    whole. It is told by what it is, or by its size past MAX_BINARY_BYTES (256 MiB), unread: exit 2 at the fix.toml
    line that names it, by `fixpack check` and `fixpack apply` alike; nothing written to the image or the pack."""
    from fixpack.binpatch import MAX_BINARY_BYTES

    image, source, line = _sourced(builder)
    source.unlink()
    if kind == "fifo":
        os.mkfifo(source)
    elif kind == "big":
        big(source, MAX_BINARY_BYTES + 1)
    else:
        (source.parent / "elsewhere.bin").write_bytes(b"\x00first\xff")
        source.symlink_to("elsewhere.bin")
    said = f"fixes/logo/fix.toml:{line}: [binary] 'demo_pkg/logo.bin': the fix's source file 'logo.bin' "
    before, files = snapshot(image), _stats(builder.pack)
    for args in (["check", "--pack", str(builder.pack)],
                 ["apply", "--pack", str(builder.pack), "-p", "p1", "--root", f"demo={image}"]):
        r = subprocess.run([sys.executable, "-m", "fixpack.cli", *args], env={**os.environ, "PYTHONPATH": str(REPO)},
                           capture_output=True, text=True, cwd=REPO, timeout=60)
        out = r.stdout + r.stderr
        assert r.returncode == 2 and said in out and SOURCE_WHAT[kind] in out, (args, out)
        assert "missing" not in out and "Traceback" not in out, out
    assert snapshot(image) == before and _stats(builder.pack) == files


@pytest.mark.parametrize("kind", ["link", "big"])
def test_a_binary_source_changed_after_the_load_is_never_read_through_a_link_nor_whole(builder, monkeypatch, kind):
    """The loader's look and the reads that follow it (the fingerprint, the evaluation) are apart: a link or a file
    past the cap put there meanwhile is not read through, nor whole (here the loader's look is skipped): exit 2
    naming the file, nothing written."""
    from fixpack import engine, loader
    from fixpack.binpatch import MAX_BINARY_BYTES

    image, source, _line = _sourced(builder)
    elsewhere = source.parent.parent.parent / "elsewhere.bin"
    elsewhere.write_bytes(b"\x00first\xff")  # the very bytes: taken for the source when read through the link
    source.unlink()
    if kind == "link":
        source.symlink_to(elsewhere)
        asked = reads_of(elsewhere, monkeypatch)
    else:
        big(source, MAX_BINARY_BYTES + 1)
        asked = reads_of(source, monkeypatch)
    monkeypatch.setattr(loader, "check_binary", lambda *a: None)
    before = snapshot(image)
    with pytest.raises(FixpackError) as exc:
        engine.apply(builder.request(image))
    assert exc.value.exit_code == 2 and str(source) in str(exc.value), str(exc.value)
    assert not whole(asked, MAX_BINARY_BYTES) and snapshot(image) == before, asked


# --- an export: the patch files read again, and the files of --out ------------------------------------------------

def test_an_export_reads_the_files_of_its_out_folder_in_blocks_only(tmp_path, monkeypatch):
    """An export read each file of --out whole (to compare it with what it writes, or with its record): a file of
    any size there was held in memory. Each is hashed in blocks, its bytes held no further than those it is
    compared with; a file no export wrote is still refused as such, nothing written."""
    from fixpack import exchange

    out = tmp_path / "series"
    stray = big(out / "0001-a.patch", 64 << 20)
    before = _stats(out)
    asked = reads_of(stray, monkeypatch)
    with pytest.raises(FixpackError) as exc:
        exchange._write_out(out, {"0001-a.patch": b"x\n"})
    assert exc.value.exit_code == 2 and "0001-a.patch" in str(exc.value) and "nothing was written" in str(exc.value)
    assert asked and all(0 < n <= 1 << 20 for n in asked), asked[:5]
    assert _stats(out) == before
    monkeypatch.undo()
    exchange._write_out(out.parent / "fresh", {"0001-a.patch": b"x\n"})
    exchange._write_out(out.parent / "fresh", {"0001-a.patch": b"y\n"})  # the record's own file: replaced
    assert (out.parent / "fresh/0001-a.patch").read_bytes() == b"y\n"


def test_an_export_reads_a_patch_file_again_no_further_than_its_cap(builder, tmp_path, monkeypatch):
    """An export read each patch file again whole, after the load had read it capped: one grown past
    MAX_PATCH_BYTES (or made a link, a FIFO) meanwhile was read whole. It is read again capped, never through a
    link, and must be the bytes the load read: else exit 2, nothing written."""
    from fixpack import exchange

    one_fix_pack(builder)
    patch = builder.pack / "fixes/one/0001-change.patch"
    load = exchange.load_pack

    def load_then_grow(*args, **kwargs):
        loaded = load(*args, **kwargs)
        big(patch, documents.MAX_PATCH_BYTES + 1)
        return loaded
    monkeypatch.setattr(exchange, "load_pack", load_then_grow)
    asked = reads_of(patch, monkeypatch)
    out = tmp_path / "series"
    with pytest.raises(FixpackError) as exc:
        exchange.export(builder.pack, "p1", (), out)
    assert exc.value.exit_code == 2 and f"{patch}: changed while the pack was exported" in str(exc.value)
    assert not whole(asked, documents.MAX_PATCH_BYTES) and not out.exists(), asked
