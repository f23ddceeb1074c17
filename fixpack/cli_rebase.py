"""``fixpack rebase``: carry a profile's fixes onto a new upstream release (the CLI front of
:mod:`fixpack.rebase`). Loaded by :mod:`fixpack.cli` when named; ``tools/rebase.py`` runs it alone.

On a terminal the report is a table (the Markdown report is written to ``reports/``); in a pipe it
is plain lines; ``--json`` prints the JSON report (schemas/rebase.schema.json)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import click

from . import rebase
from .cli_common import (
    JsonCommand,
    color_option,
    complete_targets,
    emit_json,
    json_option,
    outcome,
    pack_option,
    parse_roots,
    profile_option,
)
from .cli_plain import default_pack_root, envelope, exit_code
from .cli_progress import CliProgress
from .cli_render import console, use_rich
from .interrupts import signals, terminated
from .rebase_session import terminal_command
from .render import next_steps, render_markdown
from .runlock import pack_lock

OUTCOME_STYLE = {"exact": "green", "merged": "yellow", "conflict": "red", "broken": "red", "upstreamed": "blue"}


@click.command("rebase", cls=JsonCommand, context_settings={"help_option_names": ["-h", "--help"]},
               short_help="Rebase a profile onto a new upstream release.", epilog="""\b
Examples:
  fixpack rebase --profile v0.30.0 --to 0.31.0 --target vllm --name v0.31.0-mine --python .venv-vllm-0.31.0/bin/python
                                # v0.31.0 exists: a new profile (--name), or --replace
  fixpack rebase --continue     # after resolving conflicts (cd <work>/<fix>; edit; git add);
                                # `git cherry-pick --continue` in the work folder works too
  fixpack rebase --abort        # drop the rebase in progress and everything it wrote
  fixpack rebase --undo         # put back what a finished rebase wrote""")
@profile_option("The profile to rebase, e.g. v0.30.0.", required=False)
@click.option("--to", "to_version", default="", metavar="VERSION",
              help="The new upstream version (fetched from PyPI when no --root is given), e.g. 0.31.0.")
@click.option("--root", "roots", multiple=True, metavar="NAME=PATH", help="A new release copy (repeatable).")
@click.option("--old-root", "old_roots", multiple=True, metavar="NAME=PATH",
              help="The old release copy, the 3-way base (default: fetched at the old profile's pin).")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None, metavar="DIR",
              help="Release copy cache (default: $XDG_CACHE_HOME/fixpack, else ~/.cache/fixpack).")
@click.option("--name", default="", help="The new profile's name (default: v<version>).")
@click.option("--work", type=click.Path(file_okay=False, path_type=Path), default=None, metavar="DIR",
              help="Work folder for the merges and conflicts, new or empty, its parent there, outside the pack "
                   "(default: <pack>/.rebase/<name>/).")
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path), default=None, metavar="DIR",
              help="Where the Markdown and JSON reports go (default: <pack>/reports/; give it again with "
                   "--continue).")
@click.option("--target", "only_targets", multiple=True, metavar="NAME", shell_complete=complete_targets,
              help="Rebase only these targets (others keep their pins); default: the targets with fixes.")
@click.option("--allow-dirty", is_flag=True, help="Start even when fixes/ or profiles/ have uncommitted changes.")
@click.option("--continue", "cont", is_flag=True, help="Go on after resolving the conflicts in the work folder.")
@click.option("--abort", "abort", is_flag=True,
              help="Drop the rebase in progress and everything it wrote to the pack (its report is kept).")
@click.option("--undo", "undo", is_flag=True,
              help="Put back the pack files a finished rebase wrote, as they were before it (refused if they "
                   "changed since).")
@click.option("--python", "python", default=None, metavar="PATH",
              help="A stand-in image of the new release (its interpreter, e.g. .venv-vllm-0.31.0/bin/python): each "
                   "carried fix's proof must fail there clean and pass with the fix.")
@click.option("--allow-unproven", is_flag=True,
              help="With --continue and no --python: write the new profile with its fixes marked 'not proven'.")
@click.option("--replace", is_flag=True,
              help="The new profile exists already: replace it, its lock and its variants (--undo puts them back).")
@click.option("--allow-older", is_flag=True,
              help="The new release may be older than the profile's pin (carry the fixes back); refused otherwise.")
