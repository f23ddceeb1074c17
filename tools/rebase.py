#!/usr/bin/env python3
"""Maintainer entry: rebase a profile onto a new upstream release (same as ``fixpack rebase``).

    python3 tools/rebase.py --profile v0.30.0 --to 0.31.0 --target vllm
    python3 tools/rebase.py --continue | --abort
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fixpack.cli_rebase import rebase_cmd

if __name__ == "__main__":
    rebase_cmd(prog_name="tools/rebase.py")
