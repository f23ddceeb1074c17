"""Loading the pack reports every problem with its file and line."""

import pytest
from conftest import numbered, snapshot

from fixpack import engine
from fixpack.errors import PackError
from fixpack.loader import load_pack, load_profile, select

MOD = "demo_pkg/mod.py"


@pytest.fixture
def pack(builder):
    base = numbered(10)
    builder.tree("clean", {MOD: base})
    builder.add_fix("a", {MOD: base}, {MOD: base.replace("line 2\n", "two\n")})
    builder.add_fix("b", {MOD: base}, {MOD: base.replace("line 8\n", "eight\n")})
    builder.profile(["a", "b"])
    return builder


def problems(exc):
    return [str(p) for p in exc.value.problems]


def test_valid_pack_loads(pack):
    p = load_pack(pack.pack)
    assert p.series == ("a", "b") and p.fixes["a"].version == 1
    assert load_profile(p, "p1").default == ("a", "b")


def test_unknown_key_names_file_and_line(pack):
    toml = pack.pack / "fixes/a/fix.toml"
    toml.write_text(toml.read_text() + "opt_inn = true\n")
    with pytest.raises(PackError) as exc:
        load_pack(pack.pack)
    line = len(toml.read_text().splitlines())
    assert any(f"{toml}:{line}: unknown key 'opt_inn'" in p and "did you mean 'opt_in'" in p for p in problems(exc))


@pytest.mark.parametrize("written", ["bogus.x = 1", "'bogus' . x = 1", "[bogus.x]\ny = 1"])
def test_a_dotted_unknown_key_is_named_at_its_line(pack, written):
    """Found by a fresh user: `bogus.x = 1` in fix.toml was said to be an unknown key with no line."""
    toml = pack.pack / "fixes/a/fix.toml"
    toml.write_text("# first\n" + written + "\n" + toml.read_text() if not written.startswith("[") else
                    toml.read_text() + written + "\n")
    line = 2 if not written.startswith("[") else len(toml.read_text().splitlines()) - 1
    with pytest.raises(PackError) as exc:
        load_pack(pack.pack)
    assert any(f"{toml}:{line}: unknown key 'bogus'" in p for p in problems(exc)), problems(exc)


def test_series_missing_and_duplicate(pack):
    (pack.pack / "fixes/series").write_text("a\na\n")
    with pytest.raises(PackError) as exc:
        load_pack(pack.pack)
    text = "\n".join(problems(exc))
    assert "series:2: fix 'a' listed twice" in text
    assert "fix 'b' is missing from the series" in text


def test_requires_later_in_series(pack):
    toml = pack.pack / "fixes/a/fix.toml"
    toml.write_text(toml.read_text() + 'requires = ["b"]\n')
    with pytest.raises(PackError) as exc:
        load_pack(pack.pack)
    assert any("requires 'b', which comes later in the series" in p for p in problems(exc))


def test_requires_not_in_profile(pack):
    toml = pack.pack / "fixes/b/fix.toml"
    toml.write_text(toml.read_text() + 'requires = ["a"]\n')
    pack.profile(["b"])
    with pytest.raises(PackError) as exc:
        load_profile(load_pack(pack.pack), "p1")
    assert any("requires 'a', which the profile does not list" in p for p in problems(exc))


def test_conflicting_selection(pack):
    toml = pack.pack / "fixes/b/fix.toml"
    toml.write_text(toml.read_text() + 'conflicts = ["a"]\n')
    pack.profile(["a"], ["b"])
    p = load_pack(pack.pack)
    prof = load_profile(p, "p1")
    with pytest.raises(PackError) as exc:
        select(p, prof, ["b"])
    line = toml.read_text().splitlines().index('conflicts = ["a"]') + 1
    # said where the conflict is declared (it named the profile, with no line), and what to leave out: the opt-in
    assert problems(exc) == [f"{toml}:{line}: fixes 'a' and 'b' are both selected, but 'b' declares a conflict with "
                             f"'a' (leave b out of the run)"], problems(exc)


