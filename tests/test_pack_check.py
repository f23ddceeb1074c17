"""`fixpack check`, the pack lint: each finding named by file and line, exit 2; a clean pack exits 0."""

import json
import subprocess
import sys

import pytest
from conftest import REPO, numbered
from test_components import setup_pack

from fixpack.pack_check import check_pack
from fixpack.progname import program

MOD = "demo_pkg/mod.py"


@pytest.fixture
def setup(builder):
    base = numbered(20)
    clean = builder.tree("clean", {MOD: base})
    for fid, line in (("one", "line 3\n"), ("two", "line 15\n")):
        folder = builder.add_fix(fid, {MOD: base}, {MOD: base.replace(line, line.upper())})
        (folder / f"test_{fid}.py").write_text("def test_it():\n    pass\n")
    builder.profile(["one", "two"])
    builder.lock(clean)
    return builder, clean


def findings(b, fresh=None):
    return [str(f) for f in check_pack(b.pack, fresh)[0]]


def test_a_clean_pack_has_no_finding(setup):
    b, clean = setup
    assert check_pack(b.pack) == ([], ["p1"])
    assert check_pack(b.pack, fresh=lambda pack, profile: {"demo": clean}) == ([], ["p1"])


def test_a_fix_in_no_profile_unless_retired(setup):
    b, _ = setup
    b.profile(["one"])
    b.lock(b.base / "clean")
    assert findings(b) == ["fixes/series:2: fix two is in no profile: it is never applied (add it to a profile's "
                           "[fixes] default or opt_in, or set retired = \"why\" in fixes/two/fix.toml)"]
    toml = b.pack / "fixes/two/fix.toml"
    toml.write_text('retired = "upstream took it in 1.1"\n' + toml.read_text())
    assert findings(b) == []
    b.profile(["one", "two"])
    b.lock(b.base / "clean")
    assert findings(b) == ["fixes/two/fix.toml: fix two is retired (upstream took it in 1.1) but profile(s) p1 list "
                           "it (drop it from those profiles, or remove 'retired' from its fix.toml)"]


def test_a_profile_listing_fixes_out_of_series_order_is_named_at_its_key(setup):
    """Runs apply a profile's fixes in series order whatever it lists: another order there reads as a choice
    that has no effect, so check names it at the key's line with the order that runs."""
    b, clean = setup
    b.profile(["two", "one"])
    b.lock(clean)
    text = (b.pack / "profiles/p1.toml").read_text().splitlines()
    line = next(n for n, ln in enumerate(text, 1) if ln.startswith("default ="))
    assert findings(b) == [f"profiles/p1.toml:{line}: [fixes] default lists its fixes in another order than "
                           f"fixes/series; runs apply them in series order, so this order has no effect (list them "
                           f"in series order: default = [\"one\", \"two\"], or move them in fixes/series if the "
                           f"order matters)"]
    b.profile(["one", "two"])
    b.lock(clean)
    assert findings(b) == []


def test_a_fix_without_a_proof(setup):
    b, _ = setup
    (b.pack / "fixes/two/test_two.py").unlink()
    toml = b.pack / "fixes/two/fix.toml"
    toml.write_text("# fix two\n\n" + toml.read_text())  # its id on line 3
    assert findings(b) == ["fixes/two/fix.toml:3: fix two has no proof: no test_*.py beside this fix.toml (add "
                           "fixes/two/test_<name>.py, a test that fails on the clean release and passes once the fix "
                           "is applied)"]


def test_a_patch_that_does_not_parse_and_a_fix_toml_that_does_not_validate(setup):
    b, _ = setup
    patch = b.pack / "fixes/one/0001-change.patch"
    patch.write_text(patch.read_text().replace(" line 4\n", "line 4\n"))
    toml = b.pack / "fixes/two/fix.toml"
    toml.write_text(toml.read_text() + "opt_inn = true\n")
    found = findings(b)
    assert len(found) == 2, found
    assert found[0].startswith("fixes/one/0001-change.patch:") and "has no ' ', '+' or '-' prefix" in found[0]
    assert found[1].startswith(f"fixes/two/fix.toml:{len(toml.read_text().splitlines())}: unknown key 'opt_inn'")


def test_a_profile_naming_a_fix_that_is_not_in_the_series(setup):
    b, _ = setup
    b.profile(["one", "two", "three"])
    found = findings(b)
    assert any(f.startswith("profiles/p1.toml:") and "unknown fix 'three'" in f for f in found), found


