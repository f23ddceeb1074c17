"""The maintainer's commands: lock, fetch, prove, format, refresh, check. Loaded by :mod:`fixpack.cli` only
when one of them is named, so that an image's ``apply`` never imports what they need."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import click

from .cli_common import (
    color_option,
    common,
    complete_fixes,
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
from .errors import EXIT_BAD_INPUT, BadInputError
from .progname import command, pack_words
from .runlock import pack_lock

CACHE_HELP = "Release copy cache (default: $XDG_CACHE_HOME/fixpack, else ~/.cache/fixpack)."


def _fetch_missing(pack_root: Path, profile: str, roots: dict[str, Path], only: tuple[str, ...],
                   progress: CliProgress, cache: Path | None = None) -> dict[str, Path]:
    """``lock`` without --root or --copies: the clean release copies of the profile's targets the lock
    covers, those with a fix or a component (the named ones with --target), fetched (or taken from the cache,
    ``cache``: --cache's)."""
    from . import release
    from .loader import load_pack, load_profile
    from .lock_hints import lock_targets

    pack = load_pack(pack_root)
    prof = load_profile(pack, profile)
    covered = lock_targets(prof, pack)
    for spec in prof.targets:
        if spec.name in roots or (only and spec.name not in only) or (not only and spec.name not in covered):
            continue
        roots[spec.name] = release.fetch(spec, cache, progress=progress).root  # a download reports itself
    return roots


def _fixes_of(root: Path, prof: Any) -> Mapping[str, Any]:
    """The pack's fixes for ``prof`` (a warning names their patch files)."""
    from .loader import load_pack

    return load_pack(root).for_profile(prof.name).fixes


@click.command("lock", short_help="Generate or --check a profile's lock.", epilog="""\b
Examples:
  fixpack lock --profile v0.30.0 --target vllm --check      # CI: fetch the release copy, compare
  fixpack lock --profile v0.30.0 --target vllm --root vllm=$HOME/.cache/fixpack/vllm-0.30.0""")
@common
@click.option("--check", is_flag=True, help="Fail (exit 2) when the committed lock is stale; write nothing.")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None, metavar="DIR",
              help=CACHE_HELP + " Where a target without --root is fetched.")
def lock_cmd(profile: str, roots: tuple[str, ...], only_targets: tuple[str, ...], pack_root: Path | None,
             copies_root: Path | None, lock_wait: float, as_json: bool, check: bool, cache: Path | None) -> None:
    """Generate (or --check) profiles/<profile>.lock from clean release copies (fetched when no --root)."""
    from . import engine, lockfile
    from .lock_bump import check_fresh, refuse_unbumped
    from .lock_hints import twin_warnings
    from .lock_scope import relock, scoped

    progress = CliProgress()
    with outcome(as_json, "lock", profile):
        root = pack_root or default_pack_root()
        given = parse_roots(roots)
        if copies_root is None:
            given = _fetch_missing(root, profile, given, tuple(only_targets), progress, cache)
        # the copies a command it names is given: --root's, and those fetched into --cache's folder (not the default
        # cache, where that command fetches them itself)
        shown = given if cache is not None else parse_roots(roots)
        req = engine.Request(pack_root=root, profile=profile, roots=given, only_targets=tuple(only_targets),
                             env_root=copies_root, lock_wait=lock_wait)
        with pack_lock(root, progress) if not check else nullcontext():  # one writer of the pack at a time
            if not check:  # a folder where the lock goes: said before the fingerprinting (no second pack load)
                lockfile.refuse_a_folder(root / "profiles" / f"{profile}.lock")
            with progress.step(f"fingerprinting the chain of profile {profile}"):  # --check: stale before conflict
                lock, prof = (engine.fingerprint_to_check(req, shown) if check
                              else engine.fingerprint_chain(req))
            reworded: list[str] = []
            unrecorded: list[tuple[str, str]] = []
            twins = [] if check else twin_warnings(lock, lambda: _fixes_of(root, prof), root.resolve())
            for warning in twins:  # (lock --check compares; check says nothing of style)
                click.echo(f"fixpack: warning: {warning}", err=True)
            same = not check and lockfile.unchanged(prof, lock)
            if check:  # a stale lock names the command with this run's pack, targets and clean copies
                only = tuple(only_targets)  # --target: the named targets' entries alone are compared
                reworded, unrecorded = check_fresh(prof, lock, lambda: relock(prof, only, shown,
                                                                              copies_root),
                                                   scope=lambda have: scoped(prof, only, have, lock))
            elif not same:  # an unchanged lock is left alone (its inode and time too)
                found = lockfile.previous_locks(prof)  # the lock on disk and HEAD's, read once for both checks
                for warning in refuse_unbumped(prof, lock, found):  # a fix's patch changed under its version
                    click.echo(f"fixpack: warning: {warning}", err=True)  # a lock in HEAD not compared with
                try:
                    lockfile.write(prof, lock, found[0])
                except OSError as exc:  # (a full disk: the temp file is gone, the lock as it was)
                    from .errors import write_failed
                    from .records import dumps

                    raise write_failed(exc, prof.lock_path, dumps(lock.to_json())) from exc
    path = str(prof.lock_path)
    if as_json:
        emit_json(envelope("lock", profile, check=check, path=path, written=not check and not same, reworded=reworded,
                           unrecorded=[fid for fid, _where in unrecorded],
                           warnings=twins,
                           targets={k: dict(v) for k, v in lock.targets.items()},
                           fixes=[{"id": f.id, "version": f.version, "target": f.target, "files": len(f.files),
                                   "hunks": len(f.hunks)} for f in lock.fixes]))
    else:
        click.echo(f"lock is fresh: {path}" if check else f"unchanged: {path} (it holds this lock already; "
                   f"nothing written)" if same else f"wrote {path}")
        if reworded:  # fresh (the same changes), but the bytes shortcut misses: say what lock would renew
            click.echo(f"  reworded since the lock (same change, other patch bytes): {', '.join(reworded)}; apply "
                       f"parses {'these patches' if len(reworded) > 1 else 'this patch'} until "
                       f"`{relock(prof, tuple(only_targets), shown, copies_root)}` "
                       f"renews the lock's byte fingerprints")
        for fid, where in unrecorded:  # (the key is a shortcut: the lock is fresh without it, apply parses the patch)
            click.echo(f"  {where}: fix {fid}'s entry has no \"patch_bytes_sha256\" (the hash of the patch bytes it "
                       f"was made from: the key was removed, or the lock is older than it); apply parses its patch "
                       f"until `{relock(prof, tuple(only_targets), shown, copies_root)}` regenerates the "
                       f"lock")


