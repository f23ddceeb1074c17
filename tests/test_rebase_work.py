"""A rebase's --work folder and its report folder (found by a fresh user): `--work` naming a folder that holds
files (the pack's own checkout) was taken, and `--abort` then removed the whole folder, .git and all; a planted
`report_dir` in state.json had `--continue` write the reports outside the pack. Now a --work folder must be new
or empty (exit 2, nothing written), the start marks it, --continue/--abort refuse one without the mark (exit 3)
and drop only what the rebase made there; the report goes to <pack>/reports unless --report is given again."""

import json

import pytest
from test_rebase import conflicting, pack, req  # noqa: F401 (fixtures)
from test_rebase_trust import planted, run, state, world  # noqa: F401 (fixtures)

from fixpack import rebase
from fixpack.errors import FixpackError


@pytest.mark.parametrize("where", ["a user's folder", "the pack's checkout"])
def test_a_work_folder_that_holds_files_is_refused_up_front(conflicting, where):  # noqa: F811
    b, old, new = conflicting
    work = b.pack if where == "the pack's checkout" else b.base / "wk"
    work.mkdir(exist_ok=True)
    (work / "keep.txt").write_text("precious\n")
    before = world(b.base)
    with pytest.raises(FixpackError) as err:
        rebase.start(req(b, old, new, work=work))
    said = str(err.value)
    assert err.value.exit_code == 2 and f"--work {work}: the folder already holds files" in said, said
    assert "keep.txt" in said and "nothing was written" in said
    assert world(b.base) == before and (b.pack / ".git").is_dir()


@pytest.mark.parametrize("where", ["a user's folder", "the pack's checkout"])
def test_abort_and_continue_remove_nothing_in_a_folder_the_rebase_did_not_make(planted, where):  # noqa: F811
    """The tester's repro, as a planted state: `--abort --work <pack>` removed the checkout, .git included."""
    b, outside = planted
    work = b.pack if where == "the pack's checkout" else outside
    (work / "state.json").write_text(json.dumps(state(b)))
    before = world(b.base)
    for args in (["--abort"], ["--continue", "--allow-unproven"]):
        code, out = run(b, *args, "--work", str(work))
        assert code == 3 and f"{work / '.fixpack-rebase'} is damaged" in out, (args, out)
        assert f"{work} is no work folder a rebase made" in out and "nothing was written" in out
        assert world(b.base) == before and (b.pack / ".git").is_dir() and (outside / "victim.txt").is_file()


@pytest.mark.parametrize("given", ["missing", "empty"])
def test_abort_drops_only_what_the_rebase_made_in_its_work_folder(conflicting, given):  # noqa: F811
    b, old, new = conflicting
    work = b.base / "w" / "v2.0"
    work.mkdir(parents=True) if given == "empty" else None
    result = rebase.start(req(b, old, new, work=work))
    assert result.status == "conflicts" and (work / "first" / ".git").is_dir()
    assert (work / ".fixpack-rebase").read_text() == ("made\n" if given == "missing" else "given\n")
    code, out = run(b, "--abort", "--work", str(work))
    assert code == 0, out
    assert not work.exists() if given == "missing" else list(work.iterdir()) == []
    rebase.start(req(b, old, new, work=work))  # and once more, with notes of the user's beside its files
    (work / "notes.txt").write_text("mine\n")
    code, out = run(b, "--abort", "--work", str(work))
    assert code == 0 and sorted(p.name for p in work.iterdir()) == ["notes.txt"], out


def test_the_default_work_folder_is_dropped_as_before(conflicting):  # noqa: F811
    b, old, new = conflicting
    assert rebase.start(req(b, old, new)).status == "conflicts"
    assert not (b.pack / ".rebase/v2.0/.fixpack-rebase").exists()
    code, out = run(b, "--abort")
    assert code == 0 and not (b.pack / ".rebase").exists(), out


def test_continue_refuses_a_planted_report_dir(conflicting):  # noqa: F811
    """`"report_dir": "/any/folder"` in state.json: --continue wrote rebase-*.md and .json there."""
    b, old, new = conflicting
    rebase.start(req(b, old, new))
    outside = b.base / "elsewhere"
    outside.mkdir()
    path = b.pack / ".rebase/v2.0/state.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"report_dir": str(outside)}))
    before = world(b.base)
    code, out = run(b, "--continue", "--allow-unproven")
    assert code == 3 and f"the state in {path} is damaged: key 'report_dir' is {str(outside)!r}" in out, out
    assert "give --report DIR again" in out and world(b.base) == before
    code, out = run(b, "--continue", "--allow-unproven", "--report", str(outside))  # given: the user's choice
    assert code == 4 and sorted(p.name for p in outside.iterdir()) == ["rebase-p1-to-v2.0.json",
                                                                       "rebase-p1-to-v2.0.md"], out


def test_a_report_folder_of_the_start_is_given_again(conflicting):  # noqa: F811
    b, old, new = conflicting
    reports = b.base / "my reports"
    reports.mkdir()
    result = rebase.start(req(b, old, new, report_dir=reports))
    assert result.continue_flags == ("--allow-unproven", "--report", str(reports))
    assert f"--continue --allow-unproven --report '{reports}'" in "\n".join(result.next_steps)
    code, out = run(b, "--continue", "--allow-unproven")
    assert code == 3 and "key 'report_dir'" in out, out
    code, out = run(b, "--continue", "--allow-unproven", "--report", str(reports))
    assert code == 4 and f"--report '{reports}'" in out, out