def test_a_lock_that_does_not_match_the_pack_or_the_release(setup):
    b, clean = setup
    patch = b.pack / "fixes/one/0001-change.patch"
    patch.write_text(patch.read_text().replace("+LINE 3\n", "+LINE three\n"))
    line = (b.pack / "profiles/p1.lock").read_text().splitlines().index('      "id": "one",') + 1
    assert findings(b) == [f"profiles/p1.lock:{line}: the lock is stale: one: patch or version changed since the lock "
                           f"was generated (its patch changed under the same version 1: if the change is meant, bump version in "
                           f"{b.pack / 'fixes/one/fix.toml'}:2 before locking; if not, put the patch back as it was "
                           f"locked) "
                           f"(regenerate it from clean release copies: {program()} lock --profile p1 "
                           f"--pack {b.pack} (it fetches them; --root NAME=PATH gives one))"]
    b.lock(clean)
    assert findings(b) == []
    other = b.tree("other-clean", {MOD: numbered(20) + "line 21\n"})  # the release copy differs from the locked one
    found = findings(b, fresh=lambda pack, profile: {"demo": other})
    assert len(found) == 1 and found[0].startswith("profiles/p1.lock: ") and "is stale (differs for: one, two)" in found[0]


def test_a_missing_unsealed_or_short_lock_is_named_at_a_line_with_what_to_do(setup):
    """Each lock finding has a line: a missing lock at the profile's name, a hand edit at the digest, a fix the
    lock lacks where the profile lists it; each says how to regenerate it."""
    b, clean = setup
    lock = b.pack / "profiles/p1.lock"
    good = lock.read_text()
    redo = f"(regenerate it from clean release copies: {program()} lock --profile p1 --pack {b.pack} (it fetches"
    lock.unlink()
    assert findings(b) == [f"profiles/p1.toml:1: profile p1 has no lock (profiles/p1.lock) {redo} them; --root "
                           f"NAME=PATH gives one))"]
    lock.write_text(good.replace('"digest": "', '"digest": "0'))
    line = next(n for n, ln in enumerate(good.splitlines(), 1) if '"digest"' in ln)
    found = findings(b)
    assert len(found) == 1 and found[0].startswith(f"profiles/p1.lock:{line}: its content does not match its seal "
                                                   f"(its \"digest\"): it was edited by hand after `fixpack lock` "
                                                   f"wrote it (which line, the lock alone cannot tell) {redo}"), found
    b.add_fix("three", {MOD: numbered(20)}, {MOD: numbered(20).replace("line 9\n", "nine\n")})
    (b.pack / "fixes/three/test_three.py").write_text("def test_it():\n    pass\n")
    lock.write_text(good)
    b.profile(["one", "two"], ["three"])
    at = (b.pack / "profiles/p1.toml").read_text().splitlines().index('opt_in = ["three"]') + 1
    assert findings(b) == [f"profiles/p1.toml:{at}: the lock is stale: three: not in the lock {redo} them; --root "
                           f"NAME=PATH gives one))"]


def test_the_command_exits_2_naming_each_finding(setup):
    b, _ = setup
    (b.pack / "fixes/two/test_two.py").unlink()
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "check", "--pack", str(b.pack)], capture_output=True,
                       text=True, cwd=REPO)
    assert r.returncode == 2 and r.stdout.startswith("fixes/two/fix.toml:1: fix two has no proof"), r
    assert "1 finding(s)" in r.stderr


def test_the_committed_pack_is_clean():
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "check", "--json"], capture_output=True, text=True,
                       cwd=REPO)
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["findings"] == [], doc["findings"]
    assert doc["profiles"] == ["v0.30.0", "v0.31.0", "v0.32.0", "v0.33.0"]


def test_a_component_changed_since_the_lock_is_named_at_its_lock_line(builder):
    pack, _site = setup_pack(builder, None)  # the plugin from source: its wheel is built offline, as apply does
    (pack / "fixes/one/test_one.py").write_text("def test_it():\n    pass\n")
    (pack / "plug/tiny_plug/sub/kern.py").write_text("SCALE = 3\n")  # no new version, no new lock
    lines = (pack / "profiles/p1.lock").read_text().splitlines()
    line = lines.index('      "id": "tiny-plug",') + 1
    assert findings(builder) == [f"profiles/p1.lock:{line}: component tiny-plug at {pack / 'plug'} installs other "
                                 f"files than {pack / 'profiles/p1.lock'}:{line} records (tiny_plug/sub/kern.py): its source "
                                 f"changed; bump its version and regenerate the lock ({program()} lock --profile p1 "
                                 f"--pack {pack})"]