@click.command("fetch", short_help="Fetch clean release copies; print NAME=ROOT.", epilog="""\b
Examples:
  fixpack fetch --profile v0.30.0 --target vllm              # prints vllm=<root>
  fixpack fetch --profile v0.30.0 --version 0.31.0           # the targets with fixes, at 0.31.0""")
@profile_option("Profile whose targets to fetch, e.g. v0.30.0.")
@click.option("--target", "only_targets", multiple=True, metavar="NAME", shell_complete=complete_targets,
              help="Only these targets (repeatable). Default: every target of the profile; with --version, the "
                   "targets with fixes.")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None, metavar="DIR",
              help=CACHE_HELP)
@click.option("--version", "version", default="", metavar="VERSION",
              help="Fetch this upstream version instead of the pinned one (its pin is then not checked).")
@click.option("--url", default="", help="Git URL for a git-hosted target (overrides the profile's).")
@pack_option
@json_option
@color_option
def fetch_cmd(profile: str, only_targets: tuple[str, ...], cache: Path | None, version: str, url: str,
              pack_root: Path | None, as_json: bool) -> None:
    """Fetch and cache clean release copies; print NAME=ROOT for each (usable as --root)."""
    from . import release
    from .loader import load_pack, load_profile

    progress = CliProgress()
    fetched: list[dict[str, Any]] = []
    with outcome(as_json, "fetch", profile):
        pack = load_pack(pack_root or default_pack_root())
        prof = load_profile(pack, profile)
        with_fixes = {pack.fixes[f].target for f in prof.default + prof.opt_in}
        names = only_targets or tuple(t.name for t in prof.targets if not version or t.name in with_fixes)
        for name in names:
            try:
                spec = prof.target(name)
            except KeyError:
                raise BadInputError(f"unknown target {name!r} (profile {profile} has "
                                    f"{', '.join(t.name for t in prof.targets)})") from None
            found = release.fetch(spec, cache, version=version, url=url, progress=progress)
            fetched.append({"name": name, "root": str(found.root), "version": found.version,
                            "commit": found.commit, "evidence": list(found.evidence)})
            if not as_json:
                click.echo(f"{name}={found.root}")
                click.echo(f"  {name} release copy: version {found.version}, commit {found.commit} (read from: "
                           f"{'; '.join(found.evidence)})", err=True)
    if as_json:
        emit_json(envelope("fetch", profile, targets=fetched))


@click.command("prove", short_help="Prove fixes: clean image fails, patched passes.", epilog="""\b
It patches the given interpreter's site-packages (apply with every opt-in), runs the proofs, applies
again (must write nothing) and reverts (every byte back). Needs the full setup (bash tools/setup.sh).
Examples:
  fixpack prove --profile v0.30.0 --python .venv/bin/python
  fixpack prove --profile v0.30.0 --python .venv/bin/python seeded-sampling prompt-order --json""")
