"""The engine's progress hook: download bytes through pypi-simple's tracker, a stalled download given up
with a clear message, a line when a run waits for another run's lock."""

import fcntl
import http.server
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


class StallingIndex(http.server.BaseHTTPRequestHandler):
    """A real simple index on loopback whose sdist download sends 100 of its 1,000 bytes, then stalls."""

    def do_GET(self):
        if self.path.startswith("/simple/demo"):
            body = (b'<html><body><a href="/files/demo-1.0.tar.gz#sha256=' + b"0" * 64 +
                    b'">demo-1.0.tar.gz</a></body></html>')
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        self.wfile.write(b"x" * 100)
        self.wfile.flush()
        time.sleep(3)  # longer than the client's timeout: it must give up, not hang

    def log_message(self, *args):
        pass


def test_a_stalled_download_is_given_up_with_a_clear_message(tmp_path):
    pytest.importorskip("pypi_simple")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StallingIndex)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    heard = Heard()
    started = time.monotonic()
    try:
        with pytest.raises(EnvironmentProblem, match=r"no data for 1 s.*GAUDI_FIXES_ROOT"):
            release._fetch_sdist("demo", "1.0", "demo", tmp_path, heard, timeout=1,
                                 index=f"http://127.0.0.1:{server.server_address[1]}/simple/")
    finally:
        server.shutdown()
    assert time.monotonic() - started < 2.9  # given up at the timeout, before the server's stall ends
    assert heard.bytes[0][:3] == ("demo-1.0.tar.gz", 0, 1000) and heard.bytes[-1][3]
    assert not list(tmp_path.glob("*.tar.gz"))  # no half download kept as a release copy


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