def test_conflicting_opt_ins_under_all_opt_in_are_said_as_such(pack):
    """--all-opt-in selects both opt-ins that conflict: "leave one out of the run" cannot be done by that flag."""
    toml = pack.pack / "fixes/a/fix.toml"
    toml.write_text(toml.read_text() + 'conflicts = ["b"]\n')
    pack.profile([], ["a", "b"])
    p = load_pack(pack.pack)
    with pytest.raises(PackError) as exc:
        select(p, load_profile(p, "p1"), [], all_opt_in=True)
    assert problems(exc)[0].endswith("(--all-opt-in selects both: name the opt-in fixes to apply instead, leaving a or b "
                                     "out)"), problems(exc)
    assert problems(exc)[0].startswith(f"{toml}:"), problems(exc)


def test_malformed_toml_has_line(pack):
    toml = pack.pack / "fixes/a/fix.toml"
    toml.write_text(toml.read_text() + "broken = [\n")
    end = len(toml.read_text().splitlines())  # tomllib says "at end of document", with no line: the last one
    with pytest.raises(PackError) as exc:
        load_pack(pack.pack)
    assert any(f"{toml}:{end}:" in p and "malformed TOML" in p for p in problems(exc)), problems(exc)
    toml.write_text(toml.read_text().replace("broken = [\n", "x = = 1\ny = 2\n"))
    with pytest.raises(PackError) as exc:
        load_pack(pack.pack)
    assert any(f"{toml}:{end}:" in p and "malformed TOML" in p for p in problems(exc)), problems(exc)


def test_bad_patches_reported_with_file_and_line(pack):
    pa = pack.pack / "fixes/a/0001-change.patch"
    pa.write_bytes(pa.read_bytes().replace(b"\n", b"\r\n"))
    pb = pack.pack / "fixes/b/0001-change.patch"
    pb.write_text(pb.read_text().replace("b/demo_pkg/mod.py", "b/../escape.py").replace("a/demo_pkg/mod.py", "a/../escape.py"))
    with pytest.raises(PackError) as exc:
        load_pack(pack.pack)
    text = "\n".join(problems(exc))
    assert f"{pa}:1: CRLF line endings" in text
    assert f"{pb}:" in text and "escapes the target root" in text


def test_undeclared_binary_is_refused(pack):
    folder = pack.pack / "fixes/a"
    (folder / "0001-change.patch").write_text(
        "Subject: [PATCH] bin\n\n---\ndiff --git a/demo_pkg/x.bin b/demo_pkg/x.bin\nnew file mode 100644\n"
        "index 0000000..1111111\nBinary files /dev/null and b/demo_pkg/x.bin differ\n")
    with pytest.raises(PackError) as exc:
        load_pack(pack.pack)
    assert any("binary change to 'demo_pkg/x.bin' is not declared" in p and ":4:" in p for p in problems(exc))


def test_declared_binary_new_file_applies(pack):
    folder = pack.pack / "fixes/a"
    (folder / "0001-change.patch").write_text(
        "Subject: [PATCH] bin\n\n---\ndiff --git a/demo_pkg/x.bin b/demo_pkg/x.bin\nnew file mode 100644\n"
        "index 0000000..1111111\nBinary files /dev/null and b/demo_pkg/x.bin differ\n")
    (folder / "x.bin").write_bytes(b"\x00\x01\xff")
    (folder / "fix.toml").write_text((folder / "fix.toml").read_text() + '[binary]\n"demo_pkg/x.bin" = "x.bin"\n')
    clean = pack.base / "clean"
    pack.lock(clean)
    original = snapshot(clean)
    assert engine.apply(pack.request(clean)).ok
    assert (clean / "demo_pkg/x.bin").read_bytes() == b"\x00\x01\xff"
    assert engine.revert(pack.request(clean)).ok and snapshot(clean) == original


def test_profile_unknown_fix_and_opt_in_default(pack):
    toml = pack.pack / "fixes/b/fix.toml"
    toml.write_text(toml.read_text() + "opt_in = true\n")
    pack.profile(["a", "b", "nope"])
    with pytest.raises(PackError) as exc:
        load_profile(load_pack(pack.pack), "p1")
    text = "\n".join(problems(exc))
    assert "unknown fix 'nope'" in text and "'b' is opt-in (fix.toml) but listed as a default" in text
    assert "p1.toml:" in text


