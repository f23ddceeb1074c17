#!/usr/bin/env python3
"""Benchmark: ``fixpack rebase`` of a profile onto a new vLLM release, against ``quilt push -a`` with
refresh of the same series on the same tree, in the same run.

Both sides start from the same inputs: the profile's fixes (defaults and opt-ins, in series order, the
patches the old profile uses) and the new release copy (fetched once into the cache; the fetch is not
timed, a cached lookup is).

- ``fixpack rebase (engine)``: :func:`fixpack.rebase.start` in this process, on a fresh git copy of the
  pack's ``fixes/`` and ``profiles/``: evaluate every fix on the new release, 3-way merges through git
  where the applier cannot place a hunk, regenerate the patches, write the variants, the new profile, its
  lock (which applies the whole chain again) and the Markdown / JSON report.
- ``fixpack rebase (CLI)``: the same through ``tools/rebase.py`` in a new interpreter.
- ``quilt push -a``: the series pushed onto a copy of the new release tree (no refresh).
- ``quilt push + refresh``: each patch pushed, then ``quilt refresh``-ed (regenerated with the new line
  numbers), one by one: quilt's way to carry a series onto a new release.

quilt applies with fuzz (up to 2 context lines ignored) where fixpack requires exact context and falls
back to a 3-way merge; the counts are printed next to the times. Tree copies hard-link the release files
and copy the files the series touches (copy time excluded).

Usage: PYTHONPATH=. python3 tools/bench_rebase.py [--profile v0.30.0] [--to 0.31.0] [--cache DIR]
       [--old-root PATH] [--pack DIR] [--repeat N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from fixpack import rebase, release  # noqa: E402
from fixpack.loader import load_pack, load_profile  # noqa: E402

GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@invalid", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "bench@invalid", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
QUILT_ENV = {"QUILT_PATCHES": "patches", "QUILT_PC": ".pc",
             "QUILT_REFRESH_ARGS": "-p ab --no-timestamps --no-index", "QUILT_PUSH_ARGS": "", "LC_ALL": "C"}


def sh(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, ok: tuple[int, ...] = (0,)) -> str:
    r = subprocess.run(cmd, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True)
    if r.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd)} in {cwd} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r.stdout + r.stderr


def series_patches(pack_root: Path, profile: str, target: str) -> list[tuple[str, Path]]:
    """(fix id, patch file) of the profile's fixes for ``target``, in series order, as the profile uses them."""
    pack = load_pack(pack_root)
    prof = load_profile(pack, profile)
    view = pack.for_profile(profile)
    return [(f.id, p.path) for f in view.ordered(prof.default + prof.opt_in) if f.target == target
            for p in f.patches]


def touched(patches: list[tuple[str, Path]]) -> set[str]:
    out = set()
    for _fid, path in patches:
        out |= set(re.findall(r"^diff --git a/(\S+) b/", path.read_text("utf-8"), re.M))
    return out


def copy_tree(src: Path, dest: Path, touched_paths: set[str]) -> None:
    """Hard-link every file, then copy the touched ones so no tool can write through to the cache."""
    subprocess.run(["cp", "-al", str(src), str(dest)], check=True)
    for rel in touched_paths:
        f = dest / rel
        if f.is_file():
            data = f.read_bytes()
            f.unlink()
            f.write_bytes(data)


