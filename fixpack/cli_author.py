"""The maintainer's authoring commands: edit, new, import, export (and refresh from a work tree, through
:mod:`fixpack.cli_maint`). Loaded by :mod:`fixpack.cli` only when one of them is named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .cli_common import (
    color_option,
    complete_fixes,
    complete_targets,
    emit_json,
    json_option,
    outcome,
    pack_option,
    parse_roots,
    profile_option,
)
from .cli_plain import default_pack_root, envelope
from .cli_progress import CliProgress
from .errors import BadInputError

ROOT_OPTION = click.option("--root", "roots", multiple=True, metavar="NAME=PATH",
                           help="The target's clean release copy (default: fetched into the cache, or taken from it).")
CACHE_OPTION = click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None, metavar="DIR",
                            help="Release copy cache (default: $XDG_CACHE_HOME/fixpack, else ~/.cache/fixpack).")


def _started(as_json: bool, command: str, profile: str, state: Any, pack_root: Path) -> None:
    if as_json:
        emit_json(envelope(command, profile, fix=state.fix, work=state.work, target=state.target,
                           after=state.after, new=state.new, laid=state.laid))
        return
    click.echo(f"work tree: {state.work}")
    click.echo(f"  the clean {state.target} release (tag fixpack-upstream), the fixes before {state.fix} (tag "
               f"fixpack-base), then {'no commit yet' if state.new else 'its patches, one commit each'}", err=True)
    from .progname import command as program_command
    from .progname import pack_words

    refresh = program_command("refresh", state.fix, *pack_words(pack_root))
    click.echo(f"  change it with git (commit, amend, add commits), then: {refresh}", err=True)


@click.command("edit", short_help="Open a fix as a git work tree (or --abort one).", epilog="""\b
Examples:
  fixpack edit seeded-sampling --profile v0.30.0   # .edit/seeded-sampling: commit there, then refresh
  fixpack edit --abort seeded-sampling             # remove the work tree, the pack unchanged""")
@click.argument("fix_id", required=False, default="", metavar="FIX", shell_complete=complete_fixes)
@profile_option("The profile whose chain the fix sits in, e.g. v0.30.0.", required=False)
@click.option("--abort", is_flag=True, help="Remove the work tree of FIX (or of the one edit in progress).")
@ROOT_OPTION
@CACHE_OPTION
@pack_option
@json_option
@color_option
def edit_cmd(fix_id: str, profile: str, abort: bool, roots: tuple[str, ...], cache: Path | None,
             pack_root: Path | None, as_json: bool) -> None:
    """Make .edit/FIX/: the clean release copy, one commit per patch of every fix before FIX, then FIX's."""
    from . import editwork

    with outcome(as_json, "edit", profile):
        root = pack_root or default_pack_root()
        if abort:  # a killed pack update is rolled back first, and said on stderr
            gone, rolled = editwork.abort_edit(root, fix_id, CliProgress())
        else:
            if not fix_id or not profile:
                raise BadInputError("usage: fixpack edit FIX --profile P (or fixpack edit --abort [FIX])")
            state = editwork.start(root, profile, fix_id, cache=cache, roots=parse_roots(roots),
                                   progress=CliProgress())
    if abort:
        said = (f"removed {gone}" + (editwork.ROLLED_FIRST if rolled else "")
                if gone else "rolled back the pack update a killed run left (no edit"
                             f"{' of ' + fix_id if fix_id else ''} in progress)")
        if as_json:  # removed: the work tree removed, if any; rolled_back: whether a killed pack update was
            doc = envelope("edit", profile, rolled_back=bool(rolled))
            if gone:
                doc["removed"] = str(gone)
            emit_json(doc)
        else:
            click.echo(said)
        return
    _started(as_json, "edit", profile, state, root)


@click.command("new", short_help="Start a new fix in a git work tree.", epilog="""\b
Example:
  fixpack new my-fix --profile v0.30.0 --target vllm     # commit in .edit/my-fix, then: fixpack refresh my-fix""")
@click.argument("fix_id", metavar="FIX")
@profile_option("The profile the new fix joins, e.g. v0.30.0.")
@click.option("--target", required=True, metavar="NAME", shell_complete=complete_targets,
              help="The target the fix changes (a target of the profile).")
@click.option("--after", default="", metavar="FIX", shell_complete=complete_fixes,
              help="Place it right after this fix in the series (default: after the profile's last default fix, or "
                   "last with --opt-in).")