def test_a_changed_component_under_the_same_version_is_not_locked(builder):
    """lock refuses to record other files under a version the lock already has (an image holding that version
    would keep the old files and call them applied); with the version bumped it writes."""
    from fixpack import engine
    from fixpack.errors import BadInputError

    pack, _site = setup_pack(builder, None)
    clean = builder.base / "clean"
    lock = pack / "profiles/p1.lock"
    before = lock.read_bytes()
    (pack / "plug/tiny_plug/sub/kern.py").write_text("SCALE = 3\n")
    with pytest.raises(BadInputError, match=r"component tiny-plug 0.3.0 installs other files than .*p1.lock records "
                                            r"for that version \(tiny_plug/sub/kern.py\): its source changed; bump"):
        engine.write_lock(builder.request(clean))
    assert lock.read_bytes() == before
    for path in (pack / "plug/pyproject.toml", pack / "profiles/p1.toml"):
        path.write_text(path.read_text().replace('version = "0.3.0"', 'version = "0.3.1"'))
    engine.write_lock(builder.request(clean))
    assert '"version": "0.3.1"' in lock.read_text()


def test_a_component_that_builds_as_another_version_is_named_at_the_profile_line(builder):
    """The profile names a version its source does not build as: check names the profile's line, lock
    refuses (apply refused it only at install time)."""
    from fixpack import engine
    from fixpack.errors import BadInputError

    pack, _site = setup_pack(builder, None)
    (pack / "fixes/one/test_one.py").write_text("def test_it():\n    pass\n")
    prof = pack / "profiles/p1.toml"
    prof.write_text(prof.read_text().replace('version = "0.3.0"', 'version = "0.3.9"'))
    from fixpack import lockfile
    from fixpack.loader import load_pack, load_profile
    from fixpack.structs import replace

    profile = load_profile(load_pack(pack), "p1")
    have = lockfile.read_lock(profile)
    # the lock agrees with the profile: only the build disagrees
    lockfile.write(profile, replace(have, components=tuple(replace(c, version="0.3.9") for c in have.components)))
    with pytest.raises(BadInputError, match="builds as version 0.3.0, the profile names 0.3.9: bump one of them"):
        engine.write_lock(builder.request(builder.base / "clean"))
    line = next(n for n, ln in enumerate(prof.read_text().splitlines(), 1) if ln == 'version = "0.3.9"')
    said = [f for f in findings(builder) if "builds as version" in f]
    assert said == [f"profiles/p1.toml:{line}: component tiny-plug at {pack / 'plug'} builds as version 0.3.0, the "
                    f"profile names 0.3.9: bump one of them"], findings(builder)


def test_a_stale_component_is_named_once(setup):
    from fixpack import lockfile
    from fixpack.errors import StaleLockError
    from fixpack.loader import load_pack, load_profile
    from fixpack.lock_bump import check_fresh
    from fixpack.records import LockComponent
    from fixpack.structs import replace

    b, _ = setup
    profile = load_profile(load_pack(b.pack), "p1")
    have = replace(lockfile.read_lock(profile), components=(LockComponent("plug", "1.0", (("plug/a.py", "a" * 64),)),))
    lockfile.write(profile, have)
    fresh = replace(have, components=(LockComponent("plug", "1.0", (("plug/a.py", "b" * 64),)),))
    with pytest.raises(StaleLockError, match=r"is stale \(differs for: component plug\);"):
        check_fresh(profile, fresh)


def test_check_json_puts_each_lock_command_in_hint_flags_an_orphan_lock_and_names_a_pin_at_its_key(setup):
    """--json: the hand-edited lock's command was in 'message' (every other finding has it in 'hint'); a lock
    whose profile is gone was not flagged; a changed pin was named at its [targets.demo] line, not at the key."""
    b, _clean = setup
    lock = b.pack / "profiles/p1.lock"
    good = lock.read_text()
    lock.write_text(good.replace('"digest": "', '"digest": "0'))

    def doc() -> list[dict]:
        r = subprocess.run([sys.executable, "-m", "fixpack.cli", "check", "--json", "--pack", str(b.pack)],
                           capture_output=True, text=True, cwd=REPO)
        assert r.returncode == 2, r.stderr
        return json.loads(r.stdout)["findings"]

    (edited,) = doc()
    assert edited["message"] == ('its content does not match its seal (its "digest"): it was edited by hand after '
                                 "`fixpack lock` wrote it (which line, the lock alone cannot tell)"), edited
    assert edited["hint"].startswith(f"regenerate it from clean release copies: {program()} lock --profile p1 "), edited
    lock.write_text(good)
    (b.pack / "profiles/old.lock").write_text(good)
    (orphan,) = doc()
    assert (orphan["file"], orphan["line"]) == ("profiles/old.lock", None), orphan
    assert orphan["message"] == "a lock with no profile: there is no profiles/old.toml", orphan
    assert orphan["hint"] == f"remove it (rm -- {b.pack / 'profiles/old.lock'}), or put back the profile it was made for"
    (b.pack / "profiles/old.lock").unlink()
    prof = b.pack / "profiles/p1.toml"
    for key, old, new in (("commit", 'commit = "abcdef12"', 'commit = "1234567a"'),
                          ("version", 'version = "1.0"', 'version = "1.1"')):
        prof.write_text(prof.read_text().replace(old, new))
        (pin,) = doc()
        at = prof.read_text().splitlines().index(new) + 1
        assert (pin["file"], pin["line"]) == ("profiles/p1.toml", at), (key, pin)
        assert f"pinned to {key}" in pin["message"] and pin["hint"].startswith("regenerate it"), pin
        prof.write_text(prof.read_text().replace(new, old))


