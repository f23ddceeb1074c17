"""The release cache heals itself: a cached sdist whose sha256 is not the index's is downloaded again, a
tarball that matches but cannot be unpacked is an environment problem naming it, and the `.unpack-*`
folders of a fetch killed while unpacking are removed by the next fetch. A real simple index on loopback
serves the sdist (no network)."""

import hashlib
import http.server
import io
import os
import tarfile
import threading

import pytest
from test_progress import Heard

from fixpack import release
from fixpack.errors import EnvironmentProblem
from fixpack.model import Pin, Source, TargetSpec


def sdist_bytes() -> bytes:
    """A real demo-1.0.tar.gz: one top folder holding the package."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        data = b"VALUE = 1\n"
        info = tarfile.TarInfo("demo-1.0/demo/__init__.py")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def serve(body: bytes):
    """A loopback simple index whose demo 1.0 sdist is ``body``, listed with ``body``'s own sha256."""
    digest = hashlib.sha256(body).hexdigest().encode()
    gets = []

    class Index(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.startswith("/simple/demo"):
                out = b'<html><body><a href="/files/demo-1.0.tar.gz#sha256=' + digest + b'">demo-1.0.tar.gz</a></body></html>'
                kind = "text/html"
            else:
                gets.append(self.path)
                out, kind = body, "application/octet-stream"
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/simple/", gets


SDIST = sdist_bytes()  # once: gzip stamps the time it was made


def fetch(tmp_path, body: bytes, heard=None):
    pytest.importorskip("pypi_simple")
    server, index, gets = serve(body)
    try:
        return release._fetch_sdist("demo", "1.0", "demo", tmp_path, heard or Heard(), timeout=5, index=index), gets
    finally:
        server.shutdown()


@pytest.mark.parametrize("cached", [b"not a tarball", SDIST[:-40]], ids=["garbage", "truncated"])
def test_a_damaged_cached_tarball_is_downloaded_again(tmp_path, cached):
    (tmp_path / "demo-1.0.tar.gz").write_bytes(cached)
    heard = Heard()
    root, gets = fetch(tmp_path, SDIST, heard)
    assert (root / "demo/__init__.py").read_text() == "VALUE = 1\n" and len(gets) == 1
    assert any("sha256 is not the index's" in line and "downloading again" in line for line in heard.lines)
    assert (tmp_path / "demo-1.0.tar.gz").read_bytes() == SDIST


def test_a_cached_tarball_that_matches_is_not_downloaded_again(tmp_path):
    (tmp_path / "demo-1.0.tar.gz").write_bytes(SDIST)
    root, gets = fetch(tmp_path, SDIST)
    assert (root / "demo/__init__.py").is_file() and gets == []


@pytest.mark.parametrize("body", [b"not a tarball", SDIST[:-40]], ids=["garbage", "truncated"])
def test_a_tarball_matching_its_digest_that_cannot_be_unpacked_names_the_file(tmp_path, body):
    with pytest.raises(EnvironmentProblem, match=r"demo-1\.0\.tar\.gz: cannot unpack it .*run again"):
        fetch(tmp_path, body)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo-1.0.tar.gz"]  # no half copy, no .unpack-*


@pytest.mark.parametrize("name", ["demo-1.0.tar.gz", "demo-1.0.tar.part"])
def test_a_folder_where_the_tarball_goes_is_named_before_downloading(tmp_path, name):
    """A folder in the tarball's (or its download's) place: exit 5 naming it, before any download; it was an
    internal error (IsADirectoryError, exit 1) after a whole download, leaving the .part behind."""
    (tmp_path / name).mkdir()
    (tmp_path / name / "kept").write_text("x")
    server, index, gets = serve(SDIST)
    try:
        with pytest.raises(EnvironmentProblem, match=rf"{name}: not a file.*remove it"):
            release._fetch_sdist("demo", "1.0", "demo", tmp_path, Heard(), timeout=5, index=index)
    finally:
        server.shutdown()
    assert gets == [] and sorted(p.name for p in tmp_path.iterdir()) == [name]
    assert (tmp_path / name / "kept").read_text() == "x"


def test_dead_unpack_folders_are_removed_under_the_cache_lock(tmp_path, monkeypatch):
    cache, outside = tmp_path / "cache", tmp_path / "outside"
    (cache / ".unpack-dead/demo-1.0").mkdir(parents=True)
    (cache / ".unpack-dead/demo-1.0/x.py").write_text("x\n")
    (cache / ".unpack-file").write_text("not a folder: kept\n")
    outside.mkdir()
    (outside / "keep.txt").write_text("keep\n")
    os.symlink(outside, cache / ".unpack-link")  # a link: neither followed nor removed
    (cache / "demo-1.0").mkdir()
    seen = []
    monkeypatch.setattr(release, "_fetch_locked", lambda *a: seen.append(sorted(p.name for p in cache.iterdir())))
    heard = Heard()
    spec = TargetSpec("demo", "demo", "demo", Pin("1.0", ""), Source(pypi="demo"))
    release.fetch(spec, cache, progress=heard)
    assert seen == [[".unpack-file", ".unpack-link", "demo-1.0"]]
    assert (outside / "keep.txt").is_file()
    assert any(".unpack-dead" in line and "killed" in line for line in heard.lines)


def test_a_cached_copy_changed_since_its_unpack_is_unpacked_again(tmp_path):
    """A release copy that fixes were applied to (its .fixpack folder), or whose files changed, is not handed
    out as the release: it is unpacked again from the hash-checked sdist, and said so. So is, once, a copy an
    older fixpack marked (no digest: its files cannot be vouched for). An untouched copy is kept."""
    root, gets = fetch(tmp_path, SDIST)
    assert release.tree_digest(root) in (root / release.MARKER).read_text()
    (root / ".fixpack").mkdir()
    heard = Heard()
    again, gets = fetch(tmp_path, SDIST, heard)
    assert again == root and not (root / ".fixpack").exists() and gets == []  # the cached tarball: no download
    assert any("fixpack manifest" in line and "unpacking it again" in line for line in heard.lines), heard.lines
    (root / "demo/__init__.py").write_text("VALUE = 2\n")
    heard = Heard()
    fetch(tmp_path, SDIST, heard)
    assert (root / "demo/__init__.py").read_text() == "VALUE = 1\n"
    assert any("files changed since it was unpacked" in line for line in heard.lines), heard.lines
    heard = Heard()
    fetch(tmp_path, SDIST, heard)
    assert not any("again" in line for line in heard.lines), heard.lines  # untouched: kept
    (root / release.MARKER).write_text("demo-1.0.tar.gz\n")  # an older fixpack's marker: no digest
    (root / "demo/__init__.py").write_text("VALUE = 3\n")  # a change it cannot see (it was handed out before)
    heard = Heard()
    fetch(tmp_path, SDIST, heard)
    assert (root / "demo/__init__.py").read_text() == "VALUE = 1\n"
    assert any("older fixpack" in line and "unpacking it again" in line for line in heard.lines), heard.lines
    assert release.tree_digest(root) in (root / release.MARKER).read_text()  # vouched for from now on


def test_a_changed_copy_is_unpacked_again_from_the_checked_tarball_without_the_index(tmp_path):
    """The marker records the sdist's sha256 the index gave at the first unpack: a changed copy is unpacked
    again from the cached tarball with no index read while the tarball still has those bytes (offline works);
    a tarball whose bytes changed, or a marker without the digest, goes back to the index (here: none
    listening, so the fetch fails naming the index, and the cache is left as it was)."""
    root, _ = fetch(tmp_path, SDIST)
    assert f"{release.SDIST_KEY}{hashlib.sha256(SDIST).hexdigest()}" in (root / release.MARKER).read_text()
    dead = "http://127.0.0.1:9/simple/"  # the discard port: nothing answers
    (root / "demo/__init__.py").write_text("VALUE = 2\n")
    heard = Heard()
    again = release._fetch_sdist("demo", "1.0", "demo", tmp_path, heard, timeout=2, index=dead)
    assert again == root and (root / "demo/__init__.py").read_text() == "VALUE = 1\n"
    assert any("unpacking it again" in line for line in heard.lines), heard.lines
    assert not release.changed_since_unpack(root)
    (root / "demo/__init__.py").write_text("VALUE = 3\n")
    (tmp_path / "demo-1.0.tar.gz").write_bytes(SDIST[:-40])  # the tarball changed too: the index must say
    with pytest.raises(EnvironmentProblem, match="cannot read the index page of 'demo'"):
        release._fetch_sdist("demo", "1.0", "demo", tmp_path, Heard(), timeout=2, index=dead)
    assert (root / "demo/__init__.py").read_text() == "VALUE = 3\n"  # nothing unpacked from unchecked bytes
    (tmp_path / "demo-1.0.tar.gz").write_bytes(SDIST)
    (root / release.MARKER).write_text("demo-1.0.tar.gz\n")  # an older fixpack's marker: no sha256 recorded
    with pytest.raises(EnvironmentProblem, match="cannot read the index page"):
        release._fetch_sdist("demo", "1.0", "demo", tmp_path, Heard(), timeout=2, index=dead)


@pytest.mark.parametrize("kind", ["file", "link to a copy", "dangling link"])
def test_a_tree_entry_that_is_no_folder_is_refused_before_downloading(tmp_path, kind):
    """The copy's place (``demo-1.0``) holding a file or a symbolic link (to a modified tree, or nowhere): exit 5
    naming it and saying to remove it, before the index is read, and the cache left as it was. It was an
    internal error (NotADirectoryError, exit 1) after a whole download; a link to a folder holding a marker was
    handed out as the release copy (found by a fresh user)."""
    (tmp_path / "demo-1.0.tar.gz").write_bytes(SDIST)
    other = tmp_path.parent / f"{tmp_path.name}-other"
    if kind == "file":
        (tmp_path / "demo-1.0").write_text("not a folder\n")
    else:
        copy, _ = fetch(other, SDIST)  # a real release copy, then modified: a link is never trusted
        (copy / "demo/__init__.py").write_text("VALUE = 666\n")
        os.symlink(copy if kind == "link to a copy" else tmp_path / "gone", tmp_path / "demo-1.0")
    before = {p.name: (p.is_symlink(), p.read_bytes() if p.is_file() and not p.is_symlink() else None)
              for p in tmp_path.iterdir()}
    server, index, gets = serve(SDIST)
    try:
        with pytest.raises(EnvironmentProblem, match=r"demo-1\.0: .*not a folder.*remove it"):
            release._fetch_sdist("demo", "1.0", "demo", tmp_path, Heard(), timeout=5, index=index)
    finally:
        server.shutdown()
    assert gets == []
    assert {p.name: (p.is_symlink(), p.read_bytes() if p.is_file() and not p.is_symlink() else None)
            for p in tmp_path.iterdir()} == before


def test_a_copy_edited_with_its_size_and_time_kept_is_unpacked_again(tmp_path):
    """An edit that keeps the file's size and puts its modification time back (``touch -r``) was not seen (the
    digest covered paths, sizes and times only) and the edited tree was handed out as the release: the digest
    covers each file's bytes (found by a fresh user)."""
    root, _ = fetch(tmp_path, SDIST)
    f = root / "demo/__init__.py"
    st = f.stat()
    f.write_text("VALUE = 9\n")  # same size
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    heard = Heard()
    fetch(tmp_path, SDIST, heard)
    assert f.read_text() == "VALUE = 1\n"
    assert any("files changed since it was unpacked" in line for line in heard.lines), heard.lines
    os.chmod(f, 0o755)  # a mode change is a change too
    heard = Heard()
    fetch(tmp_path, SDIST, heard)
    assert f.stat().st_mode & 0o777 != 0o755 and any("files changed" in line for line in heard.lines)


def test_a_copy_marked_with_a_stat_digest_is_checked_again_from_the_cached_tarball(tmp_path):
    """A marker an earlier fixpack wrote records a digest of paths, sizes and times only: such a copy cannot be
    vouched for by content, so it is unpacked again once, from the cached tarball whose sha256 the marker
    records (no index: here none answers), and its new marker records the content digest."""
    root, _ = fetch(tmp_path, SDIST)
    marker = root / release.MARKER
    sha = hashlib.sha256(SDIST).hexdigest()
    marker.write_text(f"demo-1.0.tar.gz\n{release.SDIST_KEY}{sha}\ntree-sha256 {'0' * 64}\n")
    (root / "demo/__init__.py").write_text("VALUE = 7\n")
    heard = Heard()
    again = release._fetch_sdist("demo", "1.0", "demo", tmp_path, heard, timeout=2, index="http://127.0.0.1:9/simple/")
    assert again == root and (root / "demo/__init__.py").read_text() == "VALUE = 1\n"
    assert any("older fixpack" in line and "unpacking it again" in line for line in heard.lines), heard.lines
    assert f"{release.TREE_KEY}{release.tree_digest(root)}" in marker.read_text()
    # and an older fixpack sharing the cache still finds the digest it checks (it would unpack again each time)
    assert f"{release.STAT_KEY}{release.stat_digest(root)}" in marker.read_text()


def test_a_pin_the_copy_does_not_match_leaves_the_cached_copy_where_it_is(tmp_path, monkeypatch):
    """`fetch` of a profile whose commit pin the release does not carry removed the cached copy (under the readers of
    a shared cache: a test run beside it lost vllm-0.30.0 to a profile with a mistyped pin) and the next fetch
    unpacked it again. The copy is the release's: the pin is what is wrong. It is refused, and kept byte for byte."""
    from conftest import snapshot

    from fixpack.errors import MismatchError

    root = tmp_path / "demo-1.0"
    (root / "demo").mkdir(parents=True)
    (root / "demo/_version.py").write_text("__version__ = '1.0'\n__commit_id__ = 'gced6857af'\n")
    monkeypatch.setattr(release, "_fetch_sdist", lambda *args, **kw: root)
    before = snapshot(tmp_path)
    spec = TargetSpec("demo", "demo", "demo", Pin("1.0", "ced6858a"), Source(pypi="demo"))
    with pytest.raises(MismatchError, match="commit gced6857af != pinned ced6858a"):
        release.fetch(spec, tmp_path)
    assert snapshot(tmp_path) == before


def test_an_index_out_of_reach_is_said_with_what_takes_a_release_copy_instead(tmp_path):
    """fetch without the index said to point $GAUDI_FIXES_ROOT at release copies, which fetch does not read (the same
    error again: a fresh user's finding). It says which commands take a copy you have, and that fetch only downloads."""
    pytest.importorskip("pypi_simple")
    with pytest.raises(EnvironmentProblem) as exc:
        release._fetch_sdist("demo", "1.0", "demo", tmp_path, timeout=2, index="http://127.0.0.1:9/simple/")
    said = str(exc.value)
    assert said.startswith("cannot read the index page of 'demo': ") and "point $GAUDI_FIXES_ROOT" not in said
    assert said.endswith("Check the network; or give the command a clean release copy you have, where it takes one "
                         "(lock and edit: --root NAME=PATH; lock also $GAUDI_FIXES_ROOT, a folder of them): fetch "
                         "itself only downloads"), said