@click.option("--opt-in", "opt_in", is_flag=True, help="An opt-in fix (applied only when named).")
@ROOT_OPTION
@CACHE_OPTION
@pack_option
@json_option
@color_option
def new_cmd(fix_id: str, profile: str, target: str, after: str, opt_in: bool, roots: tuple[str, ...],
            cache: Path | None, pack_root: Path | None, as_json: bool) -> None:
    """Make .edit/FIX/ for a fix not in the pack yet; `fixpack refresh FIX` adds it to series, profile and lock."""
    from . import editwork

    with outcome(as_json, "new", profile):
        root = pack_root or default_pack_root()
        state = editwork.start(root, profile, fix_id, new=True, target=target,
                               after=after, opt_in=opt_in, cache=cache, roots=parse_roots(roots),
                               progress=CliProgress())
    _started(as_json, "new", profile, state, root)


def print_refreshed(done: Any, as_json: bool, command: str) -> None:
    """A refresh's or an import's outcome: the files written, the locks, each later fix's state."""
    out = done.outcome
    if as_json:
        refreshed = [p for p in out.written if p in done.patches]
        emit_json(envelope(command, done.profile, fix=done.fix, patches=done.patches, written=out.written,
                           locks=out.locks, changed=out.changed, refreshed=refreshed,
                           later=[f.as_dict() for f in out.later], warnings=out.warnings))
        return
    for warning in out.warnings:
        click.echo(f"fixpack: warning: {warning}", err=True)
    if not out.changed:
        click.echo(f"{done.fix}: nothing changed (its patches, fix.toml and the lock are as the commits give them)")
    for path in out.written:
        click.echo(f"wrote {path}")
    if out.later:
        click.echo("later fixes on top: " + "; ".join(f"{f.id} {f.state}" for f in out.later))


@click.command("import", short_help="New fix from a format-patch file or an mbox.", epilog="""\b
Example:
  fixpack import 1234.patch --as my-fix --profile v0.30.0      # one patch a mail, DEP-3 fields from the mails""")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE")
@click.option("--as", "fix_id", required=True, metavar="FIX", help="The new fix's id.")
@profile_option("The profile the new fix joins, e.g. v0.30.0.")
@click.option("--target", default="", metavar="NAME", shell_complete=complete_targets,
              help="The target it changes (default: the profile's one target with fixes).")
@click.option("--after", default="", metavar="FIX", shell_complete=complete_fixes,
              help="Place it right after this fix (default: after the last default fix, or last with --opt-in).")
@click.option("--opt-in", "opt_in", is_flag=True, help="An opt-in fix (applied only when named).")
@ROOT_OPTION
@pack_option
@json_option
@color_option
def import_cmd(file: Path, fix_id: str, profile: str, target: str, after: str, opt_in: bool, roots: tuple[str, ...],
               pack_root: Path | None, as_json: bool) -> None:
    """Add FILE's mails as a new fix: checked on the profile's chain, in series, profile and lock."""
    from .exchange import import_mails

    with outcome(as_json, "import", profile):
        done = import_mails(pack_root or default_pack_root(), file, fix_id, profile, target, after, opt_in,
                            parse_roots(roots), CliProgress())
    print_refreshed(done, as_json, "import")


@click.command("export", short_help="Write a profile's chain as a git am series.", epilog="""\b
Example:
  fixpack export --profile v0.30.0 topk-subset-sampler vllm-long-prefill-share --out /tmp/series
  git -C <a clean checkout> am /tmp/series/*.patch""")
@profile_option("The profile to export, e.g. v0.30.0.")
@click.argument("opt_ins", nargs=-1, metavar="[OPT-IN FIX]...", shell_complete=complete_fixes)
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="The folder to write NNNN-<fix>-<patch> files and `series` into (made if missing).")
@click.option("--target", default="", metavar="NAME", shell_complete=complete_targets,
              help="Only this target's fixes (needed when the profile patches several).")
@pack_option
@json_option
@color_option
def export_cmd(profile: str, opt_ins: tuple[str, ...], out: Path, target: str, pack_root: Path | None,
               as_json: bool) -> None:
    """The profile's default fixes plus the named opt-ins, in series order, one format-patch file a patch."""
    from .exchange import export

    with outcome(as_json, "export", profile):
        files = export(pack_root or default_pack_root(), profile, opt_ins, out, target)
    if as_json:
        emit_json(envelope("export", profile, out=str(out), files=[p.name for p in files]))
        return
    for path in files:
        click.echo(str(path))