def test_a_component_entry_without_dist_info_is_named_at_its_lock_line_with_the_lock_command(builder):
    """A lock made before fixpack recorded a component's .dist-info folder loads (apply accepts it) but cannot
    tell a build that names another folder: check flags it offline, at the component's "id" line in the lock,
    with the command that renews the lock (lock --check said so; check did not)."""
    from fixpack import lockfile
    from fixpack.loader import load_pack, load_profile
    from fixpack.structs import replace

    pack, _site = setup_pack(builder, None)
    (pack / "fixes/one/test_one.py").write_text("def test_it():\n    pass\n")
    assert findings(builder) == []
    profile = load_profile(load_pack(pack), "p1")
    have = lockfile.read_lock(profile)
    lockfile.write(profile, replace(have, components=tuple(replace(c, dist_info="") for c in have.components)))
    lines = (pack / "profiles/p1.lock").read_text().splitlines()
    assert not any('"dist_info"' in ln for ln in lines)
    line = lines.index('      "id": "tiny-plug",') + 1
    assert findings(builder) == [f"profiles/p1.lock:{line}: the lock is stale: component tiny-plug has no "
                                 f"\"dist_info\" (the name of its .dist-info folder; a lock made before fixpack "
                                 f"recorded it) (regenerate it from clean release copies: {program()} lock --profile "
                                 f"p1 --pack {pack} (it fetches them; --root NAME=PATH gives one))"]


def test_check_fresh_whose_release_cache_cannot_be_made_is_exit_5_not_a_finding():
    """``check --fresh`` with a cache that cannot be made reported it as a finding of every profile, exit 2 (bad
    pack), where fetch says exit 5 for the same cache: it is the environment's problem, said once, exit 5."""
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "check", "--fresh", "--cache", "/dev/null", "--pack",
                        str(REPO)], capture_output=True, text=True, cwd=REPO)  # its targets come from PyPI
    assert r.returncode == 5 and "cannot make the release cache" in r.stderr and "finding" not in r.stderr, r


def _second_profile(b):
    """p1 and p2 list one and two (a fix.toml error meets both)."""
    b.profile(["one", "two"], name="p2")
    b.lock(b.base / "clean", "p2")


def test_a_fix_s_unknown_target_is_one_finding_at_its_fix_toml_line_without_a_cascade(setup):
    """found by a fresh user: target = "vlm" gave one finding per profile at the profile, and every fix those
    profiles list was then "in no profile"."""
    b, _ = setup
    _second_profile(b)
    toml = b.pack / "fixes/two/fix.toml"
    toml.write_text(toml.read_text().replace('target = """demo"""', 'target = "dmeo"'))
    line = toml.read_text().splitlines().index('target = "dmeo"') + 1
    assert findings(b) == [f"fixes/two/fix.toml:{line}: target 'dmeo' is not a target of the profile that lists 'two': "
                           f"its targets are demo; profiles p1, p2 (name one of those targets, or add "
                           f"[targets.dmeo] to the profile, or drop the fix from it)"]


def test_a_conflict_between_two_defaults_is_named_once_at_the_conflicts_line(setup):
    b, _ = setup
    _second_profile(b)
    toml = b.pack / "fixes/two/fix.toml"
    toml.write_text(toml.read_text() + 'conflicts = ["one"]\n')
    line = len(toml.read_text().splitlines())
    assert findings(b) == [f"fixes/two/fix.toml:{line}: conflicts with 'one', yet the profile lists both as "
                           f"defaults; profiles p1, p2 (drop one of them from the profile's [fixes] default, or "
                           f"drop the conflict)"]
    one = b.pack / "fixes/one/fix.toml"
    one.write_text(one.read_text() + 'conflicts = ["two"]\n')  # both declare it: still one finding
    assert len(findings(b)) == 1


def test_a_fix_conflicting_with_itself_is_named_at_its_conflicts_line(setup):
    b, _ = setup
    toml = b.pack / "fixes/two/fix.toml"
    toml.write_text(toml.read_text() + 'conflicts = ["two"]\n')
    line = len(toml.read_text().splitlines())
    assert findings(b) == [f"fixes/two/fix.toml:{line}: conflicts with itself ('two') (drop it from conflicts)"]


