"""The terminal front: parse with click, call one engine function, render with rich (or JSON).

Exit codes are mapped here and only here, from :mod:`fixpack.errors`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import __version__, engine
from .errors import EXIT_BAD_INPUT, EXIT_CONFLICT, EXIT_INTERNAL, BadInputError, FixpackError
from .report import Report

STATE_STYLE = {"applied": "green", "absent": "cyan", "upstreamed": "blue", "drifted": "yellow",
               "conflict": "red", "partial": "red", "tampered": "red", "skipped": "dim"}


def default_pack_root() -> Path:
    """$FIXPACK_PACK, else the working folder if it holds fixes/series, else the checkout of this package."""
    env = os.environ.get("FIXPACK_PACK")
    if env:
        return Path(env)
    if (Path.cwd() / "fixes" / "series").is_file():
        return Path.cwd()
    return Path(__file__).resolve().parent.parent


def _parse_roots(values: tuple[str, ...]) -> dict[str, Path]:
    roots = {}
    for v in values:
        name, sep, path = v.partition("=")
        if not sep or not name or not path:
            raise click.BadParameter(f"{v!r}: expected NAME=PATH, e.g. vllm=/opt/venv/lib/python3.11/site-packages",
                                     param_hint="--root")
        roots[name] = Path(path)
    return roots


def common(fn: Callable[..., Any]) -> Callable[..., Any]:
    opts = [
        click.option("--profile", "-p", required=True, help="Profile name, e.g. v0.30.0 (profiles/<name>.toml)."),
        click.option("--root", "roots", multiple=True, metavar="NAME=PATH",
                     help="Where a target lives: a source tree, git checkout or site-packages (repeatable)."),
        click.option("--target", "only_targets", multiple=True, metavar="NAME",
                     help="Restrict the run to these targets; the others are reported as skipped (repeatable)."),
        click.option("--pack", "pack_root", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help="The fix pack's root (default: $FIXPACK_PACK, the working folder, or this checkout)."),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON document (schema in the README)."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _request(profile: str, roots: tuple[str, ...], only_targets: tuple[str, ...], pack_root: Path | None,
             **kw: Any) -> engine.Request:
    return engine.Request.from_env(pack_root=pack_root or default_pack_root(), profile=profile,
                                   roots=_parse_roots(roots), only_targets=tuple(only_targets), **kw)


def _run(call: Callable[[], Report], as_json: bool, command: str, profile: str) -> None:
    try:
        report = call()
    except FixpackError as exc:
        _fail(exc, exc.exit_code, as_json, command, profile)
    except Exception as exc:  # a bug: say so, with the exit code for internal errors
        _fail(exc, EXIT_INTERNAL, as_json, command, profile, internal=True)
    render(report, as_json)
    sys.exit(report.exit_code)


def _fail(exc: BaseException, code: int, as_json: bool, command: str, profile: str, internal: bool = False) -> None:
    msg = f"internal error: {exc!r} (please report it)" if internal else str(exc)
    if as_json:
        r = Report(command, profile, exit_code=code, error=msg)
        click.echo(json.dumps(r.as_dict(), indent=2, sort_keys=True))
    else:
        click.echo(f"fixpack: error: {msg}", err=True)
    sys.exit(code)


def render(report: Report, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2, sort_keys=True))
        return
    if sys.stdout.isatty():
        _render_rich(report)
    else:
        _render_plain(report)


def _fix_detail(f: Any) -> str:
    # drifted fixes carry their offsets in their messages already
    return "; ".join(f.messages)


def _render_plain(report: Report) -> None:
    head = f"{report.command} profile {report.profile}" + (" (dry run)" if report.dry_run else "")
    click.echo(head)
    for t in report.targets:
        facts = f"{t.version or '?'} @ {t.commit or '?'}" if t.status in ("found", "mismatch") else ""
        click.echo(f"target {t.name}: {t.status} {facts} {t.root} {t.message}".rstrip())
    for f in report.fixes:
        opt = " (opt-in)" if f.opt_in else ""
        click.echo(f"{f.id} v{f.version}{opt}: {f.state}, {f.action}" + (f" - {_fix_detail(f)}" if _fix_detail(f) else ""))
    click.echo(_summary(report))


def _render_rich(report: Report) -> None:
    console = Console()
    title = escape(f"fixpack {report.command} — profile {report.profile}") + (" (dry run)" if report.dry_run else "")
    tt = Table(title=title, title_justify="left")
    for col in ("target", "status", "version", "commit", "pin", "root / message"):
        tt.add_column(col)
    for t in report.targets:
        style = "green" if t.status == "found" else ("dim" if t.status == "skipped" else "red")
        tt.add_row(escape(t.name), f"[{style}]{t.status}[/]", escape(t.version), escape(t.commit[:12]),
                   escape(f"{t.pin.get('version', '')} {t.pin.get('commit', '')}"),
                   escape((t.root + " " + t.message).strip()))
    console.print(tt)
    ft = Table()
    for col in ("fix", "ver", "target", "kind", "state", "action", "details"):
        ft.add_column(col, overflow="fold")
    for f in report.fixes:
        ft.add_row(escape(f.id), str(f.version), escape(f.target), "opt-in" if f.opt_in else "default",
                   f"[{STATE_STYLE.get(f.state, '')}]{f.state}[/]", f.action, escape(_fix_detail(f)))
    console.print(ft)
    console.print(("[green]" if report.ok else "[red]") + escape(_summary(report)) + "[/]")


def _summary(report: Report) -> str:
    if not report.ok:
        return f"FAILED (exit {report.exit_code}): {report.error}"
    counts: dict[str, int] = {}
    for f in report.fixes:
        key = f.action if f.action != "none" else ("already applied" if f.state == "applied" else f.state)
        counts[key] = counts.get(key, 0) + 1
    return "OK: " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "nothing to do")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fixpack")
def main() -> None:
    """Apply, check, revert and maintain the vLLM / vllm-gaudi fix pack."""


@main.command("apply")
@common
@click.argument("opt_ins", nargs=-1, metavar="[OPT-IN FIX]...")
@click.option("--dry-run", is_flag=True, help="Check everything, write nothing (the CI mode).")
@click.option("--strict", is_flag=True, help="Treat a drifted fix (offset or fingerprint change) as a mismatch.")
@click.option("--all-opt-in", is_flag=True, help="Select every opt-in fix the profile allows.")
@click.option("--reject", "reject_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              metavar="DIR", help="Write the refused hunks as git-style DIR/<path>.rej files (outside the target).")
def apply_cmd(profile: str, roots: tuple[str, ...], only_targets: tuple[str, ...], pack_root: Path | None,
              as_json: bool, opt_ins: tuple[str, ...], dry_run: bool, strict: bool, all_opt_in: bool,
              reject_dir: Path | None) -> None:
    """Apply the profile's default fixes plus the named opt-in fixes, in the pack's order."""
    req = _request(profile, roots, only_targets, pack_root, opt_ins=opt_ins, dry_run=dry_run, strict=strict,
                   all_opt_in=all_opt_in)

    def call() -> Report:
        report = engine.apply(req)
        if reject_dir is not None:
            from .rejects import write_rejects

            written = write_rejects(report, reject_dir)
            click.echo(f"fixpack: {len(written)} reject file(s) under {reject_dir}", err=True)
        return report

    _run(call, as_json, "apply", profile)


@main.command("status")
@common
@click.option("--strict", is_flag=True, help="Treat a drifted fix as a mismatch.")
def status_cmd(profile: str, roots: tuple[str, ...], only_targets: tuple[str, ...], pack_root: Path | None,
               as_json: bool, strict: bool) -> None:
    """Show what the image holds: every fix of the profile against the manifest and the files."""
    req = _request(profile, roots, only_targets, pack_root, strict=strict)
    _run(lambda: engine.status(req), as_json, "status", profile)


@main.command("revert")
@common
@click.option("--dry-run", is_flag=True, help="Check that everything would revert, write nothing.")
def revert_cmd(profile: str, roots: tuple[str, ...], only_targets: tuple[str, ...], pack_root: Path | None,
               as_json: bool, dry_run: bool) -> None:
    """Unapply every fix this tool applied, in reverse order; refuses if files changed since."""
    req = _request(profile, roots, only_targets, pack_root, dry_run=dry_run)
    _run(lambda: engine.revert(req), as_json, "revert", profile)


@main.command("lock")
@common
@click.option("--check", is_flag=True, help="Fail (exit 2) when the committed lock is stale; write nothing.")
def lock_cmd(profile: str, roots: tuple[str, ...], only_targets: tuple[str, ...], pack_root: Path | None,
             as_json: bool, check: bool) -> None:
    """Generate (or --check) profiles/<profile>.lock from clean release copies (--root NAME=PATH)."""
    req = _request(profile, roots, only_targets, pack_root)

    def call() -> Report:
        if check:
            engine.check_lock_fresh(req)
            msg = "lock is fresh"
        else:
            msg = f"wrote {engine.write_lock(req)}"
        if not as_json:
            click.echo(msg)
        return Report("lock", profile, error="" if as_json else "")

    try:
        report = call()
    except FixpackError as exc:
        _fail(exc, exc.exit_code, as_json, "lock", profile)
    if as_json:
        render(report, True)


@main.command("fetch")
@click.option("--profile", "-p", required=True, help="Profile whose targets to fetch.")
@click.option("--target", "only_targets", multiple=True, metavar="NAME", help="Only these targets (repeatable).")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Cache folder (default: $XDG_CACHE_HOME/fixpack).")
@click.option("--version", "version", default="", help="Fetch this upstream version instead of the pinned one.")
@click.option("--url", default="", help="Git URL for a git-hosted target (overrides the profile's).")
@click.option("--pack", "pack_root", type=click.Path(file_okay=False, path_type=Path), default=None)
def fetch_cmd(profile: str, only_targets: tuple[str, ...], cache: Path | None, version: str, url: str,
              pack_root: Path | None) -> None:
    """Fetch and cache clean release copies; print NAME=ROOT for each (usable as --root)."""
    from . import release
    from .loader import load_pack, load_profile

    try:
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
    except FixpackError as exc:
        _fail(exc, exc.exit_code, False, "fetch", profile)


@main.command("prove")
@click.option("--profile", "-p", required=True)
@click.option("--python", "python", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The image's interpreter (e.g. .venv/bin/python with vLLM installed).")
@click.option("--target", default="vllm", show_default=True)
@click.option("--pack", "pack_root", type=click.Path(file_okay=False, path_type=Path), default=None)
def prove_cmd(profile: str, python: str, target: str, pack_root: Path | None) -> None:
    """Run every fix's proof tests on the clean image (must fail) and the patched image (must pass)."""
    from .prove import prove

    try:
        run = prove(pack_root or default_pack_root(), profile, python, target)
    except FixpackError as exc:
        _fail(exc, exc.exit_code, False, "prove", profile)
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
    sys.exit(0 if run.ok else EXIT_CONFLICT)


