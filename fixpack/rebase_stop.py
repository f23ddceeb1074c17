"""What a rebase stopped by Ctrl-C (SIGINT) or SIGTERM says outside its pack write (that one puts its files back
and says so itself: :func:`fixpack.rebase_session.write_pack`): what it had written and had not, and the way on.
SIGTERM (a CI timeout, :mod:`fixpack.interrupts`) is :class:`fixpack.errors.Terminated`, exit 143; Ctrl-C is exit 5,
as :func:`fixpack.errors.interrupted` is elsewhere.
"""

from __future__ import annotations

from pathlib import Path

from .errors import EnvironmentProblem, FixpackError, stopped_by
from .interrupts import Term
from .rebase_io import cannot
from .rebase_registry import entry_path
from .rebase_result import RebaseResult
from .rebase_session import Session, resume_command, way_on, written_so_far


def _nothing_this_run(left: list[str]) -> str:
    """What a run stopped before its pack write says of the pack (``left``: files an earlier run, cut short harder,
    left written)."""
    return (f"this run wrote nothing to the pack, and the {len(left)} pack file(s) an earlier run of it left written "
            f"stay as they are ({', '.join(left)})" if left else "")


def stopped_carrying(session: Session, exc: KeyboardInterrupt) -> FixpackError:
    """Ctrl-C or SIGTERM (``exc``) while the rebase carried the fixes, before its pack write: nothing of the pack is
    written until every fix is carried, so its files hold what they held (or what an earlier run of the rebase, cut
    short harder, left there: named). What the start wrote is kept: the rebase's ``state.json`` in its work folder,
    the work repositories of the conflicts met so far, and the pack's record of the rebase in progress (which
    refuses a new start to the name): ``--continue`` carries the fixes again and writes the pack, ``--abort`` drops
    it. A ``--continue`` keeps the rebase as it was, resolved conflicts too."""
    how, kind = stopped_by(isinstance(exc, Term))
    again, drop = way_on(session, "continue"), way_on(session, "abort")
    pack = _nothing_this_run(written_so_far(session)) or ("nothing was written to the pack (fixes/ and profiles/ are "
                                                          "as they were: it writes them once every fix is carried)")
    head = f"{how} while the rebase carried the fixes: {pack}"
    if not session.starting:
        return kind(f"{head}; the rebase in {session.work} is kept as it was, resolved conflicts too: run it again "
                    f"(`{again}`), or drop it with `{drop}`")
    repos = sorted(session.state.get("repos") or ())
    kept = f"{session.state_path}" + (f" and the work repositories of the conflicts met so far ({', '.join(repos)})"
                                      if repos else "")
    return kind(f"{head}; the start's work is kept ({kept}), and the pack records the rebase to {session.new_name} "
                f"as in progress ({entry_path(session.pack_root, session.new_name)}), so a new start to that name is "
                f"refused: carry the fixes again and write the pack with `{again}`, or drop the rebase (nothing in the "
                f"pack to put back) with `{drop}`")


def terminated_after(session: Session, term: bool = True) -> FixpackError:
    """SIGTERM (Ctrl-C: ``term`` False, exit 5) once the rebase had carried every fix, while it saved its state or
    report, or, its pack written, while it ended (its undo record, dropping its work folder), or in the instant
    before a cut pack write puts its files back (those left written are named): ``--continue`` goes on from where it
    stood (it writes the same pack files again); a rebase that was done by then is none in progress, and ``--undo``
    puts it back."""
    again = way_on(session, "continue")
    from .progname import command  # only when it is said

    left = written_so_far(session)
    done = "its pack files are written" if session.state.get("phase") == "written" else \
        f"{len(left)} pack file(s) are left written ({', '.join(left)})" if left else "nothing was written to the pack"
    undo = command("rebase", "--undo", "--pack", str(session.pack_root), "--name", session.new_name)
    how, kind = stopped_by(term)
    return kind(f"{how} while the rebase ended (its state, its report, its work folder): {done}; "
                f"finish it with `{again}` (when that finds no rebase in progress, this one was done: `{undo}` "
                f"puts its pack files back)")


def io_failed(session: Session, exc: OSError) -> EnvironmentProblem:
    """A file the rebase could not write, make or remove (``exc``: a full disk, a read-only or immutable folder)
    outside its pack write (that one puts its files back and says so itself): the file and its errno, what was
    written, and the way on. While it carried the fixes nothing was written to the pack (a start then leaves no
    trace: :func:`fixpack.rebase.start`); once the pack is written (the state 'written', the rebase still in
    progress), ``--continue`` finishes it."""
    again, drop = way_on(session, "continue"), way_on(session, "abort")
    head = cannot(exc)
    if session.state.get("phase") == "written":
        return EnvironmentProblem(f"{head}; the rebase's pack files are written, and the rebase to {session.new_name} "
                                  f"is still in progress (its state is kept in {session.work}): free space or make it "
                                  f"writable, then finish it with `{again}`, or put the pack back with `{drop}`")
    pack = _nothing_this_run(written_so_far(session)) or "nothing was written to the pack"
    if session.starting and session.state.get("phase") == "merging":
        return EnvironmentProblem(f"{head} while the rebase carried the fixes: {pack}, and the rebase left no trace: "
                                  f"free space or make it writable, then run it again")
    return EnvironmentProblem(f"{head} while the rebase carried the fixes: {pack}; the rebase in {session.work} is "
                              f"kept as it was, resolved conflicts too: free space or make it writable, then run it "
                              f"again (`{again}`), or drop it with `{drop}`")


def ended_after(result: RebaseResult, pack_root: Path, work: Path | None, term: bool) -> FixpackError:
    """Ctrl-C or SIGTERM (``term``) once the rebase had ended (``result``): done (its pack files written, its
    report, its undo record kept, its work folder dropped: nothing in progress), or stopped on conflicts (its report
    written, its state saved), as the report was to be printed: said so, never 'did not finish'; ``--undo`` puts a
    done one back. Exit 143 for SIGTERM, else 5."""
    from .progname import command  # only when it is said

    how, kind = stopped_by(term)
    to, report = result.to_profile, f"its report: {result.report_md}" if result.report_md else "its report"
    if result.status == "done":
        wrote = (f"it wrote {len(result.written)} pack file(s) ({', '.join(result.written)})" if result.written
                 else "it wrote nothing to the pack")
        undo = command("rebase", "--undo", "--pack", str(pack_root), "--name", to)
        return kind(f"{how} once the rebase to {to} was done ({report}): {wrote}, and no rebase is in progress; "
                    f"`{undo}` puts its pack files back")
    again = resume_command("continue", pack_root, to, work, *result.continue_flags)
    return kind(f"{how} once the rebase to {to} had stopped on conflicts ({report}): resolve them in {result.work}, "
                f"then run `{again}`")
