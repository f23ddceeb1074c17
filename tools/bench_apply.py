#!/usr/bin/env python3
"""Benchmark: fixpack's apply/status against GNU patch, git apply and quilt, on the same series and tree.

Workloads (generated in a temporary folder, never in the repository):

- ``vllm20``: 20 synthetic but realistic patches (1-3 hunks each, made with ``git diff``) on 20 real
  ``.py`` files of the vLLM v0.30.0 release tree, as a throwaway pack pinned to 0.30.0 / ced6857a.
- ``synthetic500``: 500 patches over a generated tree of 200 files x 400 lines; each patch touches
  1-3 files and many files are changed by several patches in sequence (quilt-style stacking, some
  later patches editing lines an earlier one changed).

Every tool runs on a fresh copy of the tree per repetition (copy time excluded). A copy hard-links
the files no patch touches and copies the touched ones, so no tool can write through to the base
tree (a full copy would cost more to delete than the runs take on a discard-mounted disk; use
``--copy-mode full`` for real copies). Every result is checked: the engine's touched files against
the generated post-images, and each tool's whole tree against the engine's (bytes and modes).

Besides the engine in-process, every workload is also run as a whole process, the way an image build
runs it: ``python3 apply_all.py --profile ... --pack ... --root ...`` (interpreter start and imports
included, a fresh process per run, like the other tools) and ``python3 -m fixpack.cli status`` after it,
with the peak RSS of each process. With the vllm20 workload the real profile v0.30.0 (both opt-ins) is also
measured on a copy of the release: whole-process apply, a second (no-op) apply and ``status``. The end
of the report lists the goals of issue #13 and whether each is met (one run on a shared machine: read
the min/max spread before trusting a verdict near its line).

Usage: PYTHONPATH=. .venv/bin/python tools/bench_apply.py [--repeat N] [--workload vllm20|synthetic500|all]
       [--vllm-root PATH] [--json OUT.json] [--cprofile] [--where] [--tmpdir DIR] [--keep] [--python PATH]

The image's own figures: build its environment (bash tools/lean-venv.sh /tmp/lean) and pass
``--python /tmp/lean/bin/python``; the default interpreter (this one) may load much more at start.
"""

from __future__ import annotations

import argparse
import cProfile
import difflib
import hashlib
import io
import json
import os
import platform
import pstats
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from fixpack import engine  # noqa: E402

PROFILE = "bench"
# the interpreter of the whole-process runs (--python): this one by default; the image's environment is the
# venv tools/lean-venv.sh builds (unidiff and click only)
PYTHON = [sys.executable]
EXCLUDED_DIRS = {".git", ".fixpack", ".pc"}  # each tool's own bookkeeping, not part of the result
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@invalid", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "bench@invalid", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000"}
MAIL_HEADER = ("From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
               "From: bench <bench@invalid>\nSubject: [PATCH] {subject}\n\n{body}\n\n---\n")


def env_with(**extra: str) -> dict[str, str]:
    env = {**os.environ, **GIT_ENV, **extra}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return env


