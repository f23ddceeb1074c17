"""A pack edited by hand in two ways a fresh user tried, each said at the line to change, the same by ``check``,
``status`` and ``apply``, and nothing written: a fix.toml whose ``target`` names another real target of the profile
(every file its patches change lies in that other target's package), and a patch whose hunk has some lines ending
in CRLF (an editor's doing), which makes the lock stale without a visible edit."""

from pathlib import Path

import pytest
from conftest import GAUDI_RUNNER, numbered, one_fix_pack, snapshot, two_target_pack

from fixpack import engine
from fixpack.errors import PackError, StaleLockError
from fixpack.loader import load_pack
from fixpack.lock_seal import unseen_edit_said
from fixpack.pack_check import check_pack


def _retarget(toml: Path, to: str) -> int:
    """Set fix.toml's target to ``to``; the line it is on (1-based)."""
    lines = toml.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("target = "))
    lines[at] = f'target = """{to}"""\n'
    toml.write_text("".join(lines))
    return at + 1


def test_a_fix_whose_target_names_another_target_of_the_profile_is_said_once_at_its_target_line(builder, tmp_path):
    req, clean, gclean = two_target_pack(builder, tmp_path)
    toml = builder.pack / "fixes/plugin/fix.toml"
    line = _retarget(toml, "demo")
    findings = [f for f in check_pack(builder.pack)[0] if "package folder" in f.message]  # (no proofs: said too)
    assert [(f.file, f.line) for f in findings] == [("fixes/plugin/fix.toml", line)], findings
    said = findings[0].message
    assert 'target = "demo" (package folder demo_pkg/), but every file its patches change lies under vllm_gaudi/' in said
    assert 'set target = "vllm-gaudi"' in findings[0].hint
    before = snapshot(clean), snapshot(gclean)
    for run in (engine.status, engine.apply):  # status: not a stale lock whose lock command would fail
        with pytest.raises(PackError) as exc:
            run(req)
        assert f"{toml}:{line}: " in str(exc.value) and "is stale" not in str(exc.value), str(exc.value)
        assert str(exc.value).count(GAUDI_RUNNER) == 0  # one finding, not one per patch file
    assert (snapshot(clean), snapshot(gclean)) == before


def test_a_fix_with_files_in_its_own_package_too_is_said_per_patch_file(builder, tmp_path):
    """Where its files do not all lie in one other target's package, the target is not the evident slip: each file
    outside its own package is said at its patch line, as before."""
    req, clean, gclean = two_target_pack(builder, tmp_path)
    toml = builder.pack / "fixes/plugin/fix.toml"
    _retarget(toml, "demo")
    patch = builder.pack / "fixes/plugin/0001-change.patch"
    text = patch.read_text()
    patch.write_text(text + text[text.index("diff --git"):].replace(GAUDI_RUNNER, "demo_pkg/other.py"))
    findings = [f for f in check_pack(builder.pack)[0] if "package folder" in f.message]
    assert [f.file for f in findings if "outside the target's package folder demo_pkg/" in f.message] == [
        "fixes/plugin/0001-change.patch"], findings
    assert not any(f.file.endswith("fix.toml") for f in findings), findings


def test_a_patch_with_crlf_on_some_lines_of_a_hunk_names_the_line(builder):
    image = one_fix_pack(builder)
    patch = builder.pack / "fixes/one/0001-change.patch"
    lines = patch.read_bytes().split(b"\n")
    at = next(i for i, line in enumerate(lines) if line.startswith(b"+three"))
    lines[at] += b"\r"
    patch.write_bytes(b"\n".join(lines))
    before = snapshot(image)
    said = f"{patch}:{at + 1}: the line ends in CR LF, while the patch's other lines of demo_pkg/mod.py end in LF"
    for run in (engine.status, engine.apply):  # status too: the patch first, not a stale lock
        with pytest.raises(PackError) as exc:
            run(builder.request(image))
        assert said in str(exc.value) and "is stale" not in str(exc.value), str(exc.value)
    assert snapshot(image) == before


def test_crlf_on_a_context_line_too_is_named_beside_the_stale_lock(builder):
    """CR on a context line and an added line: no side of the file is LF throughout, so the patch reads; the lock
    is stale, and the message names the first such line."""
    image = one_fix_pack(builder)
    patch = builder.pack / "fixes/one/0001-change.patch"
    lines = patch.read_bytes().split(b"\n")
    at = [i for i, line in enumerate(lines) if line in (b" line 2", b"+three")]
    for i in at:
        lines[i] += b"\r"
    patch.write_bytes(b"\n".join(lines))
    before = snapshot(image)
    said = f"{patch}:{at[0] + 1} ends in CRLF where other lines of its hunk end in LF"
    with pytest.raises(StaleLockError) as exc:
        engine.status(builder.request(image))
    assert said in str(exc.value), str(exc.value)
    assert any(said in f.message for f in check_pack(builder.pack)[0])
    assert snapshot(image) == before