def test_opt_in_not_allowed(pack):
    pack.profile(["a"])
    p = load_pack(pack.pack)
    with pytest.raises(PackError, match="not allowed by profile 'p1'"):
        select(p, load_profile(p, "p1"), ["b"])


def test_patch_path_outside_the_fix_folder(pack):
    toml = pack.pack / "fixes/b/fix.toml"
    toml.write_text(toml.read_text().replace('"0001-change.patch"', '"../a/0001-change.patch"'))
    with pytest.raises(PackError) as exc:
        load_pack(pack.pack)
    assert any("is not a plain file name" in p and f"{toml}:" in p for p in problems(exc))


def test_requires_itself_and_cycles_are_named(pack):
    ta, tb = pack.pack / "fixes/a/fix.toml", pack.pack / "fixes/b/fix.toml"
    ta.write_text(ta.read_text() + 'requires = ["a"]\n')
    with pytest.raises(PackError) as exc:
        load_pack(pack.pack)
    assert any(f"{ta}:" in p and "requires itself ('a')" in p for p in problems(exc))
    ta.write_text(ta.read_text().replace('requires = ["a"]', 'requires = ["b"]'))
    tb.write_text(tb.read_text() + 'requires = ["a"]\n')
    with pytest.raises(PackError) as exc:
        load_pack(pack.pack)
    text = "\n".join(problems(exc))
    assert "requires 'b', and b -> a: a cycle" in text and "requires 'a', and a -> b: a cycle" in text
    assert "comes later in the series" not in text  # not advice that goes round in circles


@pytest.mark.parametrize("path", ["other_pkg/evil.py", ".fixpack/vllm.manifest.json", "top.py"])
def test_patch_outside_the_target_package_is_refused(pack, path):
    """The root may be site-packages: a path outside the package would change another distribution, or the
    tool's own state."""
    pack.add_fix("c", {path: None}, {path: "planted\n"})
    pack.profile(["a", "b", "c"])
    original = snapshot(pack.base / "clean")
    with pytest.raises(PackError) as exc:
        load_profile(load_pack(pack.pack), "p1")
    patch = pack.pack / "fixes/c/0001-change.patch"
    # the state folder is refused already when the patch is read (not a path of any target)
    expected = ("the tool's own state folder" if path.startswith(".fixpack/") else
                f"changes {path!r}, outside the target's package folder demo_pkg/")
    assert any(f"{patch}:" in p and expected in p for p in problems(exc))
    if path.startswith(".fixpack/"):  # its hint says whose folder it is, not how git writes a path
        said = str(exc.value)
        assert "the tool keeps .fixpack/ itself" in said and "write the path as git does" not in said, said
        assert "((" not in said and "))" not in said, said  # (a fresh user: a parenthesis in a parenthesis)
    with pytest.raises(PackError):
        engine.apply(pack.request(pack.base / "clean"))
    assert snapshot(pack.base / "clean") == original


@pytest.mark.parametrize("module", ["", "demo_pkg/version_info.py"])
def test_a_patch_on_the_version_module_is_refused(pack, module):
    """Found by a fresh user: a fix changing the version module (a ``+gaudi`` suffix) passed check and apply;
    from then on apply, status and revert refused the image (the found version no longer matched the pin), so
    nothing could take the fix out again."""
    path = module or "demo_pkg/_version.py"
    clean = pack.base / "clean"
    if module:
        (clean / module).write_text((clean / "demo_pkg/_version.py").read_text())
    old = (clean / path).read_text()
    pack.add_fix("c", {path: old}, {path: old.replace("__version__ = version = '", "__version__ = version = 'x")})
    pack.profile(["a", "b", "c"], extra_targets=f'version_module = "{module}"' if module else "")
    original = snapshot(clean)
    with pytest.raises(PackError) as exc:
        load_profile(load_pack(pack.pack), "p1")
    patch = pack.pack / "fixes/c/0001-change.patch"
    assert any(f"{patch}:" in p and f"changes {path!r}, the version module the pin is checked against" in p
               for p in problems(exc)), problems(exc)
    with pytest.raises(PackError):
        engine.apply(pack.request(clean))
    assert snapshot(clean) == original


