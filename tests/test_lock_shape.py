"""A fresh user's report: a lock edited and sealed again (its seal is a plain sha256 over its content) whose hunk lost
its ``pre_count`` (removed or null) while its ``post_count`` stayed, or both, passed `status`, `apply --dry-run` and
`apply` (exit 0, written); a ``post_count`` removed was said as "records post_count None" at the next hunk's line; a
file entry twice in a fix's ``files`` was said as the fix's post-image and its own pre-image differing, at the first
entry's lines; ``"target": 5`` was taken (said as "5" later) and a key ``lock`` never writes (in a fix, file or hunk
entry) was taken silently, `lock --check` calling the lock fresh. A lock's fix entries are read as ``lock`` writes
them (fixpack/lock_shape.py): exit 2 at the line of what is not, naming the entry and what, nothing written."""

from __future__ import annotations

import json

import pytest
from conftest import numbered, snapshot
from test_lock_bump import MOD, fixpack

from fixpack.records import dumps, lock_digest

OTHER = "demo_pkg/other.py"
BASE = numbered(20)
ONE = BASE.replace("line 3\n", "three\n").replace("line 15\n", "fifteen\n")  # two hunks in MOD


@pytest.fixture
def pack(builder):
    """Fix one (two hunks of MOD, one of OTHER) and fix two (one hunk of MOD) in profile p1, locked; a clean image."""
    b = builder
    clean = b.tree("clean", {MOD: BASE, OTHER: BASE})
    b.add_fix("one", {MOD: BASE, OTHER: BASE}, {MOD: ONE, OTHER: BASE.replace("line 2\n", "two\n")})
    b.add_fix("two", {MOD: ONE}, {MOD: ONE.replace("line 9\n", "nine\n")})
    b.profile(["one", "two"])
    b.lock(clean)
    return b, clean, b.tree("image", {MOD: BASE, OTHER: BASE})


def _reseal(lock, edit) -> None:
    """The lock's "fixes" edited, sealed again and written as `lock` writes one."""
    data = json.loads(lock.read_text())
    edit(data["fixes"])
    data["digest"] = lock_digest(data)
    lock.write_bytes(dumps(data))


def hunk_line(lock, fix: int, k: int) -> int:
    """The 1-based first line (its ``{``) of the ``k``-th hunk entry of the ``fix``-th fix entry."""
    lines = lock.read_text().splitlines()
    starts = [n for n, ln in enumerate(lines) if ln == "    {"]
    hunks = next(n for n in range(starts[fix], len(lines)) if lines[n] == '      "hunks": [')
    return [n for n in range(hunks, len(lines)) if lines[n] == "        {"][k] + 1


def key_line(lock, fix: int, key: str, after: int = 0) -> int:
    """The 1-based line of ``key`` first after line ``after`` in the ``fix``-th fix entry."""
    lines = lock.read_text().splitlines()
    start = max([n for n, ln in enumerate(lines) if ln == "    {"][fix], after)
    return next(n for n in range(start, len(lines)) if lines[n].strip().startswith(f'"{key}": ')) + 1


def _files(lock, fix: int, k: int) -> int:
    """The 1-based first line of the ``k``-th file entry of the ``fix``-th fix entry."""
    lines = lock.read_text().splitlines()
    start = [n for n, ln in enumerate(lines) if ln == "    {"][fix]
    return [n for n in range(start, len(lines)) if lines[n] == "        {"][k] + 1


def _drop(*keys: str):
    return lambda h: [h.pop(k) for k in keys]


