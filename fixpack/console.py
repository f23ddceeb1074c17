"""The ``fixpack`` console script (setup.cfg): ``apply``, ``status`` and ``revert`` with a plain command line
run without loading click (:mod:`fixpack.cli_fast`); anything else goes to the click front (:mod:`fixpack.cli`),
which parses the same command line as always. Ctrl-C while it imports is exit 5 (:mod:`fixpack.entry`)."""

from __future__ import annotations

import sys


def _run() -> None:
    from .cli_fast import main as fast_main

    fast_main()  # exits when it ran the command
    from .cli import main as click_main

    click_main()


def main() -> None:
    try:
        from .entry import guarded
    except KeyboardInterrupt:
        from .entry import refuse_interrupt

        refuse_interrupt(sys.argv[1:])
    guarded(_run, sys.argv[1:])
