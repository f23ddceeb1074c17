"""A manifest's keys each as every fixpack writes them, else damaged state (exit 3, naming the key, nothing
written), from every command. Found by a fresh user: a "profile" that was no string (null, 1, true) was
``internal error: TypeError("object of type 'NoneType' has no len()")``, exit 1, from status and revert; a
manifest with no "schema" or no "profile", one whose "target" is not the target its file name names, and a
fix version of 10**20 or -1 were taken as they were. A fix's version is one rule for fix.toml, variant.toml
and the manifest: an integer from 1 to 2**63 - 1 (TOML's integers)."""

from __future__ import annotations

import json

import pytest
from conftest import numbered
from test_state_untrusted import COMMANDS, MOD, _everything, outcome, world  # noqa: F401 (the fixture)

from fixpack import engine
from fixpack.errors import FixpackError


def _fix_version(value):
    def change(m):
        m["fixes"][0]["version"] = value
    return change


def _set(key, value):
    return lambda m: m.update({key: value})


def _drop(key):
    return lambda m: m.pop(key)


CASES = {
    "profile null": (_set("profile", None), "key 'profile' is null, not a string"),
    "profile 1": (_set("profile", 1), "key 'profile' is 1, not a string"),
    "profile true": (_set("profile", True), "key 'profile' is true, not a string"),
    "target null": (_set("target", None), "key 'target' is null, not a string"),
    "no profile": (_drop("profile"), "key 'profile' is missing (every manifest fixpack writes has it)"),
    "no schema": (_drop("schema"), "key 'schema' is missing (every manifest fixpack writes has it)"),
    "no target": (_drop("target"), "key 'target' is missing (every manifest fixpack writes has it)"),
    "another target": (_set("target", "vllm-gaudi"), "key 'target' is \"vllm-gaudi\", not 'demo' (the file's name)"),
    "version 10**20": (_fix_version(10**20), "fix entry 1: one: its version 100000000000000000000 is not an integer "
                                             "from 1 to 9223372036854775807"),
    "version -1": (_fix_version(-1), "fix entry 1: one: its version -1 is not an integer from 1"),
    "version 0": (_fix_version(0), "fix entry 1: one: its version 0 is not an integer from 1"),
    "version true": (_fix_version(True), "fix entry 1: one: its version true is not an integer from 1"),
    # a check made with re.match and "$" took a value that ends in a newline: the whole value is checked
    "patch_sha256 and a newline": (lambda m: m["fixes"][0].update(patch_sha256=m["fixes"][0]["patch_sha256"] + "\n"),
                                   "fix entry 1: one: its patch_sha256 \""),  # (its value, not 'needs')
    # the patch bytes a fix was applied from (absent in older manifests): a sha256 where it is there
    "patch_bytes_sha256 and a newline": (lambda m: m["fixes"][0].update(
        patch_bytes_sha256=m["fixes"][0]["patch_bytes_sha256"] + "\n"),
        "fix entry 1: one: its patch_bytes_sha256 is not a sha256"),
    "patch_bytes_sha256 null": (lambda m: m["fixes"][0].update(patch_bytes_sha256=None),
                                "fix entry 1: one: its patch_bytes_sha256 is not a sha256"),
    # where a fix's first hunk was laid, per file (absent in older manifests: 0 everywhere)
    "offsets a list": (lambda m: m["fixes"][0].update(offsets=[1]),
                       "fix entry 1: one: its offsets are not an object of path -> lines"),
    "offsets of another file": (lambda m: m["fixes"][0].update(offsets={"demo_pkg/other.py": 1}),
                                "fix entry 1: one: its offsets name \"demo_pkg/other.py\", which is not one of its "
                                "files"),
    "offset true": (lambda m: m["fixes"][0].update(offsets={MOD: True}),
                    f"fix entry 1: one: its offset in {MOD} is true, not a whole number of lines (at most 2147483648 either way)"),
    "offset 1.5": (lambda m: m["fixes"][0].update(offsets={MOD: 1.5}),
                   f"fix entry 1: one: its offset in {MOD} is 1.5, not a whole number of lines (at most 2147483648 either way)"),
    "offset 2**40": (lambda m: m["fixes"][0].update(offsets={MOD: 2**40}),
                     f"fix entry 1: one: its offset in {MOD} is 1099511627776, not a whole number of lines (at most 2147483648 either way)"),
    # each hunk's offset, where a file's hunks were laid at offsets not all the same (absent elsewhere)
    "hunk_offsets a list": (lambda m: m["fixes"][0].update(hunk_offsets=[0, 1]),
                            "fix entry 1: one: its hunk_offsets are not an object of path -> a list of lines"),
    "hunk_offsets of another file": (lambda m: m["fixes"][0].update(hunk_offsets={"demo_pkg/other.py": [0, 1]}),
                                     "fix entry 1: one: its hunk_offsets name \"demo_pkg/other.py\", which is not "
                                     "one of its files"),
    "hunk_offsets one": (lambda m: m["fixes"][0].update(hunk_offsets={MOD: [0]}),
                         f"fix entry 1: one: its hunk offsets in {MOD} are [0], not a list of 2 to 1048576 whole"),
    "hunk_offsets 1.5": (lambda m: m["fixes"][0].update(hunk_offsets={MOD: [0, 1.5]}),
                         f"fix entry 1: one: its hunk offsets in {MOD} are [0, 1.5], not a list of 2 to"),
    "hunk_offsets alike": (lambda m: m["fixes"][0].update(hunk_offsets={MOD: [0, 0]}),
                           f"fix entry 1: one: its hunk offsets in {MOD} are [0, 0]: all the same (written only "
                           f"where they differ)"),
    "hunk_offsets not its offset": (lambda m: m["fixes"][0].update(hunk_offsets={MOD: [2, 0]}),
                                    f"fix entry 1: one: its hunk offsets in {MOD} are [2, 0]: the first is not its "
                                    f"offset there (0)"),
    "a component id and a newline": (_set("components", [{"id": "tiny-plug\n", "version": "0.3.0",
                                                          "dist_info": "tiny_plug-0.3.0.dist-info",
                                                          "files": {"tiny_plug/__init__.py": "0" * 64}}]),
                                     "component entry 1: not an object with id, version, dist_info and files"),
    # a fresh user: a component's version with a newline was printed raw in the dist-info message
    "a component version and a newline": (_set("components", [{"id": "tiny-plug", "version": "0.3.0\n",
                                                               "dist_info": "tiny_plug-0.3.0.dist-info",
                                                               "files": {"tiny_plug/__init__.py": "0" * 64}}]),
                                          "component entry 1: not an object with id, version, dist_info and files"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_manifest_key_not_as_fixpack_writes_it_is_damaged_state(world, case):  # noqa: F811
    b, target, outside = world
    change, said = CASES[case]
    path = target / ".fixpack/demo.manifest.json"
    m = json.loads(path.read_text())
    change(m)
    path.write_text(json.dumps(m))
    before = _everything(target, outside)
    for name, run in COMMANDS.items():
        code, message = outcome(lambda: run(b, target))
        assert code == 3 and f"{path} is damaged: not a valid fixpack manifest: {said}" in message, (name, message)
        assert _everything(target, outside) == before, f"{name} changed files"


def test_the_manifest_as_written_is_read(world):  # noqa: F811
    b, target, _outside = world
    assert engine.status(b.request(target)).exit_code == 0


@pytest.mark.parametrize("where, text", [("fix.toml", "version = 100000000000000000000"),
                                         ("fix.toml", "version = -1"),
                                         ("v1/variant.toml", "version = 100000000000000000000"),
                                         ("v1/variant.toml", "version = true")])
def test_a_fix_version_past_the_rule_is_bad_input(builder, where, text):
    base = numbered(10)
    builder.tree("clean", {MOD: base})
    folder = builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.profile(["one"], name="v1")
    path = folder / where
    if where == "fix.toml":
        path.write_text(path.read_text().replace("version = 1", text))
    else:
        path.parent.mkdir()
        path.write_text(text + "\n")
        (path.parent / "0001-change.patch").write_bytes((folder / "0001-change.patch").read_bytes())
    image = builder.tree("image", {MOD: base})
    with pytest.raises(FixpackError) as exc:
        engine.status(builder.request(image, "v1"))
    assert exc.value.exit_code == 2, str(exc.value)
    line = next(n for n, ln in enumerate(path.read_text().splitlines(), 1) if ln.startswith("version"))
    assert f"fixes/one/{where}:{line}: 'version' must be an integer from 1 to 9223372036854775807" in str(exc.value)


def _twice(m):
    m["fixes"].append(dict(m["fixes"][0]))


LINED = {  # a manifest laid out as fixpack writes it: each problem said at the line that holds it
    "a fix recorded twice": (_twice, '"id": "one"', 2, "fix entry 3: fix one is recorded twice (entry 1 too)"),
    "a file no entry records": (lambda m: m["files"].update({"demo_pkg/zz.py": "0" * 64}), '"demo_pkg/zz.py"', 1,
                                "'files' records demo_pkg/zz.py, which no applied fix's entry records"),
    "an entry's file 'files' lacks": (lambda m: m["fixes"][1]["files"].update({"demo_pkg/zz.py": "0" * 64}),
                                      '"demo_pkg/zz.py"', 1, "fix entry 2 records demo_pkg/zz.py, which 'files' lacks"),
    "an offset's value": (lambda m: m["fixes"][1].update(offsets={"demo_pkg/b.py": "x"}), '"demo_pkg/b.py": "x"', 1,
                          "fix entry 2: two: its offset in demo_pkg/b.py is \"x\""),
    "a hunk offset": (lambda m: m["fixes"][1].update(offsets={MOD: 1}, hunk_offsets={MOD: [1, 3], "demo_pkg/b.py": [0]}),
                      '"demo_pkg/b.py": [', 1, "fix entry 2: two: its hunk offsets in demo_pkg/b.py are [0]"),
    "an entry's path": (lambda m: m["fixes"][1]["files"].update({"demo_pkg/../zz": "0" * 64}), '"demo_pkg/../zz"', 1,
                        "fix entry 2: two's files names 'demo_pkg/../zz'"),
}


@pytest.mark.parametrize("case", sorted(LINED))
def test_a_manifest_problem_is_said_at_its_line(world, case):  # noqa: F811
    """A fresh user: a fix recorded twice, 'files' that are not the applied fixes' files, and an offset's value were
    said with no line, or at the line of the key that holds them."""
    b, target, outside = world
    change, text, nth, said = LINED[case]
    path = target / ".fixpack/demo.manifest.json"
    m = json.loads(path.read_text())
    change(m)
    path.write_text(json.dumps(m, indent=2, sort_keys=True) + "\n")
    line = [n for n, ln in enumerate(path.read_text().splitlines(), 1) if text in ln][nth - 1]
    before = _everything(target, outside)
    for name, run in COMMANDS.items():
        code, message = outcome(lambda: run(b, target))
        assert code == 3 and f"not a valid fixpack manifest: line {line}: " in message and said in message, (
            name, message)
        assert _everything(target, outside) == before, f"{name} changed files"


def test_files_edited_where_the_file_is_as_its_last_fix_left_it_is_damaged_state(world):  # noqa: F811
    """A fresh user: the manifest's own 'files' given another sha256 for a file that is as the last applied fix on it
    left it (its entry records the file's very sha256) was called tampered, with advice to put the release's files
    back; 'files' is what was edited: damaged state at its line, from every command, nothing written."""
    b, target, outside = world
    path = target / ".fixpack/demo.manifest.json"
    m = json.loads(path.read_text())
    m["files"][MOD] = "0" * 64
    path.write_text(json.dumps(m, indent=2, sort_keys=True) + "\n")
    line = next(n for n, ln in enumerate(path.read_text().splitlines(), 1) if ln.startswith(f'    "{MOD}": "000'))
    before = _everything(target, outside)
    for name, run in COMMANDS.items():
        code, message = outcome(lambda: run(b, target))
        assert code == 3 and f"line {line}: 'files' records {MOD} at sha256 000000000000, where the file is " in \
            message and "tampered" not in message, (name, message)
        assert _everything(target, outside) == before, f"{name} changed files"
