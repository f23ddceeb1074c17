#!/usr/bin/env python3
"""Apply the fix pack to this image (the path the recipes document): runs ../apply_all.py, the one entry."""
# ruff: noqa: UP031  (read as every Python reads it: ../apply_all.py says which Python it needs)
import os
import runpy
import sys

TOP = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "apply_all.py")
if __name__ == "__main__":
    if not os.path.isfile(TOP):  # a copy away from its checkout
        sys.stderr.write("apply_all.py: %s is not there: this script runs from the fix pack's checkout; run the "
                         "checkout's own fixes/apply_all.py (a symbolic link to it works); nothing was written\n" % TOP)
        sys.exit(5)
    sys.argv[0] = TOP
    runpy.run_path(TOP, run_name="__main__")