@profile_option("Profile whose fixes to prove, e.g. v0.30.0.")
@click.option("--python", "python", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The image's interpreter (e.g. .venv/bin/python with vLLM installed); its site-packages is "
                   "patched for the run and reverted after.")
@click.option("--target", default="", shell_complete=complete_targets, metavar="NAME",
              help="The target to prove (default: the profile's one target with fixes).")
@click.argument("fix_ids", nargs=-1, metavar="[FIX]...", shell_complete=complete_fixes)
@pack_option
@json_option
@color_option
def prove_cmd(profile: str, python: str, target: str, fix_ids: tuple[str, ...], pack_root: Path | None,
              as_json: bool) -> None:
    """Run fixes' proof tests on the clean image (must fail) and the patched image (must pass)."""
    from .prove import prove

    with outcome(as_json, "prove", profile):
        run = prove(pack_root or default_pack_root(), profile, python, target or None, only=fix_ids,
                    progress=CliProgress())
    if as_json:
        emit_json(envelope("prove", profile, exit_code(run), "" if run.ok else "not every fix is proven",
                           python=python, target=target, **run.as_dict()))
        sys.exit(exit_code(run))
    tail = [f"second apply wrote nothing: {run.reapply_wrote_nothing}; "
            f"revert restored every byte: {run.revert_restored_bytes}", *run.notes]
    if use_rich():
        from rich.table import Table

        table = Table(title=f"proof of profile {profile} on {python}", title_justify="left")
        for col in ("fix", "clean (must fail)", "patched (must pass)", "verdict"):
            table.add_column(col, no_wrap=col != "fix")
        for r in run.results:
            table.add_row(r.fix, f"rc={r.clean_rc}", f"rc={r.patched_rc}",
                          "[green]proven[/]" if r.ok else "[red]NOT PROVEN[/]")
        out = console()
        if run.results:
            out.print(table)
        for r in run.results:
            out.print(f"{r.fix}: clean: {r.clean_summary}; patched: {r.patched_summary}", soft_wrap=True, markup=False)
        for line in tail:
            out.print(line, soft_wrap=True, markup=False)
    else:
        for r in run.results:
            click.echo(f"{r.fix}: {'proven' if r.ok else 'NOT PROVEN'} - clean rc={r.clean_rc} {r.clean_summary}; "
                       f"patched rc={r.patched_rc} {r.patched_summary}")
        for line in tail:
            click.echo(line)
    sys.exit(exit_code(run))


@click.command("format", short_help="Write patches deterministically.", epilog="""\b
Examples:
  fixpack format --check        # CI: exit 2 when a patch is not in its deterministic form
  fixpack format                # rewrite them""")
@click.option("--check", is_flag=True, help="Fail (exit 2) when a patch is not in its deterministic form.")
@pack_option
@json_option
@color_option
def format_cmd(check: bool, pack_root: Path | None, as_json: bool) -> None:
    """Write every patch of the pack deterministically (headers from fix.toml, no churn)."""
    from .loader import load_pack
    from .pack_tools import rewrite_patches, stale_patches
    from .run import refuse_half_written

    with outcome(as_json, "format"):
        root = pack_root or default_pack_root()
        with pack_lock(root) if not check else nullcontext():  # one writer of the pack at a time
            refuse_half_written(root)
            pack = load_pack(root)
            paths = stale_patches(pack) if check else rewrite_patches(pack)
    failed = check and bool(paths)
    error = f"patches not in their deterministic form; run `{command('format', *pack_words(root))}` and commit" \
        if failed else ""
    if as_json:
        emit_json(envelope("format", "", EXIT_BAD_INPUT if failed else 0, error, check=check,
                           patches=[str(p) for p in paths]))
    else:
        for p in paths:
            click.echo(f"{'stale' if check else 'rewrote'}: {p}")
        if failed:
            click.echo(f"fixpack: error: {error}", err=True)
        click.echo(f"{len(paths)} patch(es) {'stale' if check else 'rewritten'}")
    if failed:
        sys.exit(EXIT_BAD_INPUT)


@click.command("refresh", short_help="Work tree commits (or the chain) -> patches.", epilog="""\b
Examples:
  fixpack refresh seeded-sampling          # from .edit/seeded-sampling (fixpack edit): commits -> patches, lock
  fixpack refresh --profile v0.30.0 --root vllm=$HOME/.cache/fixpack/vllm-0.30.0 seeded-sampling""")
@profile_option("The profile whose chain the fix is refreshed on (without a work tree).", required=False)
@click.option("--root", "roots", multiple=True, metavar="NAME=PATH",
              help="Without a work tree: a clean release copy of the fix's target (e.g. from `fixpack fetch`).")