def test_a_patch_of_a_file_with_crlf_line_ends_throughout_is_not_said(builder):
    base = numbered(12)
    folder = builder.add_fix("one", {"demo_pkg/mod.py": base}, {"demo_pkg/mod.py": base.replace("line 3\n", "three\n")})
    patch = folder / "0001-change.patch"
    lines = patch.read_bytes().split(b"\n")
    hunk = lines.index(next(line for line in lines if line.startswith(b"@@")))
    patch.write_bytes(b"\n".join(lines[:hunk + 1] + [line + b"\r" if line else line for line in lines[hunk + 1:]]))
    fix = load_pack(builder.pack).fixes["one"]
    assert b"+three\r\n" in patch.read_bytes() and fix.patches[0].files  # (it reads: the file's line ends)
    assert unseen_edit_said(fix) == ""
    lines = patch.read_bytes().split(b"\n")
    patch.write_bytes(b"\n".join(line.removesuffix(b"\r") if line == b" line 2\r" else line for line in lines))
    assert unseen_edit_said(load_pack(builder.pack).fixes["one"]).startswith(f"; {patch}:{hunk + 3} ends in LF where other")


def test_a_command_given_cache_names_it_in_the_commands_it_suggests(builder, tmp_path):
    """A fresh user: `check --cache DIR` on a stale lock suggested a `lock` that would fetch into the default cache;
    a command run after it in the same process (no --cache) suggests none, and status, which takes no --cache, too."""
    from click.testing import CliRunner

    from fixpack import cli

    image = one_fix_pack(builder)
    toml = builder.pack / "fixes/one/fix.toml"
    toml.write_text(toml.read_text().replace("version = 1", "version = 2"))
    cache = tmp_path / "my cache"
    said = CliRunner().invoke(cli.main, ["check", "--pack", str(builder.pack), "--cache", str(cache)])
    assert said.exit_code == 2 and f" lock --profile p1 --pack {builder.pack} --cache '{cache}' " in said.output, \
        said.output
    again = CliRunner().invoke(cli.main, ["check", "--pack", str(builder.pack)])
    assert again.exit_code == 2 and " lock --profile p1 " in again.output and "--cache" not in again.output, again.output
    status = CliRunner().invoke(cli.main, ["status", "--pack", str(builder.pack), "--profile", "p1", "--root",
                                           f"demo={image}"])
    assert status.exit_code == 2 and " lock --profile p1 " in status.output and "--cache" not in status.output
    assert not cache.exists()  # (check names it; nothing was fetched)


def test_a_byte_that_is_no_utf8_in_a_hunk_is_named_beside_the_stale_lock(builder):
    """A fresh user: a byte that is no UTF-8 in a context line made the lock stale and nothing more was said."""
    image = one_fix_pack(builder)
    patch = builder.pack / "fixes/one/0001-change.patch"
    lines = patch.read_bytes().split(b"\n")
    at = lines.index(b" line 2")
    lines[at] = b" line\xff 2"
    patch.write_bytes(b"\n".join(lines))
    before = snapshot(image)
    said = f"{patch}:{at + 1} is no UTF-8 (byte 0xff at column 6)"
    for run in (engine.status, engine.apply):
        with pytest.raises(StaleLockError) as exc:
            run(builder.request(image))
        assert said in str(exc.value), str(exc.value)
    assert any(said in f.message for f in check_pack(builder.pack)[0])
    assert snapshot(image) == before


def test_a_patch_rewritten_onto_another_targets_package_is_said_by_status_as_by_apply(builder, tmp_path):
    """A fresh user: fix.toml's target left as it was but the patch's paths rewritten to the other target's package
    (or to both): check and apply said the pack finding, status a stale lock with a `lock` command that then failed."""
    req, clean, gclean = two_target_pack(builder, tmp_path)
    patch = builder.pack / "fixes/core/0001-change.patch"
    patch.write_text(patch.read_text().replace("demo_pkg/mod.py", "vllm_gaudi/mod.py"))
    before = snapshot(clean), snapshot(gclean)
    for run in (engine.status, engine.apply):
        with pytest.raises(PackError) as exc:
            run(req)
        assert "is stale" not in str(exc.value) and "fixes/core/fix.toml:" in str(exc.value), str(exc.value)
    assert (snapshot(clean), snapshot(gclean)) == before