@pytest.mark.parametrize("module", ["../fakever.py", "/etc/hostname", "demo_pkg/../../x.py", "demo_pkg//v.py"])
def test_a_version_module_outside_the_root_is_refused_at_its_line(pack, module):
    """Found by a fresh user: ``version_module = "../fakever.py"`` let a file outside the target vouch for
    its pin."""
    prof = pack.profile(["a", "b"], extra_targets=f'version_module = "{module}"')
    with pytest.raises(PackError) as exc:
        load_profile(load_pack(pack.pack), "p1")
    line = prof.read_text().splitlines().index(f'version_module = "{module}"') + 1
    assert any(f"{prof}:{line}:" in p and f"version_module = {module!r}: " in p and "must be a relative path inside" in p
               for p in problems(exc)), problems(exc)


def test_a_pypi_source_without_a_version_is_refused_at_its_line(pack):
    """Found by a fresh maintainer: check said the pack was clean; lock and edit then asked the index for an sdist of
    no version and said "no sdist on the index (is the version right?)", with no file or line."""
    prof = pack.profile(["a", "b"], extra_targets='source = { pypi = "demo" }')
    prof.write_text(prof.read_text().replace(f'version = "{pack.version}"\n', ""))
    with pytest.raises(PackError) as exc:
        load_profile(load_pack(pack.pack), "p1")
    line = prof.read_text().splitlines().index('source = { pypi = "demo" }') + 1
    assert any(f"{prof}:{line}:" in p and "a PyPI source needs the target's 'version'" in p for p in problems(exc)), \
        problems(exc)


@pytest.mark.parametrize("package", ["../img0/vllm", "vllm/sub", "/abs", "a-b"])
def test_a_package_that_is_no_import_name_is_refused_at_its_line(pack, package):
    """Found by a fresh user: ``package = "../img0/vllm"`` was not checked itself; every patch got an error."""
    prof = pack.profile(["a", "b"])
    prof.write_text(prof.read_text().replace('package = "demo_pkg"', f'package = "{package}"'))
    with pytest.raises(PackError) as exc:
        load_profile(load_pack(pack.pack), "p1")
    line = prof.read_text().splitlines().index(f'package = "{package}"') + 1
    assert any(f"{prof}:{line}:" in p and f"package = {package!r}: not an import package's name" in p
               for p in problems(exc)), problems(exc)


@pytest.mark.parametrize("version", [" 1.0", "1.0\\u202e", "1.0 rc1"])
def test_a_pinned_version_with_a_space_or_a_control_character_is_refused_at_its_line(pack, version):
    """Found by a fresh user: ``version = " 0.30.0"`` (or with a right-to-left override) was not checked: every run
    said the target did not match the pin ("0.30.0 != pinned  0.30.0", the space unseen, the override printed raw),
    naming no file. It is refused at its line of the profile, as a bad commit is, the value escaped."""
    prof = pack.profile(["a", "b"])
    text = prof.read_text()
    assert f'version = "{pack.version}"' in text
    prof.write_text(text.replace(f'version = "{pack.version}"', f'version = "{version}"', 1))
    with pytest.raises(PackError) as exc:
        load_profile(load_pack(pack.pack), "p1")
    said = [p for p in problems(exc) if "is not a release version" in p]
    assert len(said) == 1 and f"{prof}:" in said[0] and "\u202e" not in said[0], problems(exc)


def test_a_default_fix_requiring_a_later_opt_in_gets_advice_that_keeps_the_order(pack):
    """Found by a fresh user: the hint was "move 'b' above 'a'", which puts an opt-in before a default fix
    (refused in turn)."""
    ta, tb = pack.pack / "fixes/a/fix.toml", pack.pack / "fixes/b/fix.toml"
    ta.write_text(ta.read_text() + 'requires = ["b"]\n')
    tb.write_text(tb.read_text() + "opt_in = true\n")
    with pytest.raises(PackError) as exc:
        load_pack(pack.pack)
    text = "\n".join(problems(exc))
    assert "requires opt-in fix 'b': a default fix cannot need an opt-in one" in text, text
    assert "make 'a' opt-in too" in text and "move 'b' above 'a'" not in text


