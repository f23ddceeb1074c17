"""`fixpack check` names an opt-in fix that fixes/series puts before a default fix of the same profile when both
change a file (the order `fixpack new` refuses): the default fix is written and locked on the opt-in's post-image,
so every image applied without the opt-in finds it drifted and `apply --strict` refuses it. Before, check passed
such a pack."""

import json
import shutil
import subprocess
import sys

import pytest
from conftest import REPO, numbered
from test_json_schemas import validate
from test_lock_edges import fixpack

from fixpack.pack_check import check_pack

MOD, OTHER = "demo_pkg/mod.py", "demo_pkg/other.py"
BASE = numbered(30)


def _proofs(b, *ids):
    for fid in ids:
        (b.pack / f"fixes/{fid}/test_{fid}.py").write_text("def test_it():\n    pass\n")


@pytest.fixture
def opt_first(builder):
    """Opt-in ``o`` first in the series, default ``d`` written on ``o``'s post-image of MOD; locked so."""
    b = builder
    clean = b.tree("clean", {MOD: BASE, OTHER: BASE})
    o_done = BASE.replace("line 5\n", "five\n")
    b.add_fix("o", {MOD: BASE}, {MOD: o_done}, opt_in=True)
    b.add_fix("d", {MOD: o_done}, {MOD: o_done.replace("line 20\n", "twenty\n")})
    _proofs(b, "o", "d")
    b.profile(["d"], ["o"])
    b.lock(clean)
    return b, b.tree("image", {MOD: BASE, OTHER: BASE})


def test_an_opt_in_before_a_default_fix_sharing_a_file_is_named_at_its_profile_line(opt_first):
    b, image = opt_first
    line = next(n for n, ln in enumerate((b.pack / "profiles/p1.toml").read_text().splitlines(), 1)
                if ln.startswith("opt_in ="))
    assert [str(f) for f in check_pack(b.pack)[0]] == [
        f"profiles/p1.toml:{line}: opt-in fix o (fixes/series:1) comes before default fix d (fixes/series:2) and both "
        f"change {MOD}: d's patches are written and locked on top of o's, so every image of profile p1 applied "
        f"without o finds d drifted (apply --strict refuses it: image mismatch) (move o after d in fixes/series "
        f"(opt-in fixes follow the default ones), or make o a default fix of profile p1, or rebase d onto the release "
        f"without o)"]
    # what the finding foretells: the image without o is refused under --strict
    r = fixpack("apply", "--strict", "-p", "p1", "--root", f"demo={image}", "--pack", str(b.pack))
    assert r.returncode == 3 and "d v1: drifted" in r.stdout, (r.stdout, r.stderr)
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "check", "--pack", str(b.pack), "--json"],
                       capture_output=True, text=True, cwd=REPO)
    doc = validate(json.loads(r.stdout), "check")
    assert r.returncode == 2 == doc["exit_code"]
    assert [(f["file"], f["line"]) for f in doc["findings"]] == [("profiles/p1.toml", line)]
    assert doc["findings"][0]["hint"].startswith("move o after d in fixes/series")


def test_the_entry_line_of_a_multi_line_opt_in_list(opt_first):
    b, _ = opt_first
    prof = b.pack / "profiles/p1.toml"
    prof.write_text(prof.read_text().replace('opt_in = ["o"]', 'opt_in = [\n  "o",  # first in the series\n]'))
    b.lock(b.base / "clean")
    line = prof.read_text().splitlines().index('  "o",  # first in the series') + 1
    assert [(f.file, f.line) for f in check_pack(b.pack)[0]] == [("profiles/p1.toml", line)]


def test_an_opt_in_before_a_default_fix_that_shares_no_file_is_no_finding(builder):
    """A default fix on another file than the opt-in before it is written on the release as it is: no drift."""
    b = builder
    clean = b.tree("clean", {MOD: BASE, OTHER: BASE})
    b.add_fix("o", {MOD: BASE}, {MOD: BASE.replace("line 5\n", "five\n")}, opt_in=True)
    b.add_fix("d", {OTHER: BASE}, {OTHER: BASE.replace("line 20\n", "twenty\n")})
    _proofs(b, "o", "d")
    b.profile(["d"], ["o"])
    b.lock(clean)
    assert check_pack(b.pack) == ([], ["p1"])