# edit of "fixes", (fix entry, what it says, where: its line in the resealed lock)
CASES = {
    "pre_count removed": (lambda f: _drop("pre_count")(f[0]["hunks"][0]), 0,
                          f"its hunk #1 of {MOD} records post_count but no pre_count: `fixpack lock` writes both or "
                          f"neither", lambda lock: hunk_line(lock, 0, 0)),
    "pre_count null": (lambda f: f[0]["hunks"][0].update(pre_count=None), 0,
                       f"its hunk #1 of {MOD}: its \"pre_count\" is null, not an integer of 0 or more",
                       lambda lock: key_line(lock, 0, "pre_count", hunk_line(lock, 0, 0))),
    "post_count removed": (lambda f: _drop("post_count")(f[0]["hunks"][0]), 0,
                           f"its hunk #1 of {MOD} records pre_count but no post_count: `fixpack lock` writes both or "
                           f"neither", lambda lock: hunk_line(lock, 0, 0)),
    "both removed from one hunk": (lambda f: _drop("pre_count", "post_count")(f[0]["hunks"][1]), 0,
                                   f"its hunk #2 of {MOD} records no pre_count and post_count where its fix's other "
                                   f"hunks record them: `fixpack lock` counts every hunk of a fix it lays, or none",
                                   lambda lock: hunk_line(lock, 0, 1)),
    "both removed from a fix's only hunk": (lambda f: _drop("pre_count", "post_count")(f[1]["hunks"][0]), 1,
                                            f"its hunk #1 of {MOD} records no pre_count and post_count, where the lock "
                                            f"records them for the hunks of target demo's other fixes: `fixpack lock` "
                                            f"counts every hunk of a fix it lays there", lambda lock: hunk_line(lock, 1, 0)),
    "a file entry twice": (lambda f: f[0]["files"].append(dict(f[0]["files"][0])), 0,
                           f"its file entry 3 ({MOD}) is a second entry of {MOD} (its file entry 1 is the first): "
                           f"`fixpack lock` records each file of a fix once", lambda lock: _files(lock, 0, 2)),
    "target an integer": (lambda f: f[0].update(target=5), 0, "its \"target\" is 5, not a string",
                          lambda lock: key_line(lock, 0, "target")),
    "a key in a fix entry": (lambda f: f[0].update(foo=1), 0,
                             "it has a key \"foo\", which `fixpack lock` never writes", lambda lock: key_line(lock, 0, "foo")),
    "a key in a hunk entry": (lambda f: f[0]["hunks"][1].update(foo=1), 0,
                              f"its hunk #2 of {MOD} has a key \"foo\", which `fixpack lock` never writes",
                              lambda lock: key_line(lock, 0, "foo")),
    "a key in a file entry": (lambda f: f[0]["files"][1].update(foo=1), 0,
                              f"its file entry 2 ({OTHER}) has a key \"foo\", which `fixpack lock` never writes",
                              lambda lock: key_line(lock, 0, "foo")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_fix_entry_not_as_lock_writes_it_is_refused_at_its_line(pack, case):
    b, clean, image = pack
    lock = b.pack / "profiles/p1.lock"
    edit, fix, what, where = CASES[case]
    _reseal(lock, edit)
    said_at = f"{lock}:{where(lock)}: entry {fix + 1} of its \"fixes\" (id \"{('one', 'two')[fix]}\") is not one " \
              f"`fixpack lock` writes: {what}; regenerate it"
    before = snapshot(b.base)
    for args in (["status"], ["apply", "--dry-run"], ["apply"]):
        r = fixpack(*args, "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
        said = " ".join(r.stderr.split())
        assert r.returncode == 2 and snapshot(b.base) == before, (args, said)
        assert said_at in said, (args, said)
    r = fixpack("lock", "--check", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={clean}")
    said = " ".join(r.stderr.split())
    assert r.returncode == 2 and what in said and "lock is fresh" not in r.stdout, said
    r = fixpack("check", "--pack", str(b.pack))
    assert r.returncode == 2 and what in " ".join((r.stdout + r.stderr).split()), r.stdout + r.stderr
    assert snapshot(b.base) == before


def test_a_lock_that_counts_no_hunk_is_taken(pack):
    """A lock from before counts were kept records none for any hunk: it is read as it was (the counts are evidence
    the placement rule uses where they are there), and so is a fix the release holds (lock counts none of its)."""
    b, _clean, image = pack
    _reseal(b.pack / "profiles/p1.lock", lambda f: [_drop("pre_count", "post_count")(h) for e in f for h in e["hunks"]])
    r = fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
    assert r.returncode == 0 and (image / MOD).read_text() == ONE.replace("line 9\n", "nine\n"), r.stderr
