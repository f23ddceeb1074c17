"""How a message names fixpack in a command to run: the one place that renders the program's words.

The README's set-up does not put ``fixpack`` on PATH (it is ``.venv/bin/fixpack``; in an image,
``python3 fixes/apply_all.py``), so a suggested ``fixpack lock ...`` would not run as written. A
message says ``fixpack`` only when ``shutil.which("fixpack")`` is this install's script (in the running
interpreter's ``bin`` folder); else the running interpreter, absolute and shell-quoted, with
``-m fixpack.cli``, and ``PYTHONPATH=<checkout>`` before it unless the package lies in that
interpreter's site-packages (a checkout, or an image's copy of the pack, is found from another folder only
so).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _on_path() -> bool:
    """``fixpack`` on PATH is the script of the running interpreter's install (not another venv's)."""
    found = shutil.which("fixpack")
    bin_dir = Path(sys.prefix) / ("Scripts" if os.name == "nt" else "bin")
    return found is not None and _same(Path(found).parent, bin_dir)


def _package_base() -> Path:
    """The folder that holds this ``fixpack`` package (a checkout's root, or site-packages)."""
    return Path(__file__).resolve().parent.parent


def _installed(base: Path) -> bool:
    import site  # only when a command is rendered

    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    return any(_same(base, Path(d)) for d in dirs)


def program() -> str:
    """The shell words that run this fixpack, as a message puts them before a subcommand: ``fixpack``, or
    ``[PYTHONPATH=<checkout>] <python> -m fixpack.cli`` (each part quoted)."""
    if _on_path():
        return "fixpack"
    base = _package_base()
    run = f"{shlex.quote(sys.executable)} -m fixpack.cli"
    return run if _installed(base) else f"PYTHONPATH={shlex.quote(str(base))} {run}"


def run_words(targets: Iterable[str] = (), roots: Mapping[str, Path] | None = None,
              copies: Path | None = None) -> list[str]:
    """A run's ``--target`` names, ``--root NAME=PATH`` and ``--copies DIR`` as a suggested command repeats
    them (paths absolute, as given otherwise: the command runs from any folder)."""
    words = [w for t in targets for w in ("--target", t)]
    words += [w for name, root in sorted((roots or {}).items()) for w in ("--root", f"{name}={os.path.abspath(root)}")]
    return words + (["--copies", os.path.abspath(copies)] if copies is not None else [])


def pack_words(pack_root: Path) -> list[str]:
    """``--pack PACK`` (absolute) for a suggested command, unless ``pack_root`` is the pack that command
    would use without it (``$FIXPACK_PACK`` when set, else
    :func:`fixpack.cli_plain.default_pack_root`): so that it acts on the pack in use, not the checkout's."""
    from .cli_plain import default_pack_root  # only when a message names a command
    from .errors import FixpackError

    given = os.environ.get("FIXPACK_PACK")
    try:
        default = Path(given) if given else default_pack_root()
    except FixpackError:  # no pack found by itself (none there, or no working folder): the command needs --pack
        default = None
    if default is not None and _same(default, pack_root):
        return []
    return ["--pack", os.path.abspath(pack_root)]


# the subcommands that take --cache (the release copy cache: fetch's, and those that fetch what they lack)
CACHE_COMMANDS = frozenset({"check", "edit", "fetch", "lock", "new", "rebase"})
SESSION_WORDS = ("--continue", "--abort", "--undo")  # (a rebase or edit under way: it keeps the copies it started on)


def given_cache() -> str | None:
    """The running command's ``--cache DIR`` (absolute), where it was given one: from click's context, so that a
    command run in the same process after it (a test's) never inherits it; None where it was not given, or no click
    command runs (an image's lean apply never imports click)."""
    click = sys.modules.get("click")
    ctx = click.get_current_context(silent=True) if click is not None else None
    while ctx is not None:
        cache = ctx.params.get("cache")
        if cache is not None:
            return str(os.path.abspath(cache))
        ctx = ctx.parent
    return None


def command(*words: str) -> str:
    """``program()`` followed by ``words`` (a subcommand and its arguments), each quoted for a POSIX shell. A
    subcommand that takes ``--cache`` carries the running command's (:func:`given_cache`) where ``words`` give none
    and start something (not a ``--continue``, ``--abort`` or ``--undo``): it fetches into the cache the user named,
    not the default one."""
    cache = given_cache() if words and words[0] in CACHE_COMMANDS and not {"--cache", *SESSION_WORDS} & set(words) \
        else None
    return " ".join([program(), *(shlex.quote(w) for w in (*words, *(("--cache", cache) if cache else ())))])


__all__ = ["command", "pack_words", "program", "run_words"]
