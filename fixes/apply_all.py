#!/usr/bin/env python3
"""Apply the fix pack to this image (the path the recipes document): same as ../apply_all.py."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

try:
    from fixpack.cli import apply_all_main
except ModuleNotFoundError as exc:  # the image lacks what apply needs: say what to install, not a traceback
    sys.stderr.write(f"apply_all.py: the Python package {exc.name!r} is not installed in {sys.executable}: "
                     f"pip install unidiff click (and tomli on Python 3.10); nothing was written\n")
    raise SystemExit(5) from None

if __name__ == "__main__":
    apply_all_main(pack_root=Path(__file__).resolve().parent.parent)
