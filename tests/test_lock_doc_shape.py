"""A reviewer's finding: only a lock's fix entries were read as ``lock`` writes them. A key it never writes (at the
top, in a target's entry, in a component's), a "generated_by" of 5, "targets" a string (read as no targets), a
target's "commit" of 123 and a component file's sha256 that is no sha256 were taken, a lock sealed again after the
edit (its seal is a plain sha256) passing every command. The whole lock is read as ``lock`` writes it
(fixpack/lock_shape.py): exit 2 at the line of what is not, naming it, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO, snapshot
from test_lock_bump import fixpack
from test_lock_shape import pack  # noqa: F401 (the fixture)

from fixpack.errors import StaleLockError
from fixpack.records import Lock, dumps, lock_digest

COMMITTED = REPO / "profiles/v0.30.0.lock"  # a lock with targets and components, as `lock` wrote it


def _line(text: str, mark: str, nth: int = 0) -> int:
    """The 1-based line that is ``mark`` (its ``nth`` occurrence), trailing comma aside."""
    return [n for n, ln in enumerate(text.splitlines(), 1) if ln.rstrip(",") == mark][nth]


def _comp(n: int, **change):
    return lambda d: d["components"][n].update(change)


# edit of the lock's JSON, what it says, the line it names (the mark that line is; None: no line)
CASES = {
    "a key at the top": (lambda d: d.update(foo=1), 'it has a key "foo", which `fixpack lock` never writes',
                         ('  "foo": 1',)),
    "generated_by an integer": (lambda d: d.update(generated_by=5), 'its "generated_by" is 5, not a string',
                                ('  "generated_by": 5',)),
    "no generated_by": (lambda d: d.pop("generated_by"), 'it has no "generated_by"', None),
    "targets a string": (lambda d: d.update(targets="vllm"), 'its "targets" is "vllm", not an object of target name',
                         ('  "targets": "vllm"',)),
    "no targets": (lambda d: d.pop("targets"), 'it has no "targets"', None),
    "components an object": (lambda d: d.update(components={}), 'its "components" is {}, not a list',
                             ('  "components": {}',)),
    "a target's entry a string": (lambda d: d["targets"].update(vllm="0.30.0"),
                                  'its "targets" entry "vllm" is not one `fixpack lock` writes: it is "0.30.0", not an '
                                  'object of version and commit', ('    "vllm": "0.30.0"',)),
    "a target's commit an integer": (lambda d: d["targets"]["vllm"].update(commit=123),
                                     'its "targets" entry "vllm" is not one `fixpack lock` writes: its "commit" is 123, '
                                     'not a commit id (7 to 40 hex digits', ('      "commit": 123',)),
    # a fresh user: a commit or version with a newline (the pin check then printed it raw and advised writing it
    # into the profile)
    "a target's commit with a newline": (lambda d: d["targets"]["vllm"].update(commit="gced6857af\n"),
                                         'its "targets" entry "vllm" is not one `fixpack lock` writes: its "commit" is '
                                         '"gced6857af\\n", not a commit id', ('      "commit": "gced6857af\\n"',)),
    "a target's version with a newline": (lambda d: d["targets"]["vllm"].update(version="0.30.0\n"),
                                          'its "targets" entry "vllm" is not one `fixpack lock` writes: its "version" '
                                          'is "0.30.0\\n", not a version', ('      "version": "0.30.0\\n"',)),
    # a second attacker: an entry for a target the lock holds no fix of was compared with the profile's pin, and the
    # message advised writing its value there; one for a name the profile has not was taken
    "an entry for a target without fixes": (lambda d: d["targets"].update({"vllm-gaudi": {"commit": "1234567",
                                                                                        "version": "1.0"}}),
                                            'its "targets" entry "vllm-gaudi" is not one `fixpack lock` writes: it '
                                            'names a target no fix entry of the lock has', ('    "vllm-gaudi": {',)),
    "the entry renamed": (lambda d: d.update(targets={"vllm-gaudi": d["targets"]["vllm"]}),
                          'its "targets" entry "vllm-gaudi" is not one `fixpack lock` writes: it names a target no fix '
                          'entry of the lock has', ('    "vllm-gaudi": {',)),
    "an entry for a name of no target": (lambda d: d["targets"].update(foo={"commit": "gdeadbeef1", "version": "9.9"}),
                                         'its "targets" entry "foo" is not one `fixpack lock` writes: it names a '
                                         'target no fix entry of the lock has', ('    "foo": {',)),
    "a fix id with a newline": (lambda d: d["fixes"][0].update(id="logprobs-decode-guard\n"),
                                'is not one `fixpack lock` writes: its "id" is "logprobs-decode-guard\\n", not a fix id',
                                ('      "id": "logprobs-decode-guard\\n"',)),
    "a key in a target's entry": (lambda d: d["targets"]["vllm"].update(foo="x"),
                                  'its "targets" entry "vllm" is not one `fixpack lock` writes: it has a key "foo"',
                                  ('      "foo": "x"',)),
    "a target's entry without its commit": (lambda d: d["targets"]["vllm"].pop("commit"),
                                            'its "targets" entry "vllm" is not one `fixpack lock` writes: it has no '
                                            '"commit"', ('    "vllm": {',)),
    "a key in a component's entry": (_comp(1, foo="x"), 'entry 2 of its "components" (id "mxfp4-moe") is not one '
                                     '`fixpack lock` writes: it has a key "foo"', ('      "foo": "x"',)),
    "a component's version an integer": (_comp(0, version=2), 'entry 1 of its "components" (id "muse-spark-open") is '
                                         'not one `fixpack lock` writes: its "version" is 2, not a version',
                                         ('      "version": 2',)),
    "a component's file hash an integer": (lambda d: d["components"][0]["files"].update({"muse_spark_open/env.py": 5}),
                                           'its file "muse_spark_open/env.py" records 5, not a sha256',
                                           ('        "muse_spark_open/env.py": 5',)),
    "a component's file hash no sha256": (lambda d: d["components"][0]["files"].update(
                                              {"muse_spark_open/env.py": "ABC"}),
                                          'its file "muse_spark_open/env.py" records "ABC", not a sha256',
                                          ('        "muse_spark_open/env.py": "ABC"',)),
    "a component's file outside": (lambda d: d["components"][0]["files"].update({"../x.py": "0" * 64}),
                                   "its file \"../x.py\" is not a path relative, inside the target (a '..' segment",
                                   (f'        "../x.py": "{"0" * 64}"',)),
    "a component twice": (_comp(1, id="muse-spark-open"), 'entry 2 of its "components" (id "muse-spark-open") is not '
                          'one `fixpack lock` writes: it is a second entry of component muse-spark-open (entry 1 is '
                          'the first)', ('      "id": "muse-spark-open"', 1)),
    "a component entry no object": (lambda d: d["components"].append("x"), 'entry 3 of its "components" is not one '
                                    '`fixpack lock` writes: it is not a JSON object', ('    "x"',)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_lock_not_as_lock_writes_it_outside_its_fixes_is_refused_at_its_line(tmp_path: Path, case: str) -> None:
    edit, what, mark = CASES[case]
    data = json.loads(COMMITTED.read_text())
    edit(data)
    data["digest"] = lock_digest(data)  # sealed again: the seal is a plain sha256
    raw = dumps(data)
    path = tmp_path / "v0.30.0.lock"
    with pytest.raises(StaleLockError) as exc:
        Lock.from_json(raw, path, "v0.30.0")
    line = _line(raw.decode(), *mark) if mark else None
    assert exc.value.line == line and what in exc.value.what, (exc.value.line, line, str(exc.value))
    assert str(exc.value).startswith(f"{path}{f':{line}' if line else ''}: "), str(exc.value)
    assert "; regenerate it from a clean release copy: " in str(exc.value) and "lock --profile v0.30.0" in \
        str(exc.value), str(exc.value)


# on the test pack (target demo): edit, what it says, the line it names
ON_THE_PACK = {
    "a target's commit an integer": (lambda d: d["targets"]["demo"].update(commit=123),
                                     'its "targets" entry "demo" is not one `fixpack lock` writes: its "commit" is 123, '
                                     'not a commit id (7 to 40 hex digits, after a "g" as setuptools-scm writes it) or '
                                     '"" (none found)', '      "commit": 123'),
    "a key at the top": (lambda d: d.update(foo=1), 'it has a key "foo", which `fixpack lock` never writes',
                         '  "foo": 1'),
    "generated_by an integer": (lambda d: d.update(generated_by=5), 'its "generated_by" is 5, not a string',
                                '  "generated_by": 5'),
}


@pytest.mark.parametrize("case", list(ON_THE_PACK))
def test_every_command_refuses_such_a_lock_and_writes_nothing(pack, case):  # noqa: F811
    b, clean, image = pack
    lock = b.pack / "profiles/p1.lock"
    edit, what, mark = ON_THE_PACK[case]
    data = json.loads(lock.read_text())
    edit(data)
    data["digest"] = lock_digest(data)
    lock.write_bytes(dumps(data))
    line = _line(lock.read_text(), mark)
    before = snapshot(b.base)
    for args in (["status"], ["apply", "--dry-run"], ["apply"]):
        r = fixpack(*args, "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
        said = " ".join(r.stderr.split())
        assert r.returncode == 2 and f"{lock}:{line}: {what}; regenerate it" in said, (args, said)
        assert snapshot(b.base) == before, args
    for args in (["lock", "--check", "-p", "p1", "--root", f"demo={clean}"], ["check"]):
        r = fixpack(*args, "--pack", str(b.pack))
        said = " ".join((r.stdout + r.stderr).split())
        assert r.returncode == 2 and what in said and "lock is fresh" not in said, (args, said)
    assert snapshot(b.base) == before


@pytest.mark.parametrize("key", ["commit", "version", "targets"])
def test_a_targets_entry_emptied_is_no_release_and_is_refused(pack, key):  # noqa: F811
    """A fresh user: a "targets" commit (or version) set to "", or the target's entry removed, and the
    lock sealed again passed check, status and apply: the pin check compared only a value that was there, and an image
    of another commit of the pin was patched. `lock` holds the release it locks to the profile's pin, so it never
    records none where the profile pins one: exit 2 from every run, at the profile's pin, nothing written."""
    b, clean, image = pack
    lock = b.pack / "profiles/p1.lock"
    data = json.loads(lock.read_text())
    if key in ("commit", "version"):
        data["targets"]["demo"][key] = ""
    else:
        data["targets"] = {}
        key = "version"  # (the first of the pin the lock does not hold)
    data["digest"] = lock_digest(data)
    lock.write_bytes(dumps(data))
    before = snapshot(b.base)
    for args in (["status"], ["apply", "--dry-run"], ["apply"], ["check"]):
        r = fixpack(*args, "--pack", str(b.pack), *(["-p", "p1", "--root", f"demo={image}"] if args != ["check"] else []))
        said = " ".join((r.stdout + r.stderr).split())
        assert r.returncode == 2 and f"target demo: pinned to {key} " in said, (args, said)
        assert "the lock records none (`lock` records the release's, which it holds to the pin): it was edited by " \
               "hand" in said, (args, said)
        assert snapshot(b.base) == before, args
