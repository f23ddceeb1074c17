"""The values of a profile's ``[targets.<name>]`` table that pin the target and say where its files are,
checked when the profile loads: ``version`` (the pin's release), ``commit`` (the pin's git commit), ``package``
(the import package, a folder under the root: every patch path starts with it) and ``version_module`` (the file
under the root the found version is read from, which the pin is checked against). A bad one is named at its line
of the profile."""

from __future__ import annotations

import re
from typing import Any

from .safepath import path_problem


def target_problems(table: dict[str, Any]) -> list[tuple[str, str]]:
    """(key, what is wrong) for a target table's ``version``, ``commit``, ``package``, ``version_module``, and a PyPI
    ``source`` without a ``version`` (fetch asked the index for an sdist of no version: "no sdist on the index")."""
    out = []
    commit = table.get("commit")
    if isinstance(commit, str) and commit and not re.fullmatch(r"[0-9a-f]{7,40}", commit):
        out.append(("commit", "not 7-40 lower-case hex digits (git's commit id, or its start)"))
    version = table.get("version")
    if isinstance(version, str) and version and not re.fullmatch(r"[0-9A-Za-z][0-9A-Za-z.+!_-]*", version):
        out.append(("version", f"{ascii(version)} is not a release version as the target's version module gives it "
                               f"(e.g. 0.30.0): no space, quote or control character"))
    package = table.get("package")
    if isinstance(package, str) and package and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", package):
        out.append(("package", "not an import package's name (a folder under the root, e.g. vllm)"))
    source = table.get("source")
    if isinstance(source, dict) and source.get("pypi") and not (isinstance(table.get("version"), str) and
                                                               table.get("version")):
        out.append(("source", "a PyPI source needs the target's 'version' (the release whose sdist fetch, lock and "
                              "edit take): add version = \"X.Y.Z\""))
    module = table.get("version_module", "")
    if not isinstance(module, str):
        out.append(("version_module", "not a string: a path under the target's root, e.g. vllm/_version.py"))
    elif module and (why := path_problem(module)):
        out.append(("version_module", f"{why}: it must be a relative path inside the target's root, e.g. "
                                      f"{package if isinstance(package, str) and package else 'vllm'}/_version.py"))
    return out
