#!/usr/bin/env python3
"""Maintainer entry: rebase a profile onto a new upstream release (same as ``fixpack rebase``).

    python3 tools/rebase.py --profile v0.30.0 --to 0.31.0 --target vllm
    python3 tools/rebase.py --continue | --abort

Run from any Python: when this one lacks the maintainer's libraries (unidiff, GitPython, pypi-simple,
tomlkit), it runs again in the checkout's ``.venv`` (made by ``bash tools/setup.sh --light``).
Ctrl-C while it imports is exit 5 with one line, as for ``fixpack`` (the entry guard, fixpack.entry).
"""
import os
import sys

# os.path, not pathlib: less to import before the Ctrl-C guard (fixpack.entry) is in place
ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
sys.path.insert(0, ROOT)


def missing(exc: ModuleNotFoundError) -> None:
    """This Python lacks what the rebase needs: run again in the checkout's .venv, else say how to make it."""
    venv = os.path.join(ROOT, ".venv", "bin", "python")
    here = os.path.realpath(sys.prefix) == os.path.realpath(os.path.join(ROOT, ".venv"))
    if os.path.exists(venv) and not here and not os.environ.get("FIXPACK_REEXEC"):
        os.environ["FIXPACK_REEXEC"] = "1"
        os.execv(venv, [venv, os.path.realpath(__file__), *sys.argv[1:]])
    sys.stderr.write(f"tools/rebase.py: this Python ({sys.executable}) lacks {exc.name!r} and there is no {venv}: "
                     f"run `bash tools/setup.sh --light` first (or pip install '.[maintainer]')\n")
    raise SystemExit(5) from None  # the environment (fixpack's exit codes: 1 is only ever a bug)


def run() -> None:
    try:
        from fixpack.cli_rebase import rebase_cmd
    except ModuleNotFoundError as exc:
        missing(exc)
    rebase_cmd(prog_name="tools/rebase.py")


if __name__ == "__main__":
    try:  # Ctrl-C while the tool imports: exit 5 with one line, no traceback (fixpack.entry)
        from fixpack.entry import guarded
    except KeyboardInterrupt:
        from fixpack.entry import refuse_interrupt

        refuse_interrupt(sys.argv[1:], "rebase")
    except ModuleNotFoundError as exc:  # no fixpack beside it
        missing(exc)
    guarded(run, sys.argv[1:], "rebase")
