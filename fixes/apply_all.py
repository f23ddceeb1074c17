#!/usr/bin/env python3
"""Apply the fix pack to this image (the path the recipes document): runs ../apply_all.py, the one entry."""
# ruff: noqa: UP031  (read as every Python reads it: ../apply_all.py says which Python it needs)
import os
import runpy
import sys

TOP = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "apply_all.py")
if __name__ == "__main__":
    if not os.path.isfile(TOP):  # a copy away from its checkout: a line on stderr, or --json's failure document
        said = ("%s is not there: this script runs from the fix pack's checkout; run the checkout's own "
                "fixes/apply_all.py (a symbolic link to it works); nothing was written" % TOP)
        if "--json" not in sys.argv[1:]:
            sys.stderr.write("apply_all.py: %s\n" % said)
            sys.exit(5)
        import json

        words, profile = sys.argv[1:], ""  # read as fixpack.cli_plain.argv_profile reads it
        for at, word in enumerate(words):
            if word in ("--profile", "-p") or word.startswith("--profile="):
                profile = word.partition("=")[2] if "=" in word else words[at + 1] if at + 1 < len(words) else ""
                break
        sys.stdout.write(json.dumps({"command": "apply", "dry_run": "--dry-run" in words, "error": said, "exit_code": 5,
                                     "fixes": [], "ok": False, "profile": profile, "schema": 1, "targets": [],
                                     "tool_version": ""}, indent=2, sort_keys=True) + "\n")
        sys.exit(5)
    # runpy makes sys.argv[0] ../apply_all.py; its usage and "Try ... --help" lines name this script, the one run
    runpy.run_path(TOP, init_globals={"RUN_AS": os.path.abspath(sys.argv[0])}, run_name="__main__")