def _two_components(b, first_requires: str, first_path: str = "plug") -> list[str]:
    from fixpack.errors import PackError
    from fixpack.loader import load_pack, load_profile

    (b.pack / "plug").mkdir()
    (b.pack / "plug/pyproject.toml").write_text('[project]\nname = "p"\nversion = "0.1.0"\n')
    prof = b.pack / "profiles/p1.toml"
    prof.write_text(prof.read_text() + f'\n[components.c-one]\npath = "{first_path}"\nversion = "0.1.0"\n'
                                       f'target = "demo"\nrequires = {first_requires}\n\n[components.c-two]\n'
                                       f'path = "plug"\nversion = "0.1.0"\ntarget = "demo"\nrequires = ["c-one"]\n')
    with pytest.raises(PackError) as exc:
        load_profile(load_pack(b.pack), "p1")
    return [str(p) for p in exc.value.problems]


def test_a_requires_cycle_between_components_is_named_at_its_lines(setup):
    """found by a fresh user: check took two components that require each other."""
    b, _ = setup
    said = _two_components(b, '["c-two"]')
    lines = (b.pack / "profiles/p1.toml").read_text().splitlines()
    one, two = (n for n, ln in enumerate(lines, 1) if ln.startswith("requires = "))
    prof = b.pack / "profiles/p1.toml"
    assert said == [f"{prof}:{one}: [components.c-one] requires 'c-two', and c-two -> c-one: a cycle (a component "
                    f"cannot need one that needs it; drop one of these requirements)",
                    f"{prof}:{two}: [components.c-two] requires 'c-one', and c-one -> c-two: a cycle (a component "
                    f"cannot need one that needs it; drop one of these requirements)"]


def test_a_component_path_error_has_its_line_and_no_cascade(setup):
    """found by a fresh user: a bad path had no line, and a component requiring it was then "not listed"."""
    b, _ = setup
    said = _two_components(b, "[]", "../../elsewhere")
    prof = b.pack / "profiles/p1.toml"
    line = prof.read_text().splitlines().index('path = "../../elsewhere"') + 1
    assert said == [f"{prof}:{line}: [components.c-one]: path '../../elsewhere' is not a folder with a pyproject.toml "
                    f"or a .whl inside the pack (name it relative to the pack's folder)"]


def test_stray_patches_and_variants_no_run_reads_are_named(setup):
    """found by a fresh user: a 0002-stray.patch fix.toml does not list and a variant folder for a profile the
    pack lacks passed check."""
    b, _ = setup
    fix = b.pack / "fixes/two"
    (fix / "0002-stray.patch").write_bytes((fix / "0001-change.patch").read_bytes())
    (fix / "v9.9.9").mkdir()
    (fix / "v9.9.9/variant.toml").write_text("version = 2\n")
    (fix / "v9.9.9/0001-change.patch").write_bytes((fix / "0001-change.patch").read_bytes())
    assert findings(b) == [
        "fixes/two/0002-stray.patch: a patch file fix two's fix.toml does not list: it is never applied (list it in "
        "fix.toml's patches (in its place in the order), or remove it)",
        "fixes/two/v9.9.9/variant.toml: a variant of fix two for profile v9.9.9, which the pack does not have (no "
        "profiles/v9.9.9.toml): it is never used (name its folder after the profile it is for, or remove it)"]


def test_a_patch_message_with_bytes_that_are_not_utf8_is_named_at_its_line(setup):
    """Found by a fresh user: `fixpack check` passed a patch whose message (the mail header and description
    before the diff) held bytes that are not UTF-8, while `lock --check` saw the patch reworded (and `fixpack
    format` would replace the bytes). A patch's text is UTF-8, as git writes it (an added line already had to
    be): check names the patch and the line (exit 2), and lock --check refuses the pack the same way."""
    b, _ = setup
    patch = b.pack / "fixes/one/0001-change.patch"
    data = patch.read_bytes()
    head, sep, diff = data.partition(b"\ndiff --git ")
    line = head.count(b"\n") + 1  # the message's last line, which gets the byte
    patch.write_bytes(head + b" caf\xe9" + sep + diff)
    found = findings(b)
    byte = len(head.split(b"\n")[-1]) + 5  # after " caf"
    assert found == [f"fixes/one/0001-change.patch:{line}: the patch's message (its mail header or description, "
                     f"before the diff) holds bytes that are not UTF-8 (byte {byte} of the line) (write the message as UTF-8 (git format-patch "
                     f"writes it so) and re-run)"], found
    for args in (["check"], ["lock", "--check", "-p", "p1"]):
        r = subprocess.run([sys.executable, "-m", "fixpack.cli", *args, "--pack", str(b.pack)], capture_output=True,
                           text=True, cwd=REPO)
        assert r.returncode == 2 and f"0001-change.patch:{line}: the patch's message" in r.stdout + r.stderr, r
    # a message that declares another charset is read in it (git format-patch with i18n.commitEncoding)
    head = head.replace(b"\nSubject:", b"\nContent-Type: text/plain; charset=ISO-8859-1\nSubject:", 1)
    patch.write_bytes(head + b" caf\xe9" + sep + diff)
    assert not [f for f in findings(b) if "not UTF-8" in f], findings(b)


