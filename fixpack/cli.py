"""The terminal front: parse with click, call one engine function, print the result, exit with the code
of its outcome (:func:`fixpack.cli_common.exit_code`, the only place codes are decided).

``apply``, ``status`` and ``revert`` (all an image needs, also through ``apply_all.py``) live here and
import only the engine. The maintainer's commands load on first use from :mod:`fixpack.cli_maint` and
:mod:`fixpack.cli_rebase`, with the libraries only they need (GitPython, pypi-simple, tomlkit).
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # `python -m fixpack.cli ...`: Ctrl-C while it imports is exit 5 (fixpack.entry)
    try:
        from fixpack.entry import guarded
    except KeyboardInterrupt:
        from fixpack.entry import refuse_interrupt

        refuse_interrupt(sys.argv[1:])

    def _main() -> None:
        from fixpack.cli_fast import main as fast_main

        fast_main()  # apply|status|revert with plain options: no click needed (exits when it ran the command)
        from fixpack.cli import main as click_main  # the module proper (this one stops here)
        from fixpack.progname import program

        click_main(prog_name=program())  # its usage lines and "Try ... --help" as they run here, not `python -m`

    guarded(_main, sys.argv[1:])

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from . import __version__
from .cli_common import (
    JsonCommand,
    JsonUsageErrors,
    color_option,
    common,
    complete_fixes,
    option,
    outcome,
    parse_roots,
)
from .cli_fast import main as fast_main
from .cli_plain import default_pack_root, deliver, exit_code
from .cli_render import render

if TYPE_CHECKING:  # the engine is imported when a command runs
    from .engine import Request

MAINTAINER_COMMANDS = {
    "lock": "fixpack.cli_maint:lock_cmd",
    "fetch": "fixpack.cli_maint:fetch_cmd",
    "prove": "fixpack.cli_maint:prove_cmd",
    "format": "fixpack.cli_maint:format_cmd",
    "refresh": "fixpack.cli_maint:refresh_cmd",
    "check": "fixpack.cli_maint:check_cmd",
    "rebase": "fixpack.cli_rebase:rebase_cmd",
    "edit": "fixpack.cli_author:edit_cmd",
    "new": "fixpack.cli_author:new_cmd",
    "import": "fixpack.cli_author:import_cmd",
    "export": "fixpack.cli_author:export_cmd",
    "sbom": "fixpack.cli_sbom:sbom_cmd",
    "verify": "fixpack.cli_sbom:verify_cmd",
}


class LazyGroup(JsonUsageErrors, click.Group):
    """A group whose maintainer commands are imported only when named (or listed by --help)."""

    def command_name(self, argv: list[str]) -> str:
        names = set(self.list_commands(click.Context(self)))
        return next((a for a in argv if a in names), "")

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *MAINTAINER_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in MAINTAINER_COMMANDS:
            module, _sep, attr = MAINTAINER_COMMANDS[cmd_name].partition(":")
            cmd: click.Command = getattr(importlib.import_module(module), attr)
            return cmd
        return super().get_command(ctx, cmd_name)


def _request(profile: str, roots: tuple[str, ...], only_targets: tuple[str, ...], pack_root: Path | None,
             copies_root: Path | None, lock_wait: float, **kw: Any) -> Request:
    from .cli_progress import CliProgress
    from .engine import Request

    return Request(pack_root=pack_root or default_pack_root(), profile=profile, roots=parse_roots(roots),
                   only_targets=tuple(only_targets), env_root=copies_root, lock_wait=lock_wait,
                   progress=CliProgress(), **kw)


def _run(call: Callable[[], Any], as_json: bool, command: str, profile: str, dry_run: bool = False) -> None:
    with outcome(as_json, command, profile, dry_run):
        report = call()
    sys.exit(deliver(lambda: render(report, as_json), exit_code(report)))


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog="""\b
Examples (on a machine without vllm-gaudi, every command takes --target vllm):
  fixpack apply  --profile v0.30.0 --target vllm --root vllm=/tmp/vllm-0.30.0 topk-subset-sampler
  fixpack status --profile v0.30.0 --target vllm --root vllm=/tmp/vllm-0.30.0 --json