def test_the_committed_pack_with_an_opt_in_moved_before_a_default_fix(tmp_path):
    """This repository's pack, topk-subset-sampler (opt-in) moved above seeded-sampling (default; both change the
    sampler): named in each profile at topk-subset-sampler's entry (the locks, made for the old order, are stale
    too)."""
    pack = tmp_path / "pack"
    for name in ("fixes", "profiles", "ports", "kernels"):
        shutil.copytree(REPO / name, pack / name, ignore=shutil.ignore_patterns("__pycache__", ".*_cache"))
    series = pack / "fixes/series"
    lines = series.read_text().splitlines(keepends=True)
    lines.remove("topk-subset-sampler\n")
    lines.insert(lines.index("seeded-sampling\n"), "topk-subset-sampler\n")
    series.write_text("".join(lines))
    at = {fid.strip(): n for n, fid in enumerate(lines, 1)}
    findings, profiles = check_pack(pack)
    ours = [f for f in findings if f.message.startswith("opt-in fix")]
    assert [f.file for f in ours] == [f"profiles/{p}.toml" for p in profiles] and len(profiles) == 4
    for f in ours:
        text = (pack / f.file).read_text().splitlines()
        key = next(n for n, ln in enumerate(text, 1) if ln.startswith("opt_in ="))  # one line or one entry a line
        assert '"topk-subset-sampler"' in text[f.line - 1] and key <= f.line, f
        assert f.message.startswith(
            f"opt-in fix topk-subset-sampler (fixes/series:{at['topk-subset-sampler']}) comes before default fix "
            f"seeded-sampling (fixes/series:{at['seeded-sampling']}) and both change "
            f"vllm/v1/sample/ops/topk_topp_sampler.py: "), f
        assert f.hint.startswith("move topk-subset-sampler after seeded-sampling in fixes/series"), f


@pytest.mark.parametrize("style, line", [
    ('[fixes]  # the fixes\ndefault = ["d"]\nopt_in = [  # keep "o" last\n  "o",\n]\n', 4),
    ('[fixes]\ndefault = ["d"]\nopt_in = ["x", "o"]\n# note: "o" goes first\n', 3),
    ('fixes.default = ["d"]\nfixes.opt_in = [\n  # "o" here\n  \'o\',\n]\n', 4),
])
def test_the_finding_is_at_the_entry_line_whatever_the_toml_layout(style, line):
    """Found by a fresh user: a comment naming the opt-in was taken for its entry, a line after the list too, and a
    comment after [fixes] or a top-level fixes.opt_in gave no line at all."""
    from fixpack.pack_check import _entry_line  # (the unit under test)

    assert _entry_line(style, "opt_in", "o") == line


@pytest.mark.parametrize("style, line", [
    ('["fixes"]\ndefault = ["d"]\nopt_in = ["o", "x"]\n', 3),
    ('"fixes".default = ["d"]\n"fixes".opt_in = ["o", "x"]\n', 2),
    ('fixes = { default = ["d"], opt_in = ["o", "x"] }\n', 1),
    ('description = """\n[fixes]\nopt_in = ["o"]\n"""\n[targets.demo]\npackage = "p"\n[fixes]\ndefault = ["d"]\n'
     'opt_in = ["o"]\n', 9),
    ('description = """\n[not a table\n"""\nfixes.default = ["d"]\nfixes.opt_in = ["o"]\n', 5),
])
def test_the_finding_line_in_quoted_inline_and_multi_line_string_layouts(style, line):
    """Found by a second fresh user: a quoted [\"fixes\"] header, a quoted dotted key and an inline table gave no line,
    and a [fixes] written inside a multi-line description was taken for the table."""
    from fixpack.pack_check import _entry_line  # (the unit under test)

    assert _entry_line(style, "opt_in", "o") == line
