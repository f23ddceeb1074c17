#!/usr/bin/env python3
"""Apply the fix pack to this image: python3 apply_all.py --profile v0.30.0 [OPT-IN FIX ...]

Thin entry: puts this checkout on sys.path, then runs ``fixpack apply`` (see README.md): a plain command
line without loading click (fixpack.cli_fast), anything else through click.
"""
import os
import sys

# os.path, not pathlib: less to import before the Ctrl-C guard (fixpack.entry) is in place
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))


def missing(exc: ModuleNotFoundError) -> None:  # the image lacks what apply needs: say what to install
    sys.stderr.write(f"apply_all.py: the Python package {exc.name!r} is not installed in {sys.executable}: "
                     f"pip install unidiff click (and tomli on Python 3.10); nothing was written\n")
    raise SystemExit(5) from None


def run() -> None:
    from pathlib import Path

    try:
        from fixpack.cli_fast import main as fast_main
    except ModuleNotFoundError as exc:
        missing(exc)
    pack = Path(__file__).resolve().parent
    fast_main(sys.argv[1:], {"pack_root": str(pack)}, "apply")  # exits when it ran the command
    try:
        from fixpack.cli import apply_all_main
    except ModuleNotFoundError as exc:
        missing(exc)
    apply_all_main(pack_root=pack)


if __name__ == "__main__":
    try:  # Ctrl-C while the tool imports: exit 5 with one line, no traceback (fixpack.entry)
        from fixpack.entry import guarded
    except KeyboardInterrupt:
        from fixpack.entry import refuse_interrupt

        refuse_interrupt(sys.argv[1:], "apply")
    guarded(run, sys.argv[1:], "apply")