@json_option
@color_option
@pack_option
def rebase_cmd(profile: str, to_version: str, roots: tuple[str, ...], old_roots: tuple[str, ...],
               cache: Path | None, name: str, work: Path | None, report_dir: Path | None,
               only_targets: tuple[str, ...], allow_dirty: bool, cont: bool, abort: bool, undo: bool,
               python: str | None, allow_unproven: bool, replace: bool, allow_older: bool, as_json: bool,
               pack_root: Path | None) -> None:
    """Rebase a profile onto a new upstream release: regenerate every fix's patch (exact, 3-way merge,
    conflict left in a git work folder, or upstreamed), write the new profile, its variants and lock,
    and print the report."""
    if cont + abort + undo > 1:
        raise click.UsageError("--continue, --abort and --undo exclude each other")
    given = [o for o, v in (("--root", roots), ("--old-root", old_roots), ("--to", to_version)) if v]
    if (cont or abort or undo) and given:  # (--continue took none of them, and said nothing)
        raise click.UsageError(f"{', '.join(given)}: the release copies a rebase works on are given when it starts; "
                               f"--{'continue' if cont else 'abort' if abort else 'undo'} uses those its start "
                               f"recorded (a copy changed since: put it back as fetch unpacked it, or --abort)")
    got: list[int] = []  # SIGTERM unwinds as Ctrl-C does (fixpack.interrupts), and is said as SIGTERM (exit 143)
    ended: list[rebase.RebaseResult] = []  # the rebase's result once it has ended: a signal after that says so

    @contextmanager
    def said() -> Iterator[None]:  # the command's outcome (cli_common.outcome), a signal told as _stopped tells it
        with outcome(as_json, "rebase", profile):
            try:
                yield
            except KeyboardInterrupt as exc:
                raise _stopped(exc, got, ended, pack_root, work) from None

    with signals(got):
        try:
            _rebase(profile, to_version, roots, old_roots, cache, name, work, report_dir, only_targets, allow_dirty,
                    cont, abort, undo, python, allow_unproven, replace, allow_older, as_json, pack_root, ended, said)
        except KeyboardInterrupt as exc:  # outside the engine and its outcome: as the report is printed
            with said():
                raise exc from None


def _stopped(exc: KeyboardInterrupt, got: list[int], ended: list[rebase.RebaseResult], pack_root: Path | None,
             work: Path | None) -> BaseException:
    """What a Ctrl-C or SIGTERM (``exc``; ``got``: the signals noted) outside the engine's own handling says: once
    the rebase had ended (``ended``), that it did (done: ``--undo`` puts it back), never 'did not finish'; before,
    SIGTERM is exit 143 (a Ctrl-C is the CLI's 'interrupted', exit 5)."""
    from .errors import Terminated
    from .rebase_stop import ended_after

    term = terminated(exc, got)
    if ended:
        root = (pack_root or default_pack_root()).resolve()
        return ended_after(ended[0], root, work.resolve() if work is not None else None, term)
    return Terminated("terminated (SIGTERM); fixpack rebase did not finish. Run it again") if term else exc