\b
Shell completion (profile names, fix ids, options):
  eval "$(_FIXPACK_COMPLETE=bash_source fixpack)"     # bash; zsh_source / fish_source for zsh / fish""")
@click.version_option(__version__, prog_name="fixpack")
@color_option
def main() -> None:
    """Apply, check, revert and maintain the vLLM / vllm-gaudi fix pack.

    Every command takes --json (one document on stdout, schemas/<kind>.schema.json) and --help.
    """


@main.command("apply", cls=JsonCommand, short_help="Apply the profile's fixes (plus named opt-ins).", epilog="""\b
Examples:
  fixpack apply --profile v0.30.0 --target vllm --root vllm=/tmp/vllm-0.30.0 --dry-run
  fixpack apply --profile v0.30.0 --target vllm topk-subset-sampler vllm-long-prefill-share
  python3 apply_all.py --profile v0.30.0 --all-opt-in        # in an image: vLLM of that Python""")
@common
@click.argument("opt_ins", nargs=-1, metavar="[OPT-IN FIX]...", shell_complete=complete_fixes)
@option("dry_run", help="Check everything, write nothing (the CI mode).")
@option("strict", help="Treat a drifted fix (offset or fingerprint change) as a mismatch.")
@option("all_opt_in", help="Select every opt-in fix the profile allows.")
@click.option("--reject", "reject_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              metavar="DIR", help="Write the refused hunks as git-style DIR/<path>.rej files (outside the target).")
@click.option("--sbom", "sbom_out", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="After a successful apply, write the image's CycloneDX SBOM to FILE (needs cyclonedx-python-lib).")
def apply_cmd(profile: str, roots: tuple[str, ...], only_targets: tuple[str, ...], pack_root: Path | None,
              copies_root: Path | None, lock_wait: float, as_json: bool, opt_ins: tuple[str, ...], dry_run: bool,
              strict: bool, all_opt_in: bool, reject_dir: Path | None, sbom_out: Path | None) -> None:
    """Apply the profile's default fixes plus the named opt-in fixes and components, in the pack's order."""

    def call() -> Any:
        from . import engine

        req = _request(profile, roots, only_targets, pack_root, copies_root, lock_wait, opt_ins=opt_ins,
                       dry_run=dry_run, strict=strict, all_opt_in=all_opt_in, rejects=reject_dir)
        if reject_dir is not None or sbom_out is not None:  # before anything is written
            from .outputs import check_outputs

            check_outputs(req, reject_dir, sbom_out)
        report = engine.apply(req)
        if reject_dir is not None:
            from .rejects import RejectsNotWritten, write_rejects

            try:
                written = write_rejects(report, reject_dir)
            except RejectsNotWritten as exc:  # the run's report, with the .rej files written before it
                report.rejects = [str(p) for p in exc.written]
                report.failure, report.error = exc.exit_code, str(exc)
                return report
            report.rejects = [str(p) for p in written]
            if written:  # the refusal says them: nothing was written in the target
                report.elsewhere = f"{len(written)} reject file(s) under {reject_dir}"
                report.close()
            click.echo(f"fixpack: {len(written)} reject file(s) under {reject_dir}" if written else
                       f"fixpack: no hunk was refused: no reject file (nothing written under {reject_dir})", err=True)
        if sbom_out is not None and report.ok and not dry_run:
            from .errors import EnvironmentProblem
            from .sbom import sbom

            try:
                done = sbom(req, sbom_out, "--sbom")
            except EnvironmentProblem as exc:  # the apply is done: its report, and why the SBOM is not there
                report.failure, report.error = exc.exit_code, str(exc)
                return report
            click.echo(f"fixpack: SBOM {'written to' if done.written else 'unchanged in'} {sbom_out}", err=True)
        elif sbom_out is not None:  # (it said nothing of the SBOM it did not write)
            why = "a dry run applies nothing" if dry_run else "the apply did not succeed"
            click.echo(f"fixpack: no SBOM written to {sbom_out}: {why}", err=True)
        return report

    _run(call, as_json, "apply", profile, dry_run)


@main.command("status", short_help="Show what the image holds and what apply would do.", epilog="""\b
Examples:
  fixpack status --profile v0.30.0 --target vllm --root vllm=/tmp/vllm-0.30.0
  fixpack status --profile v0.30.0 --target vllm --root vllm=/tmp/vllm-0.30.0 topk-subset-sampler""")
@common
@click.argument("opt_ins", nargs=-1, metavar="[OPT-IN FIX]...", shell_complete=complete_fixes)
@option("strict", help="Treat a drifted fix as a mismatch.")
@option("all_opt_in", help="Select every opt-in fix the profile allows.")
def status_cmd(profile: str, roots: tuple[str, ...], only_targets: tuple[str, ...], pack_root: Path | None,
               copies_root: Path | None, lock_wait: float, as_json: bool, opt_ins: tuple[str, ...], strict: bool,
               all_opt_in: bool) -> None:
    """Show what the image holds and what `apply` with the same arguments would do (states, actions,
    exit code); the profile's opt-ins that are not named are listed as skipped."""

    def call() -> Any:
        from . import engine

        return engine.status(_request(profile, roots, only_targets, pack_root, copies_root, lock_wait,
                                      opt_ins=opt_ins, strict=strict, all_opt_in=all_opt_in))

    _run(call, as_json, "status", profile, dry_run=True)


@main.command("revert", short_help="Unapply every fix, in reverse order.", context_settings={"allow_extra_args": True},
              epilog="""\b
Example:
  fixpack revert --profile v0.30.0 --target vllm --root vllm=/tmp/vllm-0.30.0 --dry-run""")
@common
@option("dry_run", help="Check that everything would revert, write nothing.")
def revert_cmd(profile: str, roots: tuple[str, ...], only_targets: tuple[str, ...], pack_root: Path | None,
               copies_root: Path | None, lock_wait: float, as_json: bool, dry_run: bool) -> None:
    """Unapply every fix this tool applied, in reverse order; refuses if files changed since."""
    names = click.get_current_context().args
    if names:  # (click said only "Got unexpected extra argument")
        raise click.UsageError(f"revert takes no fix names ({' '.join(names)}): it takes out every fix the image's "
                               f"manifest records. To drop one opt-in fix, revert, then apply without it")

    def call() -> Any:
        from . import engine

        return engine.revert(_request(profile, roots, only_targets, pack_root, copies_root, lock_wait,
                                      dry_run=dry_run))

    _run(call, as_json, "revert", profile, dry_run)


def _apply_all_words(argv: list[str] | None, script: str | None) -> str:
    """How the running ``apply_all.py`` is called again, for click's usage and "Try ... --help" lines: this
    interpreter and the path of the script that was run (``script``: ``fixes/apply_all.py`` when that one ran the
    checkout's; ``apply_all.py`` alone ran nothing); ``apply_all.py`` when called in-process."""
    import os
    import shlex

    if argv is not None:
        return "apply_all.py"
    if script is None:
        if not sys.argv[0].endswith("apply_all.py"):
            return "apply_all.py"
        script = os.path.abspath(sys.argv[0])
    return f"{shlex.quote(sys.executable)} {shlex.quote(script)}"


def apply_all_main(argv: list[str] | None = None, pack_root: Path | None = None, script: str | None = None) -> None:
    """``python3 apply_all.py --profile v0.30.0 [OPT-IN FIX ...]``: the ``apply`` command.

    ``pack_root`` is the checkout the entry script lives in: the pack that goes with this engine,
    whatever the working folder ($FIXPACK_PACK or --pack still choose another). ``script``: the path of the entry
    script that was run (its usage lines name it).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        args = ["--help"]
    defaults = {"pack_root": str(pack_root)} if pack_root is not None else None
    fast_main(args, defaults, "apply")  # a plain command line runs without click (and exits)
    try:
        apply_cmd.main(args=args, prog_name=_apply_all_words(argv, script), standalone_mode=True, default_map=defaults)
    except SystemExit as exc:
        raise SystemExit(exc.code if isinstance(exc.code, int) else 2) from None

