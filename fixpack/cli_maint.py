"""The maintainer's commands: lock, fetch, prove, format, refresh. Loaded by :mod:`fixpack.cli` only
when one of them is named, so that an image's ``apply`` never imports what they need."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .cli_common import common, default_pack_root, exit_code, outcome, pack_option, parse_roots
from .cli_render import render
from .errors import EXIT_BAD_INPUT, BadInputError
from .report import Report


@click.command("lock")
@common
@click.option("--check", is_flag=True, help="Fail (exit 2) when the committed lock is stale; write nothing.")
def lock_cmd(profile: str, roots: tuple[str, ...], only_targets: tuple[str, ...], pack_root: Path | None,
             copies_root: Path | None, lock_wait: float, as_json: bool, check: bool) -> None:
    """Generate (or --check) profiles/<profile>.lock from clean release copies (--root NAME=PATH)."""
    from . import engine

    with outcome(as_json, "lock", profile):
        req = engine.Request(pack_root=pack_root or default_pack_root(), profile=profile, roots=parse_roots(roots),
                             only_targets=tuple(only_targets), env_root=copies_root, lock_wait=lock_wait)
        if check:
            engine.check_lock_fresh(req)
            msg = "lock is fresh"
        else:
            msg = f"wrote {engine.write_lock(req)}"
    if as_json:
        render(Report("lock", profile), True)
    else:
        click.echo(msg)


@click.command("fetch")
@click.option("--profile", "-p", required=True, help="Profile whose targets to fetch.")
@click.option("--target", "only_targets", multiple=True, metavar="NAME", help="Only these targets (repeatable).")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Cache folder (default: $XDG_CACHE_HOME/fixpack).")
@click.option("--version", "version", default="", help="Fetch this upstream version instead of the pinned one.")
@click.option("--url", default="", help="Git URL for a git-hosted target (overrides the profile's).")
@pack_option
def fetch_cmd(profile: str, only_targets: tuple[str, ...], cache: Path | None, version: str, url: str,
              pack_root: Path | None) -> None:
    """Fetch and cache clean release copies; print NAME=ROOT for each (usable as --root)."""
    from . import release
    from .loader import load_pack, load_profile

    with outcome(False, "fetch", profile):
        prof = load_profile(load_pack(pack_root or default_pack_root()), profile)
        names = only_targets or tuple(t.name for t in prof.targets)
        for name in names:
            try:
                spec = prof.target(name)
            except KeyError:
                raise BadInputError(f"unknown target {name!r} (profile {profile} has "
                                    f"{', '.join(t.name for t in prof.targets)})") from None
            found = release.fetch(spec, cache, version=version, url=url)
            click.echo(f"{name}={found.root}")
            click.echo(f"  {found.version} @ {found.commit} ({'; '.join(found.evidence)})", err=True)


@click.command("prove")
@click.option("--profile", "-p", required=True, help="Profile whose fixes to prove, e.g. v0.30.0.")
@click.option("--python", "python", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The image's interpreter (e.g. .venv/bin/python with vLLM installed).")
@click.option("--target", default="", help="The target to prove (default: every target of the profile with fixes).")
@pack_option
def prove_cmd(profile: str, python: str, target: str, pack_root: Path | None) -> None:
    """Run every fix's proof tests on the clean image (must fail) and the patched image (must pass)."""
    from rich.console import Console
    from rich.table import Table

    from .prove import prove

    with outcome(False, "prove", profile):
        run = prove(pack_root or default_pack_root(), profile, python, target or None)
    table = Table(title=f"proof of profile {profile} on {python}", title_justify="left")
    for col in ("fix", "clean image (must fail)", "patched image (must pass)", "verdict"):
        table.add_column(col, overflow="fold")
    for r in run.results:
        table.add_row(r.fix, f"rc={r.clean_rc} {r.clean_summary}", f"rc={r.patched_rc} {r.patched_summary}",
                      "[green]proven[/]" if r.ok else "[red]NOT PROVEN[/]")
    console = Console(width=None if sys.stdout.isatty() else 160)
    console.print(table)
    console.print(f"second apply wrote nothing: {run.reapply_wrote_nothing}; "
                  f"revert restored every byte: {run.revert_restored_bytes}")
    for note in run.notes:
        console.print(note)
    sys.exit(exit_code(run))


@click.command("format")
@click.option("--check", is_flag=True, help="Fail (exit 2) when a patch is not in its deterministic form.")
@pack_option
def format_cmd(check: bool, pack_root: Path | None) -> None:
    """Write every patch of the pack deterministically (headers from fix.toml, no churn)."""
    from .loader import load_pack
    from .pack_tools import rewrite_patches, stale_patches

    with outcome(False, "format"):
        pack = load_pack(pack_root or default_pack_root())
        paths = stale_patches(pack) if check else rewrite_patches(pack)
    for p in paths:
        click.echo(f"{'stale' if check else 'rewrote'}: {p}")
    if check and paths:
        click.echo("fixpack: error: patches not in their deterministic form; run `fixpack format` and commit",
                   err=True)
        sys.exit(EXIT_BAD_INPUT)
    click.echo(f"{len(paths)} patch(es) {'stale' if check else 'rewritten'}")


@click.command("refresh")
@click.option("--profile", "-p", required=True, help="The profile whose chain the fix is refreshed on.")
@click.option("--root", "roots", multiple=True, metavar="NAME=PATH", required=True,
              help="A clean release copy of the fix's target.")
@pack_option
@click.argument("fix_ids", nargs=-1, required=True)
def refresh_cmd(profile: str, roots: tuple[str, ...], pack_root: Path | None, fix_ids: tuple[str, ...]) -> None:
    """Regenerate fixes' patches against their chain on a clean release copy (like quilt refresh)."""
    from .loader import load_pack
    from .pack_tools import refresh

    parsed = parse_roots(roots)
    root = pack_root or default_pack_root()
    with outcome(False, "refresh", profile):
        fixes = load_pack(root).fixes
        for fid in fix_ids:
            if fid not in fixes:
                raise BadInputError(f"unknown fix {fid!r} in the pack at {root}")
            target = fixes[fid].target
            if target not in parsed:
                raise BadInputError(f"{fid} targets {target}: give --root {target}=PATH (a clean release copy)")
            click.echo(f"refreshed {refresh(root, profile, fid, parsed[target])}")