def sh(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    res = subprocess.run(cmd, cwd=cwd, env=env or env_with(), capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd[:6])}{' ...' if len(cmd) > 6 else ''}` exited {res.returncode}: "
                           f"{(res.stderr or res.stdout).strip()[-800:]}")
    return res.stdout


# --- workload model -----------------------------------------------------------------------------

@dataclass
class Workload:
    name: str
    title: str
    base: Path                      # the clean tree (never written)
    target: str                     # target name in the profile
    pack: Path                      # throwaway pack root (fixes/, profiles/bench.toml + .lock)
    patches: list[Path]             # the patch files, in series order
    quilt_dir: Path                 # QUILT_PATCHES: copies of the patches + series
    expected: dict[str, str]        # touched path -> final text after the whole series
    hunks: int = 0
    tree_files: int = 0

    @property
    def touched(self) -> list[str]:
        return sorted(self.expected)


def write_pack(wl_dir: Path, target: str, package: str, version: str, commit: str, version_module: str,
               patches: list[tuple[str, str, str]]) -> tuple[Path, list[Path], Path]:
    """patches: (fix id, subject, git diff body). Returns (pack root, patch files, quilt patches dir)."""
    pack = wl_dir / "pack"
    fixes = pack / "fixes"
    fixes.mkdir(parents=True)
    files = []
    for fid, subject, body in patches:
        folder = fixes / fid
        folder.mkdir()
        name = "0001-" + re.sub(r"[^a-z0-9]+", "-", subject.lower()).strip("-")[:50] + ".patch"
        text = MAIL_HEADER.format(subject=subject, body=f"Benchmark change {fid}.") + body
        (folder / name).write_text(text)
        (folder / "fix.toml").write_text(
            f'id = "{fid}"\nversion = 1\nsummary = "{subject}"\nwhy = "benchmark workload"\n'
            f'target = "{target}"\npatches = ["{name}"]\n')
        files.append(folder / name)
    (fixes / "series").write_text("".join(f"{fid}\n" for fid, _s, _b in patches))
    (pack / "profiles").mkdir()
    ids = ", ".join(f'"{fid}"' for fid, _s, _b in patches)
    (pack / "profiles" / f"{PROFILE}.toml").write_text(
        f'name = "{PROFILE}"\ndescription = "throwaway benchmark profile"\n\n[targets.{target}]\n'
        f'package = "{package}"\ndistribution = "{package}"\nversion = "{version}"\ncommit = "{commit}"\n'
        f'version_module = "{version_module}"\n\n[fixes]\ndefault = [{ids}]\nopt_in = []\n')
    quilt = wl_dir / "quilt-patches"
    quilt.mkdir()
    names = []
    for i, p in enumerate(files, 1):
        qn = f"{i:04d}-{p.parent.name}.patch"
        shutil.copyfile(p, quilt / qn)
        names.append(qn)
    (quilt / "series").write_text("".join(n + "\n" for n in names))
    return pack, files, quilt


def lock_pack(pack: Path, target: str, base: Path) -> None:
    engine.write_lock(engine.Request(pack_root=pack, profile=PROFILE, roots={target: base}))


def edit_text(lines: list[str], rng: random.Random, tag: str, hunks: int, restack: float = 0.0) -> list[str]:
    """1-3 hunks: each inserts a comment line and changes a nearby line (appends a trailing comment).

    With probability ``restack`` a hunk is anchored on a line an earlier patch changed (a stacked change).
    """
    n = len(lines)
    lo, hi = 8, n - 8
    span = max(1, (hi - lo) // hunks)
    anchors = set()
    earlier = [i for i, l in enumerate(lines) if "# fb-" in l and lo <= i < hi]
    for h in range(hunks):
        if earlier and rng.random() < restack:
            anchors.add(rng.choice(earlier))
        else:
            anchors.add(lo + h * span + rng.randrange(span))
    out = list(lines)
    for k, a in enumerate(sorted(anchors, reverse=True)):
        j = a
        while j < min(a + 6, n - 1) and (not out[j].strip() or out[j].rstrip("\n").endswith("\\")):
            j += 1
        body = out[j].rstrip("\n")
        out[j] = f"{body}  # fb-{tag}.{k} changed\n"
        indent = re.match(r"[ \t]*", out[a]).group(0)
        out.insert(a, f"{indent}# fb-{tag}.{k}: note added by this patch\n")
    return out


def unified(path: str, old: str, new: str) -> str:
    """A git-style diff of one file (diff --git header, 3 lines of context)."""
    body = list(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}", n=3))
    body[0], body[1] = f"--- a/{path}\n", f"+++ b/{path}\n"
    return f"diff --git a/{path} b/{path}\n" + "".join(body)


def count_hunks(bodies: list[str]) -> int:
    return sum(len(re.findall(r"^@@ ", b, re.M)) for b in bodies)


def count_files(root: Path) -> int:
    return sum(len(files) for _d, _ds, files in os.walk(root))


def build_vllm20(root: Path, work: Path) -> Workload:
    """20 patches on 20 real vllm/*.py files, made with git diff in a scratch repository."""
    wl_dir = work / "vllm20"
    wl_dir.mkdir()
    cands = []
    for p in sorted((root / "vllm").rglob("*.py")):
        data = p.read_bytes()
        if b"\r" in data or not data.endswith(b"\n") or data.count(b"\n") < 150:
            continue
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        cands.append(p.relative_to(root).as_posix())
    rng = random.Random(20)
    chosen = sorted(rng.sample(cands, 20))
    scratch = wl_dir / "gen"
    scratch.mkdir()
    for rel in chosen:
        (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / rel, scratch / rel)
    sh(["git", "init", "-q"], scratch)
    sh(["git", "add", "-A"], scratch)
    sh(["git", "commit", "-q", "-m", "base"], scratch)
    expected, patches = {}, []
    for i, rel in enumerate(chosen, 1):
        lines = (scratch / rel).read_text().splitlines(True)
        new = "".join(edit_text(lines, rng, f"{i:03d}", rng.randint(1, 3)))
        (scratch / rel).write_text(new)
        expected[rel] = new
        body = sh(["git", "diff", "--no-color", "--no-ext-diff", "--src-prefix=a/", "--dst-prefix=b/", "-U3",
                   "--", rel], scratch)
        mod = rel.removeprefix("vllm/").removesuffix(".py").replace("/", ".")
        patches.append((f"bench-{i:03d}", f"Adjust {mod}", body))
    pack, files, quilt = write_pack(wl_dir, "vllm", "vllm", "0.30.0", "ced6857a", "vllm/_version.py", patches)
    lock_pack(pack, "vllm", root)
    return Workload("vllm20", f"vLLM 0.30.0 release tree {root}", root, "vllm", pack, files, quilt, expected,
                    count_hunks([b for _f, _s, b in patches]), count_files(root))


def build_synthetic500(work: Path) -> Workload:
    """500 stacked patches over 200 generated modules of 400 lines."""
    wl_dir = work / "synthetic500"
    base = wl_dir / "tree"
    pkg = base / "synpkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""Synthetic package for the fixpack benchmark."""\n')
    (pkg / "_version.py").write_text("__version__ = version = '1.0.0'\n__commit_id__ = commit_id = 'g0123456789ab'\n")
    texts: dict[str, list[str]] = {}
    for i in range(200):
        lines = [f'"""Module {i} of the synthetic benchmark tree."""\n', "\n", "import math\n", "\n"]
        k = 0
        while len(lines) < 400:
            lines += [f"def f_{i}_{k}(x, y=0):\n", f'    """Compute step {k} of module {i}."""\n',
                      f"    total = x * {k} + y\n", f"    total += math.floor({i} / ({k} + 1))\n",
                      "    return total\n", "\n"]
            k += 1
        lines = lines[:399] + ["# end of module\n"]
        rel = f"synpkg/mod_{i:03d}.py"
        (base / rel).write_text("".join(lines))
        texts[rel] = lines
    rng = random.Random(500)
    paths = sorted(texts)
    hot = rng.sample(paths, 20)
    original = {p: "".join(t) for p, t in texts.items()}
    patches = []
    for n in range(1, 501):
        picked: set[str] = set()
        for _ in range(rng.choice((1, 1, 2, 2, 3))):
            picked.add(rng.choice(hot) if rng.random() < 0.4 else rng.choice(paths))
        bodies = []
        for rel in sorted(picked):
            old = "".join(texts[rel])
            texts[rel] = edit_text(texts[rel], rng, f"{n:03d}", rng.randint(1, 3), restack=0.3)
            bodies.append(unified(rel, old, "".join(texts[rel])))
        patches.append((f"syn-{n:03d}", f"Synthetic change {n}", "".join(bodies)))
    expected = {p: "".join(t) for p, t in texts.items() if "".join(t) != original[p]}
    pack, files, quilt = write_pack(wl_dir, "synpkg", "synpkg", "1.0.0", "0123456789ab", "synpkg/_version.py",
                                    patches)
    lock_pack(pack, "synpkg", base)
    return Workload("synthetic500", f"generated tree {base} (200 modules x 400 lines)", base, "synpkg", pack,
                    files, quilt, expected, count_hunks([b for _f, _s, b in patches]), count_files(base))


# --- copies, digests ----------------------------------------------------------------------------

class Copies:
    def __init__(self, work: Path, mode: str) -> None:
        self.work, self.mode, self.n = work, mode, 0
        self.src: dict[str, Path] = {}

    def source(self, wl: Workload) -> Path:
        """The tree to copy from: the base itself, or (link mode, base on another file system) one full copy."""
        if wl.name not in self.src:
            src = wl.base
            if self.mode == "link" and os.stat(wl.base).st_dev != os.stat(self.work).st_dev:
                src = self.work / f"base-{wl.name}"
                sh(["cp", "-a", str(wl.base), str(src)])
            self.src[wl.name] = src
        return self.src[wl.name]

    def fresh(self, wl: Workload) -> Path:
        self.n += 1
        dest = self.work / f"copy-{wl.name}-{self.n:03d}"
        src = self.source(wl)
        if self.mode == "full":
            sh(["cp", "-a", str(src), str(dest)])
        else:  # hard links for what no patch touches, real copies of what a patch touches
            sh(["cp", "-al", str(src), str(dest)])
            for rel in wl.touched:
                (dest / rel).unlink()
                shutil.copy2(src / rel, dest / rel)
        os.sync()  # no dirty pages from the copy for the timed run to flush
        return dest

    @staticmethod
    def drop(path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)


def tree_digest(root: Path) -> dict[str, tuple[str, int]]:
    out = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not (Path(d) == root and x in EXCLUDED_DIRS))
        for f in files:
            p = Path(d) / f
            st = p.lstat()
            h = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else os.readlink(p)
            out[p.relative_to(root).as_posix()] = (h, st.st_mode & 0o7777)
    return out


def digest_diff(a: dict[str, tuple[str, int]], b: dict[str, tuple[str, int]]) -> tuple[list[str], list[str]]:
    """(byte differences, mode-only differences) of tree ``b`` against tree ``a``."""
    data, modes = [], []
    for k in sorted(set(a) | set(b)):
        if k not in b:
            data.append(f"{k}: missing")
        elif k not in a:
            data.append(f"{k}: extra file")
        elif a[k][0] != b[k][0]:
            data.append(f"{k}: bytes differ")
        elif a[k][1] != b[k][1]:
            modes.append(f"{a[k][1]:o}->{b[k][1]:o}")
    return data, modes


def describe_diff(data: list[str], modes: list[str]) -> str:
    if data:
        return f"DIFFERS ({len(data)} files): " + "; ".join(data[:4])
    if modes:
        kinds = ", ".join(f"{m} x{modes.count(m)}" for m in sorted(set(modes)))
        return f"bytes identical to engine; file modes differ ({kinds}: the tool rewrote them with its own mode)"
    return "identical to engine (bytes and modes)"


def check_expected(wl: Workload, root: Path) -> list[str]:
    bad = [rel for rel, text in wl.expected.items() if (root / rel).read_bytes() != text.encode()]
    return [f"{rel}: differs from the generated post-image" for rel in bad]


# --- the tools ----------------------------------------------------------------------------------

@dataclass
class Tool:
    key: str
    label: str
    setup: Callable[[Path], None] | None
    run: Callable[[Path], None]
    available: str = ""  # "" when available, else why not


def engine_request(wl: Workload, root: Path) -> engine.Request:
    return engine.Request(pack_root=wl.pack, profile=PROFILE, roots={wl.target: root})


def run_engine_apply(wl: Workload, root: Path) -> None:
    rep = engine.apply(engine_request(wl, root))
    actions = {f.action for f in rep.fixes}
    if rep.exit_code != 0 or actions != {"applied"} or len(rep.fixes) != len(wl.patches):
        raise RuntimeError(f"engine.apply exit {rep.exit_code}: {rep.error or actions}")


def make_tools(wl: Workload) -> list[Tool]:
    patches = [str(p) for p in wl.patches]

    def gnu_patch(root: Path) -> None:
        for p in patches:
            sh(["patch", "-p1", "-F0", "--no-backup-if-mismatch", "--batch", "-s", "-i", p], root)

    def sync_touched(root: Path) -> None:  # as durable as the engine's writes: the data and the renames on disk
        touched = [root / t for t in wl.touched]
        sh(["sync", *sorted({str(t.parent) for t in touched}), *(str(t) for t in touched if t.exists())], root)

    def gnu_patch_sync(root: Path) -> None:
        gnu_patch(root)
        sync_touched(root)

    def git_init(root: Path) -> None:
        sh(["git", "init", "-q"], root)

    def git_each(root: Path) -> None:
        for p in patches:
            sh(["git", "apply", p], root)

    def git_all(root: Path) -> None:
        sh(["git", "apply", *patches], root)

    def git_all_sync(root: Path) -> None:
        git_all(root)
        sync_touched(root)

    quilt_env = env_with(QUILT_PATCHES=str(wl.quilt_dir), QUILT_PC=".pc")

    def quilt(root: Path) -> None:
        sh(["quilt", "--quiltrc", "-", "push", "-a", "-q", "--fuzz=0"], root, quilt_env)

    have = {t: shutil.which(t) is not None for t in ("patch", "git", "quilt")}
    missing = "not installed (apt-get install -y {0})"
    return [
        Tool("patch", "GNU patch -p1 -F0, per patch", None, gnu_patch, "" if have["patch"] else missing.format("patch")),
        Tool("patch-sync", "GNU patch per patch, then sync", None, gnu_patch_sync,
             "" if have["patch"] else missing.format("patch")),
        Tool("git-each", "git apply, per patch", git_init, git_each, "" if have["git"] else missing.format("git")),
        Tool("git-all", "git apply, all at once", git_init, git_all, "" if have["git"] else missing.format("git")),
        Tool("git-all-sync", "git apply all at once, then sync", git_init, git_all_sync,
             "" if have["git"] else missing.format("git")),
        Tool("quilt", "quilt push -a", None, quilt, "" if have["quilt"] else missing.format("quilt")),
    ]


def timed(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


RSS_SNIPPET = r"""
import json, re, resource, sys, time
from pathlib import Path
from fixpack import engine
def hwm():
    return int(re.search(r"VmHWM:\s+(\d+)", Path("/proc/self/status").read_text()).group(1))
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
req = engine.Request(pack_root=Path(sys.argv[1]), profile=sys.argv[2], roots={sys.argv[3]: Path(sys.argv[4])})
t0 = time.perf_counter()
rep = engine.apply(req)
dt = time.perf_counter() - t0
print(json.dumps({"exit": rep.exit_code, "seconds": dt, "rss_after_import_kb": base,
                  "rss_peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "vmhwm_kb": hwm()}))
"""
# Linux carries the spawning process's high-water RSS into ru_maxrss across fork/exec; a tiny launcher in
# between keeps this benchmark's own memory out of the engine's figure.
LAUNCHER = ("import subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "sys.stdout.write(r.stdout); sys.stderr.write(r.stderr); sys.exit(r.returncode)")


TIME_BIN = "/usr/bin/time"  # GNU time: %M is the child's own peak RSS (a small C parent, no Python floor)


def proc_run(argv: list[str], cwd: Path | None = None) -> tuple[float, float, int, str]:
    """One fresh process: (wall seconds, peak RSS MiB or nan, exit code, last output line). The wall time
    is taken around the whole spawn (GNU time's own fork/exec included: well under a millisecond)."""
    rss_file = Path(tempfile.mkstemp(prefix="fixpack-bench-rss-")[1])
    cmd = [TIME_BIN, "-q", "-f", "%M", "-o", str(rss_file), *argv] if os.access(TIME_BIN, os.X_OK) else argv
    try:
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, env=env_with(), capture_output=True, text=True)
        dt = time.perf_counter() - t0
        try:
            rss = int(rss_file.read_text().strip().splitlines()[-1]) / 1024
        except (ValueError, IndexError):
            rss = float("nan")
    finally:
        rss_file.unlink(missing_ok=True)
    last = ((proc.stdout or "") + (proc.stderr or "")).strip().splitlines()[-1:] or [""]
    return dt, rss, proc.returncode, last[0]


def apply_argv(pack: Path, profile: str, target: str, root: Path, *extra: str) -> list[str]:
    """The image's command line: the pack's entry script, this checkout's engine (``--pack`` chooses the pack)."""
    return [PYTHON[0], str(REPO / "apply_all.py"), "--profile", profile, "--pack", str(pack),
            "--root", f"{target}={root}", "--target", target, *extra]


def status_argv(pack: Path, profile: str, target: str, root: Path) -> list[str]:
    return [PYTHON[0], "-m", "fixpack.cli", "status", "--profile", profile, "--pack", str(pack),
            "--root", f"{target}={root}", "--target", target]


WHERE_SNIPPET = r"""
import cProfile, io, pstats, sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
from fixpack import cli_fast, engine  # what an apply_all.py run imports before the engine starts
t1 = time.perf_counter()
prof = cProfile.Profile()
code = 0
prof.enable()
try:
    cli_fast.main(sys.argv[2:], None, "apply")
except SystemExit as exc:
    code = exc.code
prof.disable()
t2 = time.perf_counter()
buf = io.StringIO()
st = pstats.Stats(prof, stream=buf)
# the engine's own functions, unidiff's and the system calls (the entry's frames above engine.apply left out)
st.sort_stats("cumulative").print_stats(r"(fixpack/(?!cli)|unidiff/|\{built-in method)", 15)
st.sort_stats("tottime").print_stats(10)
sys.stderr.write(f"WHERE imports {t1 - t0:.4f} engine {t2 - t1:.4f} exit {code}\n" + buf.getvalue())
"""


def where_time_goes(wl: Workload, copies: Copies) -> str:
    """A cProfile summary (top 15, cumulative) of a whole-process apply's engine part, in a fresh process."""
    root = copies.fresh(wl)
    try:
        argv = apply_argv(wl.pack, PROFILE, wl.target, root)[2:]
        proc = subprocess.run([sys.executable, "-c", WHERE_SNIPPET, str(REPO), *argv], env=env_with(),
                              capture_output=True, text=True)
        return proc.stderr[proc.stderr.find("WHERE"):] if "WHERE" in proc.stderr else proc.stderr[-3000:]
    finally:
        copies.drop(root)


def bench_workload(wl: Workload, repeat: int, copies: Copies, do_profile: bool) -> dict[str, Any]:
    res: dict[str, Any] = {"workload": wl.name, "tree": str(wl.base), "tree_files": wl.tree_files,
                           "patches": len(wl.patches), "hunks": wl.hunks, "files_touched": len(wl.touched),
                           "times": {}, "checks": {}, "notes": []}
    times: dict[str, list[float]] = {"engine.apply": [], "engine.status": []}
    engine_digest: dict[str, tuple[str, int]] = {}
    status_states: dict[str, int] = {}
    # (1) the engine, in-process
    for r in range(repeat):
        root = copies.fresh(wl)
        try:
            times["engine.apply"].append(timed(lambda: run_engine_apply(wl, root)))
            box: dict[str, Any] = {}
            times["engine.status"].append(timed(lambda: box.update(rep=engine.status(engine_request(wl, root)))))
            rep = box["rep"]
            status_states = {}
            for f in rep.fixes:
                status_states[f.state] = status_states.get(f.state, 0) + 1
            if r == 0:
                bad = check_expected(wl, root)
                res["checks"]["engine == generated post-images"] = "OK" if not bad else "DIFFERS: " + "; ".join(bad[:5])
                engine_digest = tree_digest(root)
                if rep.exit_code != 0:
                    sample = [f"{f.id}: {f.state}: {'; '.join(f.messages)[:140]}" for f in rep.fixes
                              if f.state != "applied"][:2]
                    res["notes"].append(f"engine.status after a successful apply exits {rep.exit_code}: "
                                        + "; ".join(sample))
        finally:
            copies.drop(root)
    res["status_states"] = status_states
    # the whole process, as an image build runs it: apply_all.py (fresh copy), then status on that copy
    rss: dict[str, list[float]] = {"proc.apply": [], "proc.status": []}
    times["proc.apply"], times["proc.status"] = [], []
    for r in range(repeat):
        root = copies.fresh(wl)
        try:
            for key, argv in (("proc.apply", apply_argv(wl.pack, PROFILE, wl.target, root)),
                              ("proc.status", status_argv(wl.pack, PROFILE, wl.target, root))):
                dt, mib, code, last = proc_run(argv)
                times[key].append(dt)
                rss[key].append(mib)
                if code != 0:
                    res["notes"].append(f"whole-process {key} exited {code}: {last[:160]}")
            if r == 0:
                bad = check_expected(wl, root)
                res["checks"]["proc.apply == generated post-images"] = "OK" if not bad else "DIFFERS: " + "; ".join(bad[:5])
        finally:
            copies.drop(root)
    res["proc_rss_mib"] = {k: max(v) for k, v in rss.items() if v}
    # peak memory of an engine apply, in a fresh interpreter
    root = copies.fresh(wl)
    try:
        out = sh([sys.executable, "-S", "-c", LAUNCHER, PYTHON[0], "-c", RSS_SNIPPET, str(wl.pack),
                  PROFILE, wl.target, str(root)])
        res["memory"] = json.loads(out.strip().splitlines()[-1])
    finally:
        copies.drop(root)
    # (2)-(4) the other tools
    for tool in make_tools(wl):
        if tool.available:
            res["checks"][tool.key] = f"skipped: {tool.label.split(',')[0]} {tool.available}"
            continue
        times[tool.key] = []
        for r in range(repeat):
            root = copies.fresh(wl)
            try:
                if tool.setup:
                    tool.setup(root)
                try:
                    times[tool.key].append(timed(lambda: tool.run(root)))
                except RuntimeError as exc:
                    res["checks"][tool.key] = f"FAILED: {exc}"
                    del times[tool.key]
                    break
                if r == 0:
                    res["checks"][tool.key] = describe_diff(*digest_diff(engine_digest, tree_digest(root)))
            finally:
                copies.drop(root)
    res["labels"] = {t.key: t.label for t in make_tools(wl)}
    res["times"] = {k: {"median": statistics.median(v), "min": min(v), "max": max(v), "runs": v}
                    for k, v in times.items() if v}
    if do_profile:
        root = copies.fresh(wl)
        try:
            prof = cProfile.Profile()
            prof.runcall(run_engine_apply, wl, root)
            buf = io.StringIO()
            st = pstats.Stats(prof, stream=buf)
            st.sort_stats("tottime").print_stats(15)
            st.sort_stats("cumulative").print_stats(25)
            res["cprofile"] = buf.getvalue()
        finally:
            copies.drop(root)
    return res


def bench_real_profile(vllm_root: Path, work: Path, repeat: int, copies: Copies) -> dict[str, Any]:
    """Profile v0.30.0 of this repository with both opt-ins on a copy of the real release (its vllm/ folder):
    whole-process apply, a second apply (must write nothing) and status, a fresh copy per repetition."""
    fixes_table = tomllib.loads((REPO / "profiles" / "v0.30.0.toml").read_text())["fixes"]
    # the fixes only: the profile's components install into a site-packages folder, not a release copy
    ids, opt_ins = [*fixes_table["default"], *fixes_table["opt_in"]], list(fixes_table["opt_in"])
    touched = set()
    for fid in ids:
        for patch in (REPO / "fixes" / fid).glob("*.patch"):
            touched |= set(re.findall(r"^\+\+\+ b/(\S+)", patch.read_text(), re.M))
    stage = work / "real-v0.30.0"
    stage.mkdir()
    sh(["cp", "-al" if os.stat(vllm_root).st_dev == os.stat(work).st_dev else "-a", str(vllm_root / "vllm"),
        str(stage / "vllm")])
    wl = Workload("real-v0.30.0", "", stage, "vllm", REPO, [], work, dict.fromkeys(touched, ""))
    times: dict[str, list[float]] = {"real.apply": [], "real.reapply": [], "real.status": []}
    rss: dict[str, list[float]] = {k: [] for k in times}
    notes, lasts = [], {}
    for _r in range(repeat):
        root = copies.fresh(wl)
        try:
            for key, argv in (("real.apply", apply_argv(REPO, "v0.30.0", "vllm", root, *opt_ins)),
                              ("real.reapply", apply_argv(REPO, "v0.30.0", "vllm", root, *opt_ins)),
                              ("real.status", status_argv(REPO, "v0.30.0", "vllm", root))):
                dt, mib, code, last = proc_run(argv)
                times[key].append(dt)
                rss[key].append(mib)
                lasts[key] = last
                if code != 0:
                    notes.append(f"{key} exited {code}: {last[:160]}")
        finally:
            copies.drop(root)
    return {"fixes": ids, "opt_ins": opt_ins, "notes": notes, "last_lines": lasts,
            "rss_mib": {k: max(v) for k, v in rss.items()},
            "times": {k: {"median": statistics.median(v), "min": min(v), "max": max(v), "runs": v}
                      for k, v in times.items()}}


def python_start(repeat: int) -> dict[str, float]:
    """The floor of any whole-process figure: an interpreter that does nothing, and one importing the CLI + engine."""
    out = {}
    for key, code in (("python -c pass", "pass"),
                      ("the stdlib it needs (floor)", "import pathlib, tomllib, json, hashlib, re, typing, enum, os"),
                      ("import cli_fast, engine (image)", "import fixpack.cli_fast, fixpack.engine"),
                      ("import cli, engine (click)", "import fixpack.cli, fixpack.engine")):
        runs = [proc_run([PYTHON[0], "-c", code])[0] for _ in range(max(7, repeat))]
        out[key] = min(runs)  # a floor: the least of several runs (noise only adds)
    return out


def print_real(real: dict[str, Any], start: dict[str, float]) -> None:
    print(f"\n== real profile v0.30.0 ({len(real['fixes'])} fixes, opt-ins {' '.join(real['opt_ins'])}) on a copy "
          f"of the vLLM 0.30.0 release (vllm/), whole process")
    print(f"  {'run':<40} {'median s':>9} {'min s':>8} {'max s':>8} {'peak RSS MiB':>13}")
    labels = {"real.apply": "apply_all.py, fresh copy", "real.reapply": "apply_all.py again (no-op)",
              "real.status": "fixpack status, applied copy"}
    for key, m in real["times"].items():
        print(f"  {labels[key]:<40} {m['median']:9.4f} {m['min']:8.4f} {m['max']:8.4f} {real['rss_mib'][key]:13.1f}"
              f"   {real['last_lines'].get(key, '')[:60]}")
    for k, v in start.items():
        print(f"  {'python start (min): ' + k:<40} {v:9.4f}")
    for n in real["notes"]:
        print(f"  NOTE: {n}")


def print_goals(results: list[dict[str, Any]], real: dict[str, Any] | None) -> bool:
    """Issue #13's goals, each with its figures and a verdict (medians of one run: not a timed test)."""
    by = {r["workload"]: r for r in results}
    rows: list[tuple[str, str, bool | None]] = []

    def med(wl: str, key: str) -> float | None:
        t = by.get(wl, {}).get("times", {}).get(key)
        return t["median"] if t else None

    pa, gp = med("vllm20", "proc.apply"), med("vllm20", "patch")
    rows.append(("vllm20: whole-process apply within 2x of the GNU patch loop",
                 f"{pa:.3f} s vs {gp:.3f} s = {pa / gp:.2f}x" if pa and gp else "not measured",
                 pa / gp <= 2 if pa and gp else None))
    gps = med("vllm20", "patch-sync")
    rows.append(("  (context) vllm20: whole-process apply against the GNU patch loop followed by a sync of the "
                 "touched files and folders (what the engine's fsyncs give)",
                 f"{pa:.3f} s vs {gps:.3f} s = {pa / gps:.2f}x" if pa and gps else "not measured", None))
    st = real["times"]["real.status"]["median"] if real else None
    rows.append(("v0.30.0 (real release, applied): whole-process status under 60 ms",
                 f"{st * 1000:.0f} ms" if st else "not measured", st < 0.060 if st else None))
    st20 = med("vllm20", "proc.status")
    rows.append(("vllm20: whole-process status under 60 ms (same goal, 20 patches)",
                 f"{st20 * 1000:.0f} ms" if st20 else "not measured", st20 < 0.060 if st20 else None))
    pa5, gp5, ga5 = med("synthetic500", "proc.apply"), med("synthetic500", "patch"), med("synthetic500", "git-all")
    rows.append(("synthetic500: whole-process apply at or below the GNU patch loop",
                 f"{pa5:.3f} s vs {gp5:.3f} s = {pa5 / gp5:.2f}x" if pa5 and gp5 else "not measured",
                 pa5 <= gp5 if pa5 and gp5 else None))
    rows.append(("synthetic500: whole-process apply within 3x of one git apply of the series",
                 f"{pa5:.3f} s vs {ga5:.3f} s = {pa5 / ga5:.2f}x" if pa5 and ga5 else "not measured",
                 pa5 / ga5 <= 3 if pa5 and ga5 else None))
    gas5 = med("synthetic500", "git-all-sync")
    rows.append(("  (context) synthetic500: whole-process apply against one git apply followed by a sync of the "
                 "touched files and folders (what the engine's fsyncs give)",
                 f"{pa5:.3f} s vs {gas5:.3f} s = {pa5 / gas5:.2f}x" if pa5 and gas5 else "not measured", None))
    rss = {w: by[w]["proc_rss_mib"]["proc.apply"] for w in ("vllm20", "synthetic500") if w in by}
    files = {w: by[w]["tree_files"] for w in rss}
    if len(rss) == 2:
        big, small = sorted(rss, key=lambda w: files[w], reverse=True)
        ok = rss[big] <= 1.2 * rss[small] + 2
        rows.append(("peak RSS flat with tree size (larger tree within 1.2x + 2 MiB of the smaller's)",
                     f"{big} {files[big]} files {rss[big]:.1f} MiB; {small} {files[small]} files {rss[small]:.1f} MiB"
                     + (f"; real v0.30.0 apply {real['rss_mib']['real.apply']:.1f} MiB" if real else ""), ok))
    else:
        rows.append(("peak RSS flat with tree size", "needs --workload all", None))
    print("\n== issue #13 goals (medians of this run; a shared 2-core machine is noisy: see min/max above)")
    for goal, fig, ok in rows:
        verdict = ("info" if goal.startswith("  (") else "n/a") if ok is None else ("MET" if ok else "NOT MET")
        print(f"  [{verdict:^7}] {goal}: {fig}")
    return all(ok is not False for _g, _f, ok in rows)


# --- report -------------------------------------------------------------------------------------

def tool_version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True).stdout.strip().splitlines()
        return out[0] if out else "?"
    except OSError:
        return "not installed"


def print_workload(res: dict[str, Any], wl: Workload) -> None:
    t = res["times"]
    eng = t["engine.apply"]["median"]
    print(f"\n== {res['workload']}: {res['patches']} patches, {res['hunks']} hunks, {res['files_touched']} files "
          f"touched; {wl.title}, {res['tree_files']} files")
    print(f"  {'tool':<40} {'median s':>9} {'min s':>8} {'max s':>8} {'x engine.apply':>15}")
    rows = [("engine.apply", "fixpack engine.apply (in-process)"),
            ("engine.status", "fixpack engine.status (in-process, after)"),
            ("proc.apply", "apply_all.py (whole process)"),
            ("proc.status", "fixpack status (whole process)")]
    rows += [(k, v) for k, v in res["labels"].items()]
    for key, label in rows:
        if key not in t:
            print(f"  {label:<40} {'-':>9}   ({res['checks'].get(key, 'not run')})")
            continue
        m = t[key]
        print(f"  {label:<40} {m['median']:9.4f} {m['min']:8.4f} {m['max']:8.4f} {m['median'] / eng:15.3f}")
    others = [(res["labels"][k], t[k]["median"]) for k in res["labels"] if k in t]
    if others:
        print("  engine.apply takes " + "; ".join(f"{eng / s:.1f}x the time of {lbl}" for lbl, s in others if s > 0))
    if "proc.apply" in t:
        pa = t["proc.apply"]["median"]
        print("  whole-process apply takes " + "; ".join(f"{pa / s:.2f}x the time of {lbl}" for lbl, s in others if s > 0))
    if res.get("proc_rss_mib"):
        print("  whole-process peak RSS (GNU time %M, max of the runs): "
              + ", ".join(f"{k} {v:.1f} MiB" for k, v in res["proc_rss_mib"].items()))
    mem = res.get("memory", {})
    if mem:
        print(f"  engine peak RSS (getrusage maxrss, apply in a fresh python3): {mem['rss_peak_kb'] / 1024:.1f} MiB "
              f"(VmHWM {mem['vmhwm_kb'] / 1024:.1f} MiB; {mem['rss_after_import_kb'] / 1024:.1f} MiB after imports; "
              f"that run took {mem['seconds']:.3f} s, exit {mem['exit']})")
    st = ", ".join(f"{n} {s}" for s, n in sorted(res["status_states"].items()))
    print(f"  engine.status after apply: {st}")
    print("  sanity check (whole result tree vs the engine's, excluding .fixpack/.git/.pc):")
    for k, v in res["checks"].items():
        print(f"    {k:<34} {v}")
    for n in res["notes"]:
        print(f"  NOTE: {n}")
    if res.get("where"):
        print("  where a whole-process apply's time goes (imports, then the engine part under cProfile):")
        print("    " + res["where"].strip().replace("\n", "\n    "))
    if res.get("cprofile"):
        print("  cProfile of one engine.apply:")
        print("    " + res["cprofile"].strip().replace("\n", "\n    "))


def fetch_vllm(work: Path) -> Path:
    """`fixpack fetch --profile v0.30.0 --target vllm` with this repository's pack; if that pack does not load
    (fetch validates the whole pack), the same command with a minimal pack holding only the vllm target."""
    cmd = [sys.executable, "-m", "fixpack.cli", "fetch", "--profile", "v0.30.0", "--target", "vllm", "--pack"]
    try:
        out = sh(cmd + [str(REPO)])
    except RuntimeError as exc:
        print(f"note: fetch with the repository's pack failed ({str(exc).splitlines()[0][-120:]}); "
              f"fetching through a minimal pack")
        mini = work / "fetch-pack"
        (mini / "fixes").mkdir(parents=True)
        (mini / "fixes" / "series").write_text("")
        (mini / "profiles").mkdir()
        (mini / "profiles" / "v0.30.0.toml").write_text(
            'name = "v0.30.0"\n[targets.vllm]\npackage = "vllm"\ndistribution = "vllm"\nversion = "0.30.0"\n'
            'commit = "ced6857a"\nversion_module = "vllm/_version.py"\nsource = { pypi = "vllm" }\n'
            '[fixes]\ndefault = []\nopt_in = []\n')
        out = sh(cmd + [str(mini)])
    for line in out.splitlines():
        if line.startswith("vllm="):
            return Path(line[len("vllm="):])
    raise RuntimeError(f"fixpack fetch printed no vllm=ROOT line: {out!r}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="repetitions per tool (median reported; default 3)")
    ap.add_argument("--workload", choices=("vllm20", "synthetic500", "all"), default="all")
    ap.add_argument("--vllm-root", type=Path, default=None,
                    help="an unpacked vLLM 0.30.0 release (default: `fixpack fetch --profile v0.30.0 --target vllm`)")
    ap.add_argument("--json", type=Path, default=None, metavar="OUT", help="also write the results as JSON here")
    ap.add_argument("--cprofile", action="store_true", help="also print a cProfile of one engine.apply")
    ap.add_argument("--where", action="store_true",
                    help="also print where a whole-process apply's time goes (imports; the engine part under "
                         "cProfile: top 15 by cumulative time, top 10 by own time), per workload")
    ap.add_argument("--copy-mode", choices=("link", "full"), default="link",
                    help="link: hard-link untouched files, copy touched ones (default); full: cp -a")
    ap.add_argument("--tmpdir", type=Path, default=None, help="where the work folder goes (default: $TMPDIR)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (packs, patches)")
    ap.add_argument("--python", default=sys.executable, metavar="PATH",
                    help="the interpreter of the whole-process runs (default: this one; the image's: a venv made "
                         "by tools/lean-venv.sh)")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    if not shutil.which(args.python):
        ap.error(f"--python {args.python}: no such interpreter")
    PYTHON[0] = shutil.which(args.python) or args.python
    t_start = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="fixpack-bench-", dir=args.tmpdir)).resolve()
    try:
        fs = sh(["findmnt", "-no", "FSTYPE,OPTIONS", "-T", str(work)]).strip().splitlines()[0]
        fs = " ".join(fs.split())
    except (RuntimeError, OSError):
        fs = sh(["stat", "-f", "-c", "%T", str(work)]).strip()
    quilt_v = tool_version(["quilt", "--version"]) if shutil.which("quilt") else "NOT INSTALLED (apt-get install -y quilt)"
    print(f"fixpack apply benchmark: python {platform.python_version()}, {tool_version(['patch', '--version'])}, "
          f"{tool_version(['git', '--version'])}, quilt {quilt_v}, {os.cpu_count()} CPUs")
    print(f"whole-process runs: {PYTHON[0]}")
    print(f"work folder {work} ({fs}); {args.repeat} repetitions per tool, median; each on a fresh copy "
          f"({args.copy_mode} mode), copy time excluded")
    # the engine's bytecode, compiled once as an image's install step does (ports/muse-spark-open/install.sh,
    # tools/setup.sh): with $PYTHONDONTWRITEBYTECODE set, every whole-process run would compile it from source
    sh([sys.executable, "-m", "compileall", "-q", str(REPO / "fixpack")])
    print(f"engine bytecode compiled (python -m compileall -q fixpack; $PYTHONDONTWRITEBYTECODE="
          f"{os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r})")
    results = []
    real: dict[str, Any] | None = None
    start = python_start(args.repeat)
    try:
        names = ("vllm20", "synthetic500") if args.workload == "all" else (args.workload,)
        copies = Copies(work, args.copy_mode)
        for name in names:
            t0 = time.perf_counter()
            if name == "vllm20":
                root = args.vllm_root.resolve() if args.vllm_root else fetch_vllm(work)
                wl = build_vllm20(root, work)
            else:
                wl = build_synthetic500(work)
            gen_s = time.perf_counter() - t0
            res = bench_workload(wl, args.repeat, copies, args.cprofile)
            res["generate_and_lock_s"] = gen_s
            if args.where:
                res["where"] = where_time_goes(wl, copies)
            print_workload(res, wl)
            results.append(res)
            if name == "vllm20":
                real = bench_real_profile(root, work, args.repeat, copies)
                print_real(real, start)
    finally:
        if args.keep:
            print(f"\nkept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print_goals(results, real)
    total = time.perf_counter() - t_start
    print(f"\ntotal benchmark time {total:.1f} s")
    if args.json:
        doc = {"python": platform.python_version(), "cpus": os.cpu_count(), "filesystem": fs,
               "repeat": args.repeat, "copy_mode": args.copy_mode, "total_s": total, "workloads": results,
               "real_v0.30.0": real, "python_start": start}
        args.json.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        print(f"wrote {args.json}")
    bad = any(v.startswith(("DIFFERS", "FAILED")) for r in results for v in r["checks"].values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