@main.command("format")
@click.option("--check", is_flag=True, help="Fail (exit 2) when a patch is not in its deterministic form.")
@click.option("--pack", "pack_root", type=click.Path(file_okay=False, path_type=Path), default=None)
def format_cmd(check: bool, pack_root: Path | None) -> None:
    """Write every patch of the pack deterministically (headers from fix.toml, no churn)."""
    from .loader import load_pack
    from .pack_tools import rewrite_patches, stale_patches

    try:
        pack = load_pack(pack_root or default_pack_root())
        paths = stale_patches(pack) if check else rewrite_patches(pack)
    except FixpackError as exc:
        _fail(exc, exc.exit_code, False, "format", "")
    for p in paths:
        click.echo(f"{'stale' if check else 'rewrote'}: {p}")
    if check and paths:
        click.echo("fixpack: error: patches not in their deterministic form; run `fixpack format` and commit",
                   err=True)
        sys.exit(EXIT_BAD_INPUT)
    click.echo(f"{len(paths)} patch(es) {'stale' if check else 'rewritten'}")


@main.command("refresh")
@click.option("--profile", "-p", required=True)
@click.option("--root", "roots", multiple=True, metavar="NAME=PATH", required=True,
              help="A clean release copy of the fix's target.")
@click.option("--pack", "pack_root", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.argument("fix_ids", nargs=-1, required=True)
def refresh_cmd(profile: str, roots: tuple[str, ...], pack_root: Path | None, fix_ids: tuple[str, ...]) -> None:
    """Regenerate fixes' patches against their chain on a clean release copy (like quilt refresh)."""
    from .loader import load_pack
    from .pack_tools import refresh

    parsed = _parse_roots(roots)
    pack_root = pack_root or default_pack_root()
    try:
        fixes = load_pack(pack_root).fixes
        for fid in fix_ids:
            target = fixes[fid].target if fid in fixes else "vllm"
            if target not in parsed:
                raise BadInputError(f"{fid} targets {target}: give --root {target}=PATH (a clean release copy)")
            click.echo(f"refreshed {refresh(pack_root, profile, fid, parsed[target])}")
    except FixpackError as exc:
        _fail(exc, exc.exit_code, False, "refresh", profile)


from .cli_rebase import rebase_cmd  # noqa: E402  (its module imports this one lazily)

main.add_command(rebase_cmd)


def apply_all_main(argv: list[str] | None = None, pack_root: Path | None = None) -> None:
    """``python3 apply_all.py --profile v0.30.0 [OPT-IN FIX ...]``: the ``apply`` command.

    ``pack_root`` is the checkout the entry script lives in: the pack that goes with this engine,
    whatever the working folder ($FIXPACK_PACK or --pack still choose another).
    """
    if pack_root is not None:
        os.environ.setdefault("FIXPACK_PACK", str(pack_root))
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        args = ["--help"]
    try:
        apply_cmd.main(args=args, prog_name="apply_all.py", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
        raise SystemExit(code) from None


if __name__ == "__main__":  # pragma: no cover
    main()
