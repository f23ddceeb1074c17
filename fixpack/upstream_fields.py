"""The values of a ``fix.toml``'s ``[upstream]`` table that other steps read, checked when the pack loads:
``fixed_in`` (a release version: a rebase compares it with the release it lands on), ``last_update`` (a
date: the patch's ``Last-Update`` field) and ``link`` (the upstream pull request or commit: the patch's
``Forwarded`` and ``Upstream-Status`` fields). A bad one is named at its line of fix.toml, not when a
later rebase trips on it."""

from __future__ import annotations

import re
from typing import Any


def upstream_problems(value: dict[str, Any]) -> list[tuple[str, str]]:
    """What is wrong with ``[upstream]``'s fixed_in (a release version, PEP 440), last_update (a date,
    YYYY-MM-DD) and link (an http(s) URL): a later rebase or the patch header reads them."""
    import datetime
    from urllib.parse import urlsplit

    out = []
    fixed_in, date, link = (value.get(k) for k in ("fixed_in", "last_update", "link"))
    if isinstance(fixed_in, str) and fixed_in and not _is_version(fixed_in.removeprefix("v")):
        out.append(("fixed_in", "not a release version (PEP 440, as 0.31.0): name the first release that has the fix"))
    if isinstance(date, str) and date:
        try:
            ok = bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}", date)) and bool(datetime.date.fromisoformat(date))
        except ValueError:
            ok = False
        if not ok:
            out.append(("last_update", "not a date: write it as YYYY-MM-DD (ISO 8601)"))
    if isinstance(link, str) and link:
        parts = urlsplit(link) if not re.search(r"[\s<>\"']", link) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            out.append(("link", "not a URL: give the upstream pull request or commit as an http(s) address"))
    return out


def _is_version(text: str) -> bool:
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:  # an image without the maintainer's libraries: PEP 440's public form
        return bool(re.fullmatch(r"(\d+!)?\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?(\+[a-z0-9.]+)?", text))
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True