def test_a_rename_line_that_disagrees_with_the_diff_git_line_is_named_at_its_line(setup):
    """A patch renaming demo_pkg/mod.py whose 'rename to' names another file than its 'diff --git' b-path passed
    check (the engine would write the b-path, git apply the other): check names the patch and the line, exit 2,
    and apply refuses the pack with nothing written."""
    b, clean = setup
    patch = b.pack / "fixes/one/0001-change.patch"
    text = patch.read_text()
    old = "diff --git a/demo_pkg/mod.py b/demo_pkg/mod.py\n"
    assert old in text
    patch.write_text(text.replace(old, "diff --git a/demo_pkg/mod.py b/demo_pkg/new.py\nsimilarity index 90%\n"
                                       "rename from demo_pkg/mod.py\nrename to demo_pkg/evil.py\n")
                     .replace("+++ b/demo_pkg/mod.py", "+++ b/demo_pkg/new.py"))
    line = text[:text.index(old)].count("\n") + 4
    message = (f"fixes/one/0001-change.patch:{line}: 'rename to demo_pkg/evil.py' names another file than its 'diff "
               f"--git' line's b-path ('demo_pkg/new.py', line {line - 3}): git apply would write the renamed file "
               f"to 'demo_pkg/evil.py', fixpack to 'demo_pkg/new.py' (make the two lines name the same file, the one the "
               f"rename is to, or regenerate the patch with git diff -M / format-patch)")
    assert findings(b) == [message]
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "check", "--pack", str(b.pack)], capture_output=True,
                       text=True, cwd=REPO)
    assert r.returncode == 2 and r.stdout.startswith(message), r
    before = {p: p.read_bytes() for p in clean.rglob("*") if p.is_file()}
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "apply", "--pack", str(b.pack), "-p", "p1", "--root",
                        f"demo={clean}"], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and f"0001-change.patch:{line}: 'rename to demo_pkg/evil.py'" in r.stdout + r.stderr, r
    assert {p: p.read_bytes() for p in clean.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("value", ['"../elsewhere"', "5", '""', '"p1"'])
def test_a_variant_s_rebased_from_that_is_no_profile_name_is_named_at_its_line(setup, value):
    """Found by a fresh maintainer: variant.toml's rebased_from (the profile a rebase made the variant from) was
    taken whatever it held. It is a profile's name (one the pack may have retired since: not looked up)."""
    b, _ = setup
    fix = b.pack / "fixes/two"
    (fix / "p1").mkdir()
    (fix / "p1/variant.toml").write_text(f"version = 2\nrebased_from = {value}\n")
    (fix / "p1/0001-change.patch").write_bytes((fix / "0001-change.patch").read_bytes())
    said = [f for f in findings(b) if "rebased_from" in f]
    assert len(said) == 1 and said[0].startswith("fixes/two/p1/variant.toml:2: 'rebased_from' must be the name of "
                                                 "the profile it was rebased from: "), findings(b)


@pytest.mark.parametrize("name", ["0001-nope.patch", "../x.patch"])
def test_a_bad_patches_entry_is_named_at_fix_toml_for_each_variant_too(setup, name):
    """Found by a fresh user: a `patches` entry of fix.toml naming a missing file, or no plain file name, was also
    named at each variant's variant.toml, with no line: a variant has no `patches` key, it takes fix.toml's. A
    missing file is named at fix.toml's line, once per folder that lacks it; a name that is no file name, once."""
    b, _ = setup
    fix = b.pack / "fixes/two"
    (fix / "p1").mkdir()
    (fix / "p1/variant.toml").write_text("version = 2\nrebased_from = \"p0\"\n")
    (fix / "p1/0001-change.patch").write_bytes((fix / "0001-change.patch").read_bytes())
    toml = fix / "fix.toml"
    toml.write_text(toml.read_text().replace('"0001-change.patch"', f'"{name}"'))
    line = next(n for n, t in enumerate(toml.read_text().splitlines(), 1) if t.startswith("patches"))
    said = [f for f in findings(b) if name in f]
    if name.startswith(".."):
        assert len(said) == 1 and said[0].startswith(f"fixes/two/fix.toml:{line}: patch '../x.patch' is not a plain "
                                                     f"file name"), findings(b)
    else:
        assert [f.split(" (", 1)[0] for f in said] == [
            f"fixes/two/fix.toml:{line}: patch '{name}' does not exist in {fix}",
            f"fixes/two/fix.toml:{line}: patch '{name}' does not exist in {fix / 'p1'}"], findings(b)


def test_a_series_with_crlf_line_ends_is_named_once_at_its_first_line(setup):
    """Found by a fresh maintainer: a CRLF fixes/series passed check, then import added an LF line among the CRLF
    ones. The commands that write the series write LF; a patch with CRLF is refused already."""
    b, _ = setup
    series = b.pack / "fixes/series"
    series.write_bytes(series.read_bytes().replace(b"\n", b"\r\n"))
    said = [f for f in findings(b) if "CR" in f]
    assert said == [f"fixes/series:1: a CR (CRLF line ends): the series' lines end with LF alone, and hold no CR "
                    f"(convert it: sed -i 's/\\r$//' {series})"], findings(b)
    text = series.read_bytes().replace(b"\r\n", b"\n")  # a CR inside a line (found by a fresh maintainer: the
    series.write_bytes(text.replace(b"\n", b" # a\rcomment\n", 1))  # advice made a fix id of what followed it)
    said = [f for f in findings(b) if "CR" in f]
    assert said == ["fixes/series:1: a CR: the series' lines end with LF alone, and hold no CR (remove each CR (a line "
                    "of its own where it ends one))"], findings(b)


def test_a_lock_whose_fixes_are_in_another_order_than_the_series_is_stale(setup):
    """Found by a fresh maintainer: after two fixes swapped in fixes/series, lock --check said "fresh" while lock
    rewrote the file (its entries in the series' order, which release_files reads)."""
    from fixpack import lockfile
    from fixpack.errors import StaleLockError
    from fixpack.loader import load_pack, load_profile
    from fixpack.lock_bump import check_fresh
    from fixpack.structs import replace

    b, _ = setup
    profile = load_profile(load_pack(b.pack), "p1")
    have = lockfile.read_lock(profile)
    assert len(have.fixes) > 1
    check_fresh(profile, have)
    with pytest.raises(StaleLockError, match=r"is stale \(differs for: the order of the fixes \(fixes/series changed\)"):
        check_fresh(profile, replace(have, fixes=tuple(reversed(have.fixes))))


def test_a_patch_whose_fix_id_trailer_names_another_fix_is_named_at_the_trailer(setup):
    """A fresh user: the patches of two fixes swapped (the files exchanged), both versions bumped and the lock made
    again: `check` said the pack was clean, though each patch's Fix-Id trailer named the other fix. Each is named at
    its trailer's line with both ids, exit 2. A patch without the trailer is left alone, as before."""
    b, clean = setup
    assert findings(b) == []  # (no Fix-Id trailer in either patch)
    patches = {fid: b.pack / f"fixes/{fid}/0001-change.patch" for fid in ("one", "two")}
    texts = {fid: p.read_text().replace(f"\n\n{fid}\n\n---\n", f"\n\n{fid}\n\nFix-Id: {fid}\n---\n")
             for fid, p in patches.items()}
    assert all("Fix-Id" in t for t in texts.values())
    for fid, other in (("one", "two"), ("two", "one")):
        patches[fid].write_text(texts[other])
        toml = b.pack / f"fixes/{fid}/fix.toml"
        toml.write_text(toml.read_text().replace("version = 1", "version = 2"))
    b.lock(clean)
    from test_lock_bump import fixpack

    r = fixpack("check", "--pack", str(b.pack))
    assert r.returncode == 2, r.stdout + r.stderr
    said = " ".join((r.stdout + r.stderr).split())
    for fid, other in (("one", "two"), ("two", "one")):  # (format refuses them: not a fix renamed)
        line = patches[fid].read_text().splitlines().index(f"Fix-Id: {other}") + 1
        assert (f"fixes/{fid}/0001-change.patch:{line}: its Fix-Id trailer says '{other}' (the id of fix {other}, "
                f"fixes/{other}/), but the patch is listed under fix '{fid}' (fixes/{fid}/fix.toml's patches) (were "
                f"two fixes' patches swapped? put each back in its own fix's folder and lock again; if this patch is "
                f"{fid}'s after all, write its trailer as Fix-Id: {fid} (`{program()} format --pack {b.pack}` "
                f"rewrites no Fix-Id that names another fix of the pack))") in said, said
    assert "2 finding(s)" in said, said
    patches["one"].write_text(texts["one"].replace("Fix-Id: one", "Fix-Id: one-old-name"))  # a fix renamed
    r = fixpack("check", "--pack", str(b.pack))
    line = texts["one"].splitlines().index("Fix-Id: one") + 1
    assert (f"fixes/one/0001-change.patch:{line}: its Fix-Id trailer says 'one-old-name', but the patch is listed "
            f"under fix 'one' (fixes/one/fix.toml's patches) (a fix renamed, or the id left out? `{program()} format "
            f"--pack {b.pack}` writes its Fix-Id from fix.toml; else put the patch back in the folder of the fix it "
            f"belongs to and lock again)") in " ".join((r.stdout + r.stderr).split()), r.stdout + r.stderr
    patches["one"].write_text(texts["one"].replace("Fix-Id: one", "Fix-Id:"))  # the id left out: said so
    r = fixpack("check", "--pack", str(b.pack))
    assert (f"fixes/one/0001-change.patch:{line}: its Fix-Id trailer is empty, but the patch is listed under fix 'one' "
            f"(fixes/one/fix.toml's patches) (a fix renamed, or the id left out?") in " ".join(
                (r.stdout + r.stderr).split()), r.stdout + r.stderr
    for fid in ("one", "two"):  # put back: clean again
        patches[fid].write_text(texts[fid])
    b.lock(clean)
    assert findings(b) == []


ONE_SAID = ("its Fix-Id trailer says 'two' (the id of fix two, fixes/two/), but the patch is listed under fix 'one' "
            "(fixes/one/fix.toml's patches)")


@pytest.mark.parametrize("trailer", ["Fix-Id:two", "Fix-Id : two", "Fix-Id\t:\ttwo"])
def test_a_fix_id_trailer_without_a_space_after_its_colon_or_with_one_before_is_read(setup, trailer):
    """A fresh user: `Fix-Id:other` and `Fix-Id : other` were not read as trailers (git interpret-trailers reads
    both), so a wrong id written so passed check. Read as git reads them, in a trailer paragraph with others."""
    b, clean = setup
    patch = b.pack / "fixes/one/0001-change.patch"
    text = patch.read_text().replace("\n\none\n\n---\n", f"\n\none\n\nSigned-off-by:t <t@invalid>\n{trailer}\n---\n")
    patch.write_text(text)
    b.lock(clean)
    line = text.splitlines().index(trailer) + 1
    assert [f.split(" (were ")[0] for f in findings(b)] == [f"fixes/one/0001-change.patch:{line}: {ONE_SAID}"]


def test_a_wrong_fix_id_with_a_copy_in_the_notes_is_named_at_the_trailer(setup):
    """A fresh user: a wrong Fix-Id trailer and a copy of it in the notes after the '---' line (where format-patch
    --notes writes them) was named at the notes' line; it is the trailer's line, and a Fix-Id only in the notes (no
    trailer: git reads none there) is no finding."""
    b, clean = setup
    patch = b.pack / "fixes/one/0001-change.patch"
    orig = patch.read_text()
    text = orig.replace("\n\none\n\n---\n", "\n\none\n\nFix-Id: two\n---\nNotes:\n    Fix-Id: two\n\nFix-Id: two\n\n")
    patch.write_text(text)
    b.lock(clean)
    line = text.splitlines().index("Fix-Id: two") + 1
    assert line < text.splitlines().index("---") + 1
    assert [f.split(" (were ")[0] for f in findings(b)] == [f"fixes/one/0001-change.patch:{line}: {ONE_SAID}"]
    patch.write_text(orig.replace("\n\none\n\n---\n", "\n\none\n\n---\nFix-Id: two\n\n"))  # (notes alone)
    b.lock(clean)
    assert findings(b) == []


def test_a_variant_s_patch_whose_fix_id_names_another_fix_names_the_variant(setup):
    """A fresh user: a variant's patch with another fix's Fix-Id was said to be listed in "fixes/one/fix.toml's
    patches"; it is the variant's folder, for its profile."""
    b, clean = setup
    variant = b.pack / "fixes/one/p1"
    variant.mkdir()
    (variant / "variant.toml").write_text("version = 1\n")
    text = (b.pack / "fixes/one/0001-change.patch").read_text().replace("\n\none\n\n---\n", "\n\none\n\nFix-Id: two\n---\n")
    (variant / "0001-change.patch").write_text(text)
    b.lock(clean)
    line = text.splitlines().index("Fix-Id: two") + 1
    assert [f.split(" (were ")[0] for f in findings(b)] == [
        f"fixes/one/p1/0001-change.patch:{line}: its Fix-Id trailer says 'two' (the id of fix two, fixes/two/), but "
        f"the patch is listed under fix 'one' (its variant for profile p1, fixes/one/p1/)"]


def test_check_of_a_pack_folder_that_is_not_there_names_it(tmp_path):
    """A fresh user: `check --pack /nonexistent` said ".: no fixes/ folder", the pack named as "." and nothing said of
    the folder itself being missing. The pack's root is named by its path, and that it is not there."""
    from test_lock_bump import fixpack

    nowhere = tmp_path / "nowhere"
    r = fixpack("check", "--pack", str(nowhere))
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{nowhere}: no fixes/ folder (the folder itself is not there)" in r.stdout, r.stdout + r.stderr
    assert not nowhere.exists()