def copy_pack(pack_root: Path, dest: Path) -> None:
    dest.mkdir(parents=True)
    for name in ("fixes", "profiles"):
        shutil.copytree(pack_root / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    (dest / ".gitignore").write_text("/reports/\n/.rebase/\n")
    sh(["git", "init", "-q", "-b", "main"], dest, GIT_ENV)
    sh(["git", "add", "-A"], dest, GIT_ENV)
    sh(["git", "commit", "-qm", "pack"], dest, GIT_ENV)


def quilt_setup(tree: Path, patches: list[tuple[str, Path]]) -> None:
    (tree / "patches").mkdir()
    names = []
    for fid, path in patches:
        name = f"{fid}--{path.name}"
        shutil.copyfile(path, tree / "patches" / name)
        names.append(name)
    (tree / "patches" / "series").write_text("".join(n + "\n" for n in names))


def quilt(tree: Path, *args: str, ok: tuple[int, ...] = (0,)) -> str:
    return sh(["quilt", "--quiltrc", "/dev/null", *args], tree, QUILT_ENV, ok)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def fuzz_notes(out: str) -> dict[str, int]:
    return {"offset": len(re.findall(r"succeeded at \d+ \(offset", out)),
            "fuzz": len(re.findall(r"with fuzz \d", out)), "failed": len(re.findall(r"FAILED", out))}


def ensure_quilt() -> None:
    if shutil.which("quilt"):
        return
    print("quilt is not installed; installing it with apt-get", file=sys.stderr)
    subprocess.run(["apt-get", "install", "-y", "-q", "quilt"], check=True, capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="v0.30.0")
    ap.add_argument("--to", default="0.31.0")
    ap.add_argument("--target", default="vllm")
    ap.add_argument("--cache", type=Path, default=None, help="release copy cache (default $XDG_CACHE_HOME/fixpack)")
    ap.add_argument("--old-root", type=Path, default=None, help="the old release copy (default: fetched, cached)")
    ap.add_argument("--pack", type=Path, default=REPO, help="the pack to rebase (default: this checkout)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    ensure_quilt()

    pack_root = args.pack.resolve()
    prof = load_profile(load_pack(pack_root), args.profile)
    spec = prof.target(args.target)
    old_root = args.old_root.resolve() if args.old_root else release.fetch(spec, args.cache).root
    new_root = release.fetch(spec, args.cache, version=args.to, check=False).root  # cached after the first run
    patches = series_patches(pack_root, args.profile, args.target)
    if not patches:
        raise SystemExit(f"profile {args.profile} lists no fixes for {args.target}: nothing to benchmark")
    paths = touched(patches)
    print(f"profile {args.profile}: {len(patches)} patches over {len(paths)} files; onto {spec.name} {args.to} "
          f"({new_root}); base {old_root}")

    times: dict[str, list[float]] = {"fixpack rebase (engine)": [], "fixpack rebase (CLI)": [],
                                     "quilt push -a": [], "quilt push + refresh": []}
    notes: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="bench-rebase-") as tmp:
        base = Path(tmp)
        for i in range(args.repeat):
            pack = base / f"pack-{i}"
            copy_pack(pack_root, pack)
            req = rebase.RebaseRequest(pack_root=pack, profile=args.profile, to_version=args.to, cache=args.cache,
                                       old_roots={spec.name: old_root}, only_targets=(spec.name,), replace=True)
            dt, result = timed(lambda: rebase.start(req))
            times["fixpack rebase (engine)"].append(dt)
            counts: dict[str, int] = {}
            for o in result.fixes:
                counts[o.outcome] = counts.get(o.outcome, 0) + 1
            notes["fixpack rebase (engine)"] = f"{result.status}: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))

            pack_cli = base / f"pack-cli-{i}"
            copy_pack(pack_root, pack_cli)
            cli = [sys.executable, str(REPO / "tools/rebase.py"), "--pack", str(pack_cli), "--profile", args.profile,
                   "--to", args.to, "--target", spec.name, "--old-root", f"{spec.name}={old_root}", "--replace"]
            cli += ["--cache", str(args.cache)] if args.cache else []
            dt, _ = timed(lambda: sh(cli, base, ok=(0, 4)))
            times["fixpack rebase (CLI)"].append(dt)
            notes["fixpack rebase (CLI)"] = "same, plus interpreter start and imports"

            tree = base / f"quilt-a-{i}"
            copy_tree(new_root, tree, paths)
            quilt_setup(tree, patches)
            dt, out = timed(lambda: quilt(tree, "push", "-a", ok=(0, 1)))
            times["quilt push -a"].append(dt)
            notes["quilt push -a"] = ", ".join(f"{k} {v}" for k, v in fuzz_notes(out).items()) + " hunks"

            tree = base / f"quilt-r-{i}"
            copy_tree(new_root, tree, paths)
            quilt_setup(tree, patches)

            def push_refresh(tree: Path = tree) -> str:
                log = []
                for _ in patches:
                    out = quilt(tree, "push", ok=(0, 1))
                    log.append(out)
                    if "FAILED" in out or "does not apply" in out:
                        break
                    log.append(quilt(tree, "refresh"))
                return "".join(log)
            dt, out = timed(push_refresh)
            times["quilt push + refresh"].append(dt)
            applied = len(re.findall(r"^Refreshed patch", out, re.M))
            notes["quilt push + refresh"] = (f"{applied}/{len(patches)} refreshed; "
                                             + ", ".join(f"{k} {v}" for k, v in fuzz_notes(out).items()) + " hunks")
            for p in (pack, pack_cli, base / f"quilt-a-{i}", tree):
                shutil.rmtree(p, ignore_errors=True)

    print(f"\n{'tool':28} {'median s':>9} {'min s':>8} {'max s':>8}  outcome (repeat {args.repeat})")
    rows = []
    for name, ts in times.items():
        med, lo, hi = statistics.median(ts), min(ts), max(ts)
        print(f"{name:28} {med:9.3f} {lo:8.3f} {hi:8.3f}  {notes.get(name, '')}")
        rows.append({"tool": name, "median_s": med, "min_s": lo, "max_s": hi, "runs": ts, "note": notes.get(name, "")})
    if args.json:
        args.json.write_text(json.dumps({"profile": args.profile, "to": args.to, "patches": len(patches),
                                         "files": len(paths), "python": platform.python_version(),
                                         "quilt": sh(["quilt", "--version"], REPO).strip(), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
