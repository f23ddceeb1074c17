"""The engine's progress hook: download bytes through pypi-simple's tracker, a stalled download given up
with a clear message, a line when a run waits for another run's lock."""

import fcntl
import os
import threading
import time

import pytest

from fixpack import release
from fixpack.errors import BusyError, EnvironmentProblem
from fixpack.progress import DownloadTracker, Progress
from fixpack.runlock import run_lock


class Heard(Progress):
    def __init__(self):
        self.lines, self.bytes = [], []

    def note(self, message):
        self.lines.append(message)

    def transfer(self, label, done, total, finished=False):
        self.bytes.append((label, done, total, finished))


def test_download_tracker_reports_bytes_and_the_end():
    heard = Heard()
    with DownloadTracker(heard, "x.tar.gz", 10) as t:
        t.update(4)
        t.update(6)
    assert heard.bytes == [("x.tar.gz", 0, 10, False), ("x.tar.gz", 4, 10, False), ("x.tar.gz", 10, 10, False),
                           ("x.tar.gz", 10, 10, True)]


class FakeIndex:
    """pypi-simple's client, with a download that stalls (a requests timeout is an OSError)."""

    def __init__(self, *a, **kw):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def get_project_page(self, project, timeout=None):
        pkg = type("Pkg", (), {"version": "1.0", "package_type": "sdist", "digests": {"sha256": "0" * 64},
                               "filename": "demo-1.0.tar.gz", "url": "https://index.invalid/demo-1.0.tar.gz"})()
        return type("Page", (), {"packages": [pkg]})()

    def download_package(self, pkg, path, verify=True, progress=None, timeout=None):
        with progress(1000) as tracker:
            tracker.update(100)
            raise TimeoutError(f"read timed out (timeout={timeout})")


def test_a_stalled_download_is_given_up_with_a_clear_message(tmp_path, monkeypatch):
    pypi_simple = pytest.importorskip("pypi_simple")
    monkeypatch.setattr(pypi_simple, "PyPISimple", FakeIndex)
    heard = Heard()
    with pytest.raises(EnvironmentProblem, match=r"no data for 2 s.*GAUDI_FIXES_ROOT"):
        release._fetch_sdist("demo", "1.0", "demo", tmp_path, heard, timeout=2)
    assert heard.bytes[0] == ("demo-1.0.tar.gz", 0, 1000, False) and heard.bytes[-1][3]


def test_waiting_for_the_lock_is_heard_once(tmp_path):
    heard = Heard()
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    threading.Timer(0.3, os.close, [fd]).start()
    start = time.monotonic()
    with run_lock(tmp_path, wait=5, progress=heard):
        pass
    assert time.monotonic() - start >= 0.25
    assert len(heard.lines) == 1 and str(tmp_path) in heard.lines[0] and "up to 5 s" in heard.lines[0]
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(BusyError), run_lock(tmp_path, wait=0.1, progress=heard):
            pass
    finally:
        os.close(fd)
