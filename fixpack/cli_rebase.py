"""``fixpack rebase``: carry a profile's fixes onto a new upstream release (the CLI front of
:mod:`fixpack.rebase`). Loaded by :mod:`fixpack.cli` when named; ``tools/rebase.py`` runs it alone."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from . import rebase
from .cli_common import default_pack_root, exit_code, outcome, pack_option, parse_roots


@click.command("rebase", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--profile", "-p", default="", help="The profile to rebase, e.g. v0.30.0.")
@click.option("--to", "to_version", default="", metavar="VERSION",
              help="The new upstream version (fetched from PyPI when no --root is given), e.g. 0.31.0.")
@click.option("--root", "roots", multiple=True, metavar="NAME=PATH", help="A new release copy (repeatable).")
@click.option("--old-root", "old_roots", multiple=True, metavar="NAME=PATH",
              help="The old release copy, the 3-way base (default: fetched at the old profile's pin).")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Release copy cache (default: $XDG_CACHE_HOME/fixpack).")
@click.option("--name", default="", help="The new profile's name (default: v<version>).")
@click.option("--work", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Work folder for the merges and conflicts (default: <pack>/.rebase/<name>/).")
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the Markdown and JSON reports go (default: <pack>/reports/).")
@click.option("--target", "only_targets", multiple=True, metavar="NAME",
              help="Rebase only these targets (others keep their pins); default: the targets with fixes.")
@click.option("--allow-dirty", is_flag=True, help="Start even when fixes/ or profiles/ have uncommitted changes.")
@click.option("--continue", "cont", is_flag=True, help="Go on after resolving the conflicts in the work folder.")
@click.option("--abort", "abort", is_flag=True, help="Drop the rebase in progress and everything it wrote.")
@click.option("--python", "python", default="", metavar="PATH",
              help="A stand-in image of the new release (its interpreter, e.g. .venv-vllm-0.31.0/bin/python): each "
                   "carried fix's proof must fail there clean and pass with the fix.")
@click.option("--allow-unproven", is_flag=True,
              help="With --continue and no --python: write the new profile with its fixes marked 'not proven'.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report instead of the Markdown one.")
@pack_option
def rebase_cmd(profile: str, to_version: str, roots: tuple[str, ...], old_roots: tuple[str, ...],
               cache: Path | None, name: str, work: Path | None, report_dir: Path | None,
               only_targets: tuple[str, ...], allow_dirty: bool, cont: bool, abort: bool, python: str,
               allow_unproven: bool, as_json: bool, pack_root: Path | None) -> None:
    """Rebase a profile onto a new upstream release: regenerate every fix's patch (exact, 3-way merge,
    conflict left in a git work folder, or upstreamed), write the new profile, its variants and lock,
    and print the report.

    \b
    fixpack rebase --profile v0.30.0 --to 0.31.0 --target vllm --python .venv-vllm-0.31.0/bin/python
    fixpack rebase --continue     # after resolving conflicts (cd <work>/<fix>; edit; git add)
    fixpack rebase --abort
    """
    if cont and abort:
        raise click.UsageError("--continue and --abort exclude each other")
    if not (cont or abort) and not profile:
        raise click.UsageError("--profile is required to start a rebase")
    req = rebase.RebaseRequest(
        pack_root=(pack_root or default_pack_root()).resolve(), profile=profile, to_version=to_version,
        roots=parse_roots(roots), old_roots=parse_roots(old_roots, "--old-root"), cache=cache, name=name, work=work,
        report_dir=report_dir, allow_dirty=allow_dirty, only_targets=tuple(only_targets), python=python,
        allow_unproven=allow_unproven)
    with outcome(as_json, "rebase", profile):
        if abort:
            restored = rebase.abort(req)
            click.echo(f"rebase aborted; {len(restored)} pack file(s) restored or removed" +
                       "".join(f"\n  {p}" for p in restored))
            return
        result = rebase.resume(req) if cont else rebase.start(req)
    click.echo(json.dumps(result.as_dict(), indent=2, sort_keys=True) if as_json else result.markdown, nl=False)
    if not as_json:
        click.echo(f"\nreport: {result.report_md} and {result.report_json}")
    sys.exit(exit_code(result))


if __name__ == "__main__":  # pragma: no cover
    rebase_cmd()