@pytest.mark.parametrize("name", ["fixes/series", "fixes/a/fix.toml"])
def test_a_byte_order_mark_is_named_as_one(pack, name):
    """found by a fresh user: a BOM in fixes/series was "bad fix id '\\ufeff'"."""
    path = pack.pack / name
    path.write_bytes(b"\xef\xbb\xbf# the order\n" + path.read_bytes())
    with pytest.raises(PackError) as exc:
        load_pack(pack.pack)
    assert problems(exc) == [f"{path}:1: a UTF-8 byte order mark (BOM) opens the file (remove it: save the file as "
                             f"UTF-8 without a BOM)"]


@pytest.mark.parametrize("key,value,said", [
    ("fixed_in", "banana", "not a release version"), ("last_update", "2026-13-45", "not a date"),
    ("last_update", "20260101", "not a date"), ("link", "see PR 123 <b>", "not a URL"),
    ("link", "ftp://example.org/x", "not a URL")])
def test_upstream_values_are_checked_at_their_line(pack, key, value, said):
    """found by a fresh user: check took fixed_in = "banana"; a later rebase exited 2 on it without file:line."""
    toml = pack.pack / "fixes/a/fix.toml"
    toml.write_text(toml.read_text() + f'[upstream]\nstatus = "submitted"\n{key} = "{value}"\n')
    line = len(toml.read_text().splitlines())
    with pytest.raises(PackError) as exc:
        load_pack(pack.pack)
    assert [p for p in problems(exc) if p.startswith(f"{toml}:{line}: [upstream] {key} = {value!r}: {said}")], \
        problems(exc)


def test_good_upstream_values_load(pack):
    toml = pack.pack / "fixes/a/fix.toml"
    toml.write_text(toml.read_text() + '[upstream]\nstatus = "accepted"\nfixed_in = "v0.31.0rc1"\n'
                                       'last_update = "2026-02-28"\nlink = "https://github.com/vllm-project/vllm/pull/1"\n')
    assert load_pack(pack.pack).fixes["a"].upstream.fixed_in == "v0.31.0rc1"


def test_a_key_given_twice_is_named(pack):
    """tomllib says "Cannot overwrite a value (at line 4, column 12)" of a key given twice; the message names the key
    and the line that has it already (in its own table: the same key in another table is no clash)."""
    toml = pack.pack / "fixes/a/fix.toml"
    text = toml.read_text()
    first = next(n for n, ln in enumerate(text.splitlines(), 1) if ln.startswith("version ="))
    toml.write_text(text + "version = 2\n")
    again = len(toml.read_text().splitlines())
    with pytest.raises(PackError) as exc:
        load_pack(pack.pack)
    said = [p for p in problems(exc) if f"{toml}:{again}:" in p]
    assert said and f"malformed TOML: the key version is given again (line {first} has it already): Cannot " \
        "overwrite a value" in said[0], problems(exc)


@pytest.mark.parametrize("lines, at, key, before", [
    (['[t1]', 'x = 1', '[t2]', 'x = 1', 'x = 2'], 5, "x", 4),  # in its own table, not the other's
    (['a.b = 1', 'a = 2'], 2, None, None),  # a dotted key's table: not "given twice"
    (['a = 2', 'a.b = 1'], 2, None, None),
    (['version = 1', '"version" = 2'], 2, None, None),  # quoted: tomllib's words
    (['w = """', 'x = 1', '"""', 'x = 1', 'x = 2'], 5, "x", 4),  # line 2 is inside a string
    (['w = """', '[t]', '"""', 'x = 1', 'x = 2'], 5, "x", 4),  # a '[' inside a string is no table
])
def test_a_key_given_twice_is_named_only_where_it_is_so(tmp_path, lines, at, key, before):
    """A second fresh user: the first naming of a key given twice guessed from the text: a dotted key, a quoted key,
    a line inside a string and a '[' inside a string gave a wrong key or a wrong line. A line is named only where
    removing it lets the document be read; else tomllib's words, as they are."""
    from fixpack.documents import read_toml
    from fixpack.errors import Collector

    path = tmp_path / "x.toml"
    path.write_text("\n".join(lines) + "\n")
    errors = Collector()
    assert read_toml(path, errors) is None
    (problem,) = errors.problems
    assert problem.line == at, problem
    if key is None:
        assert "given again" not in problem.message and "Cannot overwrite a value" in problem.message, problem
    else:
        assert problem.message.startswith(f"malformed TOML: the key {key} is given again (line {before} has it "
                                          f"already): "), problem
        assert problem.hint == f"keep one of lines {before} and {at}", problem