def _rebase(profile: str, to_version: str, roots: tuple[str, ...], old_roots: tuple[str, ...], cache: Path | None,
            name: str, work: Path | None, report_dir: Path | None, only_targets: tuple[str, ...], allow_dirty: bool,
            cont: bool, abort: bool, undo: bool, python: str | None, allow_unproven: bool, replace: bool,
            allow_older: bool, as_json: bool, pack_root: Path | None, ended: list[rebase.RebaseResult],
            said: Callable[[], AbstractContextManager[None]]) -> None:
    if undo:
        with said():
            root = (pack_root or default_pack_root()).resolve()
            with pack_lock(root):  # one writer of the pack at a time
                restored = rebase.undo(root, name)
        _say_restored("undo", profile, restored, as_json)
        return
    if not (cont or abort) and not profile:
        raise click.UsageError("--profile is required to start a rebase")
    if python is not None and not python.strip():  # --python "$PY" with PY unset: not the same as no --python
        raise click.UsageError("--python is empty: give the interpreter of a stand-in image of the release "
                               "(bash tools/image-venv.sh VERSION DIR builds one), or leave --python out")
    with said():
        req = rebase.RebaseRequest(
            pack_root=(pack_root or default_pack_root()).resolve(), profile=profile, to_version=to_version,
            roots=parse_roots(roots), old_roots=parse_roots(old_roots, "--old-root"), cache=cache, name=name,
            work=work, report_dir=report_dir, allow_dirty=allow_dirty, only_targets=tuple(only_targets),
            python=os.path.abspath(python) if python else "",  # (printed in --continue commands run from anywhere)
            allow_unproven=allow_unproven, replace=replace, allow_older=allow_older,
            progress=CliProgress(as_json), ended=ended)
        with pack_lock(req.pack_root, req.progress):  # one writer of the pack at a time, from reading to writing
            if abort:
                restored, kept = rebase.abort(req)
            else:
                onto = to_version or "its --root"
                what = "resuming the rebase" if cont else f"rebasing profile {profile} onto {onto}"
                with _working(what):
                    result = rebase.resume(req) if cont else rebase.start(req)
    if abort:
        _say_restored("abort", profile, restored, as_json, kept)
        return
    if as_json:
        emit_json(result.as_dict() | {"profile": result.from_profile, "ok": result.exit_code == 0,
                                      "error": "" if result.exit_code == 0 else "conflicts left to resolve"})
    else:
        steps = next_steps(result, terminal_command(req.pack_root, result.to_profile, req.work))
        _render(result.as_dict() | {"next_steps": steps}, render_markdown(result, steps))
        click.echo(f"\nreport: {result.report_md} and {result.report_json}")
    sys.exit(exit_code(result))


def _say_restored(action: str, profile: str, restored: list[str], as_json: bool,
                  kept: list[Path] | None = None) -> None:
    """What --abort or --undo put back (paths relative to the pack), and the reports --abort keeps."""
    if as_json:
        extra = {"reports_kept": [str(p) for p in kept]} if kept is not None else {}
        emit_json(envelope("rebase", profile, action=action, restored=restored) | extra)
    else:
        done = {"abort": "aborted", "undo": "undone"}[action]
        click.echo(f"rebase {done}; {len(restored)} pack file(s) restored or removed" +
                   "".join(f"\n  {p}" for p in restored))
        if kept:
            click.echo("its report is kept (the record of why it stopped; remove it if unwanted):" +
                       "".join(f"\n  {p}" for p in kept))


@contextmanager
def _working(what: str) -> Iterator[None]:
    """A spinner on a terminal, one line on stderr otherwise (the report comes at the end)."""
    if use_rich(sys.stderr):
        with console(stderr=True).status(f"{what} (fetching release copies, carrying each fix) ..."):
            yield
    else:
        click.echo(f"fixpack: {what} ...", err=True)
        yield


def _render(doc: dict[str, Any], markdown: str) -> None:
    """A table on a terminal; the Markdown report in a pipe (CI logs keep the whole report). Both name the next
    steps' commands as this program runs them (the report file keeps them plain)."""
    head = f"rebase {doc['from_profile']} -> {doc['to_profile']}: {doc['status']}"
    rows = [(f["id"], f["outcome"], f["patch"], f"v{f['old_version']}->v{f['new_version']}",
             "; ".join(f["flags"]), f.get("proof", "-")) for f in doc["fixes"]]
    if not use_rich():
        click.echo(markdown, nl=False)
        return
    from rich.markup import escape
    from rich.table import Table

    out = console()
    table = Table(title=escape(head), title_justify="left")
    for col in ("fix", "outcome", "patch", "version", "proof"):
        table.add_column(col, no_wrap=col not in ("fix", "proof"))
    for fid, oc, patch, ver, _flags, proof in rows:
        table.add_row(escape(fid), f"[{OUTCOME_STYLE.get(oc, '')}]{escape(oc)}[/]", escape(patch), ver,
                      f"[{'green' if proof == 'proven' else 'yellow'}]{escape(proof)}[/]")
    if rows:
        out.print(table)
    else:
        out.print(escape(head))
    for fid, _oc, _patch, _ver, flags, _proof in rows:
        if flags:
            out.print(f"[bold]{escape(fid)}[/]: {escape(flags)}", soft_wrap=True)
    for line in doc["next_steps"]:
        out.print(escape(line), soft_wrap=True)


if __name__ == "__main__":  # pragma: no cover
    rebase_cmd()
