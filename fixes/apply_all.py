#!/usr/bin/env python3
"""Apply the fix pack to this image (the path the recipes document): same as ../apply_all.py."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fixpack.cli import apply_all_main

if __name__ == "__main__":
    apply_all_main(pack_root=Path(__file__).resolve().parent.parent)