@pytest.mark.parametrize("lines, at, key, before", [
    (['why = """one', 'two"""', 'x = 1', 'why = "again"'], 4, "why", 1),  # the first value spans lines
    (['why = "one"', 'x = 1', 'why = """again', 'and more"""'], 3, "why", 1),  # the second: said at its key's line
    (['w = "a\u2028b"', 'x = 1', 'x = 2'], 3, "x", 2),  # U+2028 in a string: no line break to tomllib
])
def test_a_key_given_twice_with_values_of_several_lines(tmp_path, lines, at, key, before):
    """A third fresh user: a key given twice whose first value spans lines (why, description: the keys most likely
    pasted twice) was said in tomllib's words, and where the second spans lines, at its value's last line; a U+2028
    in a string shifted the lines named (str.splitlines breaks there, tomllib does not)."""
    from fixpack.documents import read_toml
    from fixpack.errors import Collector

    path = tmp_path / "x.toml"
    path.write_text("\n".join(lines) + "\n")
    errors = Collector()
    assert read_toml(path, errors) is None
    (problem,) = errors.problems
    assert problem.line == at and problem.message.startswith(
        f"malformed TOML: the key {key} is given again (line {before} has it already): "), problem


def test_a_key_given_three_times_and_a_clash_in_a_large_toml(tmp_path, monkeypatch):
    """A fifth fresh user: a key given three times was said "given twice" (now "given again": the first clash, which is
    what tomllib stops at); and a dotted key's clash at the end of a 64 KB TOML of bare keys tried every line, each a
    parse of the document (94 s): at most 16 lines are tried for each of the clash's two keys."""
    from fixpack import documents
    from fixpack.documents import read_toml
    from fixpack.errors import Collector

    path = tmp_path / "x.toml"
    path.write_text("version = 1\nversion = 2\nversion = 3\n")
    errors = Collector()
    assert read_toml(path, errors) is None
    assert errors.problems[0].message.startswith("malformed TOML: the key version is given again (line 1 has it "
                                                 "already): "), errors.problems
    keys = "".join(f"k{i} = {i}\n" for i in range(5000))  # about 58 KB of bare keys, then the clash
    path.write_text(keys + "x.y = 1\nx.y = 2\n")
    assert 50000 < path.stat().st_size <= 65536
    parses = []
    real = documents.loads_toml
    monkeypatch.setattr(documents, "loads_toml", lambda text: parses.append(1) or real(text))
    errors = Collector()
    assert read_toml(path, errors) is None
    assert "Cannot overwrite a value" in errors.problems[0].message and len(parses) <= 1 + 2 * 16, len(parses)


def test_a_folder_named_as_a_profile_without_its_variant_toml_is_refused(pack):
    """Found by a fresh maintainer: a variant folder whose variant.toml was removed (fixes/<id>/<profile>/ with its
    patches) was taken for no variant: that profile read the fix's own patches, and check then advised a version
    bump. An empty folder is still none (tests/test_unreadable_pack.py)."""
    pack.profile(["a", "b"])
    (pack.pack / "profiles" / "p2.toml").write_text((pack.pack / "profiles" / "p1.toml").read_text()
                                                    .replace('name = "p1"', 'name = "p2"'))
    (pack.pack / "fixes" / "a" / "p2").mkdir()
    load_pack(pack.pack)  # (an empty folder is no variant)
    (pack.pack / "fixes" / "a" / "p2" / "0001-change.patch").write_text("a variant's patch, its variant.toml gone\n")
    (pack.pack / "fixes" / "a" / "notes").mkdir()  # (a folder of the fix's own, named as no profile: fine)
    (pack.pack / "fixes" / "a" / "notes" / "x.txt").write_text("x\n")
    with pytest.raises(PackError) as exc:
        load_pack(pack.pack)
    assert any("fixes/a/p2: folder p2/ is named as profile p2's variant of a but holds no variant.toml" in p
               for p in problems(exc)), problems(exc)