@pack_option
@json_option
@color_option
@click.argument("fix_ids", nargs=-1, required=True, metavar="FIX...", shell_complete=complete_fixes)
def refresh_cmd(profile: str, roots: tuple[str, ...], pack_root: Path | None, as_json: bool,
                fix_ids: tuple[str, ...]) -> None:
    """From a fix's work tree (fixpack edit / new): its commits become its patch files, fix.toml, series, profile
    and lock follow, later fixes are checked on top. Without one: regenerate the patch against its chain on a
    clean release copy (like quilt refresh)."""
    from .cli_author import print_refreshed
    from .closenames import close_names
    from .editrefresh import refresh_from_work
    from .loader import load_pack
    from .pack_tools import refresh
    from .patchfiles import patch_again
    from .run import refuse_half_written
    from .safepath import holds_bytes

    done: list[str] = []
    unchanged: list[str] = []
    with outcome(as_json, "refresh", profile):
        root = pack_root or default_pack_root()
        if len(fix_ids) == 1 and not roots:
            work = refresh_from_work(root, fix_ids[0], CliProgress())
            if work is not None:
                print_refreshed(work, as_json, "refresh")
                return
        parsed = parse_roots(roots)
        refuse_half_written(root)  # regenerated on a half-written chain, it would be undone by the rollback
        fixes = load_pack(root).fixes
        for fid in fix_ids:
            if fid not in fixes:
                raise BadInputError(f"unknown fix {fid!r} in the pack at {root} ({close_names(fid, list(fixes))})")
            target = fixes[fid].target
            if target not in parsed or not profile:
                edit = command("edit", fid, *pack_words(root))
                raise BadInputError(f"{fid}: no work tree of it (`{edit} --profile P` makes one); to refresh it on "
                                    f"its chain give --profile P --root {target}=PATH (a clean release copy)")
            patches = fixes[fid].for_profile(profile).patches
            before = patch_again(patches[0], then="run the refresh again; nothing was written") if patches else None
            with pack_lock(root):  # one writer of the pack at a time
                written = refresh(root, profile, fid, parsed[target])
            changed = before is None or not holds_bytes(written, before)
            (done if changed else unchanged).append(str(written))
            if not as_json:
                click.echo(f"{'refreshed' if changed else 'unchanged (nothing to regenerate)'} {written}")
    if as_json:
        emit_json(envelope("refresh", profile, refreshed=done, unchanged=unchanged))


@click.command("check", short_help="Lint the pack: series, proofs, patches, locks.", epilog="""\b
Examples:
  fixpack check                 # offline: every lock against the pack (its changes, versions, pins)
  fixpack check --fresh         # also regenerate each lock on the clean release copies (fetched, cached)""")
@click.option("--fresh", is_flag=True, help="Also compare each profile's lock with one generated now on the clean "
                                            "release copies of its targets with fixes (fetched into the cache).")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None, metavar="DIR",
              help=CACHE_HELP)
@pack_option
@json_option
@color_option
def check_cmd(fresh: bool, cache: Path | None, pack_root: Path | None, as_json: bool) -> None:
    """Lint the pack: every fix in a profile (or retired), every profile's fix in the series, a proof per
    fix, every fix.toml and patch valid, every lock matching the pack (--fresh: and the release copies).
    Exit 0 when clean, 2 with each finding named by file and line."""
    from .pack_check import check_pack

    progress = CliProgress()
    with outcome(as_json, "check"):
        root = pack_root or default_pack_root()
        copies = _release_copies(cache, progress) if fresh else None
        with progress.step("checking the pack"):
            findings, profiles = check_pack(root, copies)
    code = EXIT_BAD_INPUT if findings else 0
    error = f"{len(findings)} finding(s) in the pack at {root}" if findings else ""
    if as_json:
        emit_json(envelope("check", "", code, error, fresh=fresh, pack=str(root), profiles=profiles,
                           findings=[f.as_dict() for f in findings]))
    else:
        for f in findings:
            click.echo(str(f))
        click.echo(f"fixpack: error: {error}" if findings else
                   f"pack is clean: {len(profiles)} profile(s){', locks fresh' if fresh else ''}", err=bool(findings))
    sys.exit(code)


def _release_copies(cache: Path | None, progress: CliProgress) -> Any:
    """For ``check --fresh``: a profile's clean release copies (targets with fixes), fetched or cached."""
    from . import release
    from .model import Pack, Profile

    def copies(pack: Pack, profile: Profile) -> dict[str, Path]:
        with_fixes = {pack.fixes[f].target for f in profile.default + profile.opt_in}
        return {t.name: release.fetch(t, cache, progress=progress).root for t in profile.targets
                if t.name in with_fixes}
    return copies
