"""``fixpack sbom`` and ``fixpack verify``: a CycloneDX SBOM of an image, and an image checked against
one (loaded on first use, with cyclonedx-python-lib; see :mod:`fixpack.sbom`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from .cli_common import common, outcome, pack_option, parse_roots
from .cli_plain import default_pack_root, deliver, envelope, exit_code


def _req(profile: str, roots: tuple[str, ...], only_targets: tuple[str, ...], pack_root: Path | None,
         copies_root: Path | None, lock_wait: float) -> Any:
    from .run import Request

    return Request(pack_root=pack_root or default_pack_root(), profile=profile, roots=parse_roots(roots),
                   only_targets=tuple(only_targets), env_root=copies_root, lock_wait=lock_wait)


@click.command("sbom", short_help="Write a CycloneDX SBOM of the image as it is.", epilog="""\b
Examples:
  fixpack sbom --profile v0.30.0 --target vllm --root vllm=/opt/venv/lib/python3.11/site-packages
  fixpack sbom --profile v0.30.0 --target vllm --out /opt/muse-fixpack/sbom.cdx.json""")
@common
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="Write the SBOM to FILE (default: print it).")
def sbom_cmd(profile: str, roots: tuple[str, ...], only_targets: tuple[str, ...], pack_root: Path | None,
             copies_root: Path | None, lock_wait: float, as_json: bool, out: Path | None) -> None:
    """Write a CycloneDX 1.6 SBOM of the image as it is: targets, applied fixes, installed components."""
    with outcome(as_json, "sbom", profile):
        from .sbom import sbom

        result = sbom(_req(profile, roots, only_targets, pack_root, copies_root, lock_wait), out)
    if out is None:  # a reader that left keeps the exit code; a full stdout is exit 5 (deliver)
        sys.exit(deliver(lambda: click.echo(result.text, nl=False), exit_code(result), "the SBOM"))
    click.echo(f"fixpack: SBOM {'written to' if result.written else 'unchanged in'} {out}", err=True)
    sys.exit(exit_code(result))


@click.command("verify", short_help="Check the image against an SBOM (exit 3 if not).", epilog="""\b
Examples:
  fixpack verify --sbom /opt/muse-fixpack/sbom.cdx.json --target vllm
  fixpack verify --sbom sbom.cdx.json --target vllm --root vllm=/opt/venv/lib/python3.11/site-packages --json""")
@click.option("--sbom", "sbom_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              metavar="FILE", help="The CycloneDX SBOM to check the image against.")
@click.option("--profile", "-p", default=None, help="Profile name (default: the one the SBOM names).")
@click.option("--root", "roots", multiple=True, metavar="NAME=PATH", help="Where a target lives (repeatable).")
@click.option("--target", "only_targets", multiple=True, metavar="NAME", help="Restrict the check to these targets.")
@pack_option
@click.option("--copies", "copies_root", type=click.Path(file_okay=False, path_type=Path), default=None,
              envvar="GAUDI_FIXES_ROOT", metavar="DIR", help="A folder of release copies, one sub-folder per target.")
@click.option("--lock-wait", "lock_wait", type=float, default=10.0, envvar="FIXPACK_LOCK_WAIT", metavar="SECONDS",
              help="How long to wait for another run's lock on a target before giving up (exit 5).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def verify_cmd(sbom_path: Path, profile: str | None, roots: tuple[str, ...], only_targets: tuple[str, ...],
               pack_root: Path | None, copies_root: Path | None, lock_wait: float, as_json: bool) -> None:
    """Check the image against an SBOM; exit 3 naming each difference."""
    with outcome(as_json, "verify", profile or ""):
        from .errors import BadInputError
        from .sbom import load_sbom, profile_of, verify

        doc = load_sbom(sbom_path)
        name = profile or profile_of(doc)
        if not name:
            raise BadInputError(f"{sbom_path} names no fixpack profile; give --profile")
        result = verify(_req(name, roots, only_targets, pack_root, copies_root, lock_wait), sbom_path, doc)
    code = exit_code(result)

    def say() -> None:
        if as_json:
            click.echo(json.dumps(envelope("verify", name, code, "" if code == 0 else "the image differs from the SBOM",
                                           sbom=str(sbom_path), checked=result.checked,
                                           differences=result.differences), indent=2))
            return
        for d in result.differences:
            click.echo(f"DIFFERS {d}")
        click.echo(f"{'FAILED' if result.differences else 'OK'}: {result.checked} facts of {sbom_path} checked, "
                   f"{len(result.differences)} difference(s)")

    sys.exit(deliver(say, code))