def test_a_patch_listed_but_gone_says_what_to_do(pack):
    """Found by fresh users: the message named the missing patch and its fix.toml line, but no way on; then its
    'git checkout' did not undo a `git rm` (a staged deletion). The command it gives runs as written and does."""
    import shlex
    import subprocess

    from conftest import git

    pack.profile(["a", "b"])
    git(pack.pack, "init", "-q")
    git(pack.pack, "add", "-A")
    git(pack.pack, "commit", "-qm", "pack")
    patch = next((pack.pack / "fixes" / "a").glob("*.patch"))
    kept = patch.read_bytes()
    git(pack.pack, "rm", "-q", str(patch))
    with pytest.raises(PackError) as exc:
        load_pack(pack.pack)
    restore = f"git checkout HEAD -- {shlex.quote(str(patch))}"
    assert any(f"patch {patch.name!r} does not exist in" in p and f"put the patch file back (in a git checkout of the "
               f"pack: {restore}, which undoes a git rm too), or take it out of 'patches'" in p
               for p in problems(exc)), problems(exc)
    subprocess.run(["bash", "-c", restore], cwd=pack.pack, check=True, capture_output=True)
    assert patch.read_bytes() == kept and load_pack(pack.pack)


@pytest.mark.parametrize("head", [b"From 0 Mon Sep 17 00:00:00 2001\n", b""])
def test_a_byte_order_mark_opening_a_patch_is_named_as_one(pack, head):
    """Found by a fresh user: a patch file opened by a BOM was taken (apply exit 0, check "pack is clean") where
    fix.toml and the series refuse one; a patch with no mail header blamed its line 2. Refused at line 1, as those."""
    pack.profile(["a", "b"])
    patch = next((pack.pack / "fixes" / "a").glob("*.patch"))
    body = patch.read_bytes()
    patch.write_bytes(b"\xef\xbb\xbf" + (body if head else body[body.index(b"diff --git"):]))
    with pytest.raises(PackError) as exc:
        load_pack(pack.pack)
    assert f"{patch}:1: a UTF-8 byte order mark (BOM) opens the patch (remove it: save the file as UTF-8 without a " \
           f"BOM)" in problems(exc), problems(exc)


def test_a_bad_fix_id_in_the_series_is_not_also_said_missing_from_it(pack):
    """Found by a fresh user: a fix renamed to an id the pack refuses ('séeded', in its folder, fix.toml and the
    series) was named a bad id at its series line, then "missing from the series (add its id ...)", with no line,
    though the line is there. It is said once, at its line."""
    old = pack.pack / "fixes/b"
    new = old.with_name("bé")
    old.rename(new)
    (new / "fix.toml").write_text((new / "fix.toml").read_text().replace('id = "b"', 'id = "bé"'))
    series = pack.pack / "fixes/series"
    series.write_text(series.read_text().replace("b\n", "bé\n"))
    with pytest.raises(PackError) as exc:
        load_pack(pack.pack)
    said = problems(exc)
    assert any(p.startswith(f"{series}:2: bad fix id 'bé'") for p in said), said
    assert not [p for p in said if "missing from the series" in p], said


def test_an_id_that_is_not_its_folders_name_says_what_to_do(pack):
    """Found by a fresh user: fix.toml's id other than its folder's name was named, at its line, with nothing to do."""
    toml = pack.pack / "fixes/a/fix.toml"
    text = toml.read_text()
    line = next(n for n, ln in enumerate(text.splitlines(), 1) if ln.startswith("id = "))
    toml.write_text("\n".join('id = "a2"' if n == line else ln for n, ln in enumerate(text.splitlines(), 1)) + "\n")
    with pytest.raises(PackError) as exc:
        load_pack(pack.pack)
    assert f"{toml}:{line}: id 'a2' differs from its folder 'a' (write id = \"a\", or rename the folder, and its " \
           f"fixes/series line and profiles too)" in problems(exc), problems(exc)
