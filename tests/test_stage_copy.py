"""The pack's copy that refresh and import check a new lock in (packupdate._stage): a FIFO, socket or device
anywhere in the copied folders is refused by name before anything is written (it ended the copy in
shutil.Error: exit 1, an internal error), and a symbolic link is copied as the link it is, never read
through (a link to /dev/zero was read without end). And a refresh whose commit adds a symbolic link is refused at
that commit, before the stage (it named a line of a patch file that does not hold it)."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import pytest
from conftest import git
from test_authoring import MOD, amended, pack3, pack_bytes  # noqa: F401 (the fixture)

from fixpack.editrefresh import refresh_from_work
from fixpack.editwork import start
from fixpack.errors import BadInputError


def _edited(builder, clean) -> None:
    work = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    (work / MOD).write_text((work / MOD).read_text().replace("# a comment\n", "# a clearer comment\n"))
    git(work, "commit", "-qa", "--amend", "--no-edit")


def _alarm(seconds: int):
    def hung(*_):
        raise TimeoutError("the stage's copy hung")
    signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)


@pytest.mark.parametrize("kind", ["fifo", "socket"])
def test_a_fifo_or_socket_in_the_pack_is_named_and_nothing_is_written(pack3, kind):  # noqa: F811
    builder, clean = pack3
    _edited(builder, clean)
    (builder.pack / "docs").mkdir()
    special = builder.pack / "docs" / "special"
    if kind == "fifo":
        os.mkfifo(special)
    else:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(special))
    before = pack_bytes(builder.pack)
    _alarm(60)
    try:
        with pytest.raises(BadInputError) as exc:
            refresh_from_work(builder.pack, "b")
    finally:
        signal.alarm(0)
    said = str(exc.value)
    assert exc.value.exit_code == 2 and str(special) in said and "nothing was written" in said, said
    assert ("FIFO" in said) if kind == "fifo" else ("socket" in said), said
    assert f"rm -- {special}" in said, said
    assert pack_bytes(builder.pack) == before


def test_a_link_in_the_pack_is_copied_as_a_link_never_read(pack3):  # noqa: F811
    builder, clean = pack3
    _edited(builder, clean)
    (builder.pack / "docs").mkdir()
    (builder.pack / "docs" / "zero").symlink_to("/dev/zero")
    _alarm(120)
    try:
        done = refresh_from_work(builder.pack, "b")
    finally:
        signal.alarm(0)
    assert done is not None and "fixes/b/0001-change.patch" in done.outcome.written
    assert os.readlink(builder.pack / "docs" / "zero") == "/dev/zero"


def test_a_committed_symlink_is_refused_at_its_commit_never_at_a_patch_line_not_on_disk(pack3):  # noqa: F811
    # refresh named the fix's patch file and a line it does not have (the patch not yet written); now the commit
    builder, clean = pack3
    work = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    (work / "demo_pkg" / "evil_link").symlink_to("/etc/passwd")
    sha = amended(work)
    before = pack_bytes(builder.pack)
    with pytest.raises(BadInputError) as exc:
        refresh_from_work(builder.pack, "b")
    said = str(exc.value)
    assert f"commit {sha}:" in said and "symlink change to 'demo_pkg/evil_link' is not supported" in said, said
    assert "fixes/b/" not in said and pack_bytes(builder.pack) == before
