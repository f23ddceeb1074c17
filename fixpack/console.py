"""The ``fixpack`` console script (setup.cfg): ``apply``, ``status`` and ``revert`` with a plain command line
run without loading click (:mod:`fixpack.cli_fast`); anything else goes to the click front (:mod:`fixpack.cli`),
which parses the same command line as always."""

from __future__ import annotations


def main() -> None:
    from .cli_fast import main as fast_main

    fast_main()  # exits when it ran the command
    from .cli import main as click_main

    click_main()
