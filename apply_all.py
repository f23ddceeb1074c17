#!/usr/bin/env python3
"""Apply the fix pack to this image: python3 apply_all.py --profile v0.30.0 [OPT-IN FIX ...]

Thin entry: puts this checkout on sys.path, then runs ``fixpack apply`` (see README.md): a plain command
line without loading click (fixpack.cli_fast), anything else through click.
"""
# ruff: noqa: UP031, UP036  (the version check and what it runs read as every Python reads them: % formats)
import os
import sys

# os.path, not pathlib: less to import before the Ctrl-C guard (fixpack.entry) is in place
HERE = os.path.dirname(os.path.realpath(__file__))
PACK = HERE
# the script that was run, as its usage lines name it: fixes/apply_all.py runs this one with RUN_AS its own path
SCRIPT = globals().get("RUN_AS") or os.path.abspath(sys.argv[0])


def refuse(said):  # exit 5 before fixpack can be imported: a line on stderr, or --json's failure document
    args = sys.argv[1:]
    if "--json" not in args:
        sys.stderr.write("apply_all.py: %s\n" % said)
        sys.exit(5)
    import json
    import re

    version = ""  # fixpack's, read (not imported): "" away from the checkout
    if os.path.isfile(os.path.join(PACK, "fixpack", "__init__.py")):
        with open(os.path.join(PACK, "fixpack", "__init__.py")) as init:
            found = re.search(r'^__version__ = "([^"]+)"', init.read(), re.M)
        version = found.group(1) if found else ""
    profile = ""  # as fixpack.cli_plain.argv_profile reads it, and the document its error_document writes
    for i, arg in enumerate(args):
        if arg in ("--profile", "-p") and i + 1 < len(args):
            profile = args[i + 1]
            break
        if arg.startswith("--profile="):
            profile = arg.partition("=")[2]
            break
    doc = {"command": "apply", "dry_run": "--dry-run" in args, "error": said, "exit_code": 5, "fixes": [],
           "ok": False, "profile": profile, "schema": 1, "targets": [], "tool_version": version}
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    sys.exit(5)


# before anything else, in syntax every Python reads: an older one said SyntaxError or a TypeError traceback (exit 1)
if sys.version_info < (3, 10):
    refuse("fixpack needs Python 3.10 or newer; %s is Python %d.%d: run it with the image's Python 3.10+ "
           "(python3.10 apply_all.py ...); nothing was written"
           % (sys.executable, sys.version_info[0], sys.version_info[1]))

sys.path.insert(0, PACK)


def missing(exc):  # the image lacks what apply needs: say what to install (the error document with --json)
    said = ("the Python package %r is not installed in %s: pip install unidiff click installer (and tomli on Python "
            "3.10); nothing was written" % (exc.name, sys.executable))
    if "--json" in sys.argv[1:]:
        from fixpack.cli_plain import argv_profile, emit_json, error_document

        doc = error_document("apply", argv_profile(sys.argv[1:]), said, 5, "--dry-run" in sys.argv)
        emit_json(doc, lambda text: sys.stdout.write(text + "\n"))  # (not print: Python 2 reads it as a statement)
    else:
        sys.stderr.write("apply_all.py: %s\n" % said)
    sys.exit(5)


def run():
    from pathlib import Path

    try:
        from fixpack.cli_fast import main as fast_main
    except ModuleNotFoundError as exc:
        missing(exc)
    fast_main(sys.argv[1:], {"pack_root": PACK}, "apply")  # exits when it ran the command
    try:
        from fixpack.cli import apply_all_main
    except ModuleNotFoundError as exc:
        missing(exc)
    apply_all_main(pack_root=Path(PACK), script=SCRIPT)


if __name__ == "__main__":
    if not os.path.isfile(os.path.join(PACK, "fixpack", "entry.py")):  # a copy away from its checkout
        refuse("%s holds no fixpack/ (the engine): this script runs from the fix pack's checkout; run the "
               "checkout's own apply_all.py (a symbolic link to it works); nothing was written" % PACK)
    try:  # Ctrl-C while the tool imports: exit 5 with one line, no traceback (fixpack.entry)
        from fixpack.entry import guarded
    except KeyboardInterrupt:
        from fixpack.entry import refuse_interrupt

        refuse_interrupt(sys.argv[1:], "apply")
    guarded(run, sys.argv[1:], "apply")
