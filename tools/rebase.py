#!/usr/bin/env python3
"""Maintainer entry: rebase a profile onto a new upstream release (same as ``fixpack rebase``).

    python3 tools/rebase.py --profile v0.30.0 --to 0.31.0 --target vllm
    python3 tools/rebase.py --continue | --abort

Run from any Python: when this one lacks the maintainer's libraries (unidiff, GitPython, pypi-simple,
tomlkit), it runs again in the checkout's ``.venv`` (made by ``bash tools/setup.sh --light``).
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

try:
    from fixpack.cli_rebase import rebase_cmd
except ModuleNotFoundError as exc:
    venv = ROOT / ".venv" / "bin" / "python"
    if venv.exists() and Path(sys.prefix).resolve() != (ROOT / ".venv").resolve() and not os.environ.get("FIXPACK_REEXEC"):
        os.environ["FIXPACK_REEXEC"] = "1"
        os.execv(str(venv), [str(venv), str(Path(__file__).resolve()), *sys.argv[1:]])
    print(f"tools/rebase.py: this Python ({sys.executable}) lacks {exc.name!r} and there is no {venv}: run "
          f"`bash tools/setup.sh --light` first (or pip install '.[maintainer]')", file=sys.stderr)
    sys.exit(5)  # the environment (fixpack's exit codes: 1 is only ever a bug)

if __name__ == "__main__":
    rebase_cmd(prog_name="tools/rebase.py")
