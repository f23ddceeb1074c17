"""Stress the README's promises on a target: concurrent storms, a disk-full sweep, a kill -9 sweep.

    python tools/stress.py storm --pack P --profile p1 --target demo --root CLEAN [--rounds 20 --runs 12 --seed 1]
    python tools/stress.py diskfull --pack P --profile p1 --target vllm --root CLEAN [--steps 60]   (root: tmpfs)
    python tools/stress.py kill --pack P --profile p1 --target vllm --root CLEAN

Each mode copies CLEAN into scratch folders, runs ``python -m fixpack.cli`` as separate processes and
prints counts as JSON. tests/test_stress.py runs small bounded storms and the kill sweep with these
functions; the bigger sweeps are for a maintainer (the note of issue #12 has their counts).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMMANDS = (["apply"], ["revert"], ["status"], ["apply", "--dry-run"], ["revert", "--dry-run"])


@dataclass
class Target:
    pack: Path
    profile: str
    name: str
    opt_ins: tuple[str, ...] = ()
    fork: bool = False  # run the engine in forked children (no interpreter start-up: the tests' mode)

    def argv(self, command: list[str], root: Path) -> list[str]:
        extra = list(self.opt_ins) if command[0] == "apply" else []
        return [sys.executable, "-m", "fixpack.cli", *command, "--profile", self.profile, "--pack", str(self.pack),
                "--target", self.name, "--root", f"{self.name}={root}", *extra]


def env(**extra: str) -> dict[str, str]:
    out = {**os.environ, "PYTHONPATH": str(REPO), "FIXPACK_LOCK_WAIT": "120", **extra}
    for k in ("FIXPACK_FAULT_AT", "FIXPACK_IO_FAULT"):
        if k not in extra:
            out.pop(k, None)
    return out


def files(root: Path) -> dict[str, bytes]:
    """Every file under root (state folder included) with its bytes; folders as b'<dir>'."""
    out: dict[str, bytes] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        out[rel] = b"<link>" if p.is_symlink() else (p.read_bytes() if p.is_file() else b"<dir>")
    return out


def without_state(snap: dict[str, bytes]) -> dict[str, bytes]:
    return {k: v for k, v in snap.items() if not k.startswith(".fixpack")}


class Proc:
    """One run of a command, as a separate process: ``python -m fixpack.cli`` or a forked child that
    calls the engine the way the CLI does (same exit codes)."""

    def __init__(self, t: Target, command: list[str], root: Path, **extra: str) -> None:
        self.popen: subprocess.Popen[str] | None = None
        if not t.fork:
            self.popen = subprocess.Popen(t.argv(command, root), env=env(**extra), stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True)
            return
        self.r, w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns
            os.close(self.r)
            code, msg = 1, ""
            try:
                os.environ.clear()
                os.environ.update(env(**extra))
                code, msg = _engine_run(t, command, root)
            except BaseException as exc:  # noqa: B036 (a bug in the child is reported, exit 1)
                msg = repr(exc)
            finally:
                os.write(w, msg.encode("utf-8", "replace")[-4000:])
                os._exit(code)
        os.close(w)

    def wait(self) -> tuple[int, str]:
        if self.popen is not None:
            _, err = self.popen.communicate()
            return self.popen.returncode, err
        chunks = []
        while chunk := os.read(self.r, 65536):
            chunks.append(chunk)
        os.close(self.r)
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status), b"".join(chunks).decode()


def _engine_run(t: Target, command: list[str], root: Path) -> tuple[int, str]:
    from fixpack import engine, fsio
    from fixpack.errors import FixpackError

    fsio.reset_fault_counters()
    req = engine.Request(pack_root=t.pack, profile=t.profile, roots={t.name: root}, only_targets=(t.name,),
                         opt_ins=t.opt_ins if command[0] == "apply" else (), dry_run="--dry-run" in command)
    try:
        report = {"apply": engine.apply, "revert": engine.revert, "status": engine.status}[command[0]](req)
    except FixpackError as exc:
        return exc.exit_code, str(exc)
    return report.exit_code, report.error


def run(t: Target, command: list[str], root: Path, **extra: str) -> tuple[int, str]:
    return Proc(t, command, root, **extra).wait()


def reference_states(t: Target, clean: Path, work: Path) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The clean files and the files once applied (state folder included in both)."""
    ref = work / "reference"
    shutil.copytree(clean, ref, symlinks=True)
    pristine = files(ref)
    rc, err = run(t, ["apply"], ref)
    if rc != 0:
        raise SystemExit(f"apply on a clean copy failed ({rc}): {err}")
    applied = files(ref)
    shutil.rmtree(ref)
    return pristine, applied


@dataclass
class StormResult:
    rounds: int = 0
    runs: int = 0
    exit_codes: dict[str, int] = field(default_factory=dict)
    anomalies: list[str] = field(default_factory=list)


def storm(t: Target, clean: Path, rounds: int, runs: int, seed: int, work: Path) -> StormResult:
    """Rounds of ``runs`` concurrent mixed commands on one copy. Every run must exit 0 (they wait for
    the lock), and after each round the copy is either the clean files or the applied files, with no
    journal or temp file; the last revert gives back the clean bytes exactly."""
    rng = random.Random(seed)
    pristine, applied = reference_states(t, clean, work)
    root = work / "storm"
    shutil.copytree(clean, root, symlinks=True)
    out = StormResult()
    for r in range(rounds):
        cmds = [rng.choice(COMMANDS) for _ in range(runs)]
        procs = [Proc(t, c, root) for c in cmds]
        for c, p in zip(cmds, procs):
            rc, err = p.wait()
            out.runs += 1
            out.exit_codes[str(rc)] = out.exit_codes.get(str(rc), 0) + 1
            if rc != 0:
                out.anomalies.append(f"round {r}: {' '.join(c)} exited {rc}: {err.strip()[-300:]}")
        now = files(root)
        if now not in (pristine, applied):
            diff = sorted(k for k in set(now) | set(applied) if now.get(k) != applied.get(k))
            out.anomalies.append(f"round {r}: neither clean nor applied (differs from applied in {diff[:5]})")
        out.rounds += 1
    rc, _ = run(t, ["revert"], root)
    if rc != 0 or files(root) != pristine:
        out.anomalies.append(f"final revert exited {rc}, clean bytes: {files(root) == pristine}")
    shutil.rmtree(root)
    return out


@dataclass
class KillResult:
    points: int = 0
    wrong: list[str] = field(default_factory=list)


KILL_COMBOS = (("apply", "apply"), ("apply", "revert"), ("revert", "revert"), ("revert", "apply"))


def kill_sweep(t: Target, clean: Path, work: Path, limit: int = 10_000,
               combos: tuple[tuple[str, str], ...] = KILL_COMBOS) -> KillResult:
    """Kill apply, then revert, at every write point ($FIXPACK_FAULT_AT). The next run must end in the
    right state with no leftover file: apply -> exactly the applied files; revert -> exactly the clean
    files (no .fixpack/ at all)."""
    pristine, applied = reference_states(t, clean, work)
    out = KillResult()
    root = work / "kill"
    state = {"apply": applied, "revert": pristine}
    for killed, then in combos:
        command, follow, start, expect = [killed], [then], state["revert" if killed == "apply" else "apply"], state[then]
        for n in range(1, limit):
            _lay_out(root, clean, start, t)
            rc, _ = run(t, command, root, FIXPACK_FAULT_AT=str(n))
            if rc != 137:
                break  # ran past the last write point
            out.points += 1
            rc, _ = run(t, follow, root)
            if rc != 0 or files(root) != expect:
                now = files(root)
                diff = sorted(k for k in set(now) | set(expect) if now.get(k) != expect.get(k))
                out.wrong.append(f"{' '.join(command)} killed at {n}, then {' '.join(follow)} (exit {rc}): "
                                 f"differs in {diff[:5]}")
    shutil.rmtree(root, ignore_errors=True)
    return out


def _lay_out(root: Path, clean: Path, snap: dict[str, bytes], t: Target) -> None:
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(clean, root, symlinks=True)
    if snap != files(root):
        rc, err = run(t, ["apply"], root)
        assert rc == 0 and files(root) == snap, err


@dataclass
class DiskFullResult:
    runs: int = 0
    failed: int = 0
    unchanged: int = 0
    exit_codes: dict[str, int] = field(default_factory=dict)
    bad: list[str] = field(default_factory=list)


def disk_full_sweep(t: Target, clean: Path, mount: Path, steps: int) -> DiskFullResult:
    """Apply (and revert) on a copy in a small file system filled to leave 0 .. enough bytes free.
    A run either succeeds or exits 5 with the target's bytes unchanged and no temp file. ``mount``
    must be an empty tmpfs (or any small file system) of which this sweep may use everything."""
    work = Path(tempfile.mkdtemp())
    pristine, applied = reference_states(t, clean, work)
    shutil.rmtree(work)
    out = DiskFullResult()
    root = mount / "t"
    shutil.copytree(clean, root, symlinks=True)
    filler = mount / "filler"
    free0 = _free(mount)
    need = sum(len(v) for v in applied.values()) * 2 - sum(len(v) for v in pristine.values()) + (1 << 20)
    for i in range(steps):
        for command, start in ((["apply"], pristine), (["revert"], applied)):
            if files(root) != start:
                filler.unlink(missing_ok=True)
                rc, err = run(t, ["apply" if start is applied else "revert"], root)
                assert rc == 0 and files(root) == start, err
            leave = min(free0, need) * i // max(steps - 1, 1)
            _fill(filler, mount, leave)
            before = files(root)
            rc, err = run(t, command, root)
            out.runs += 1
            out.exit_codes[str(rc)] = out.exit_codes.get(str(rc), 0) + 1
            now = files(root)
            if rc != 0:
                out.failed += 1
                out.unchanged += now == before
                if now != before or rc != 5:
                    out.bad.append(f"{' '.join(command)} with {leave} bytes free: exit {rc}, "
                                   f"unchanged {now == before}: {err.strip()[-200:]}")
            elif now != (applied if command == ["apply"] else pristine):
                out.bad.append(f"{' '.join(command)} with {leave} bytes free: exit 0 but not the expected files")
            filler.unlink(missing_ok=True)
    return out


def _free(mount: Path) -> int:
    st = os.statvfs(mount)
    return st.f_bfree * st.f_frsize


def _fill(filler: Path, mount: Path, leave: int) -> None:
    """Write a filler file until ``leave`` bytes (about) are free."""
    filler.unlink(missing_ok=True)
    with open(filler, "wb") as fh:
        while _free(mount) > leave:
            chunk = min(_free(mount) - leave, 1 << 20)
            try:
                fh.write(b"\0" * max(chunk, 1))
                fh.flush()
            except OSError:
                break


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("storm", "kill", "diskfull"))
    ap.add_argument("--pack", type=Path, default=REPO)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--root", type=Path, required=True, help="a clean release copy (copied, never written)")
    ap.add_argument("--opt-in", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--mount", type=Path, help="diskfull: an empty small file system (e.g. a tmpfs)")
    ap.add_argument("--fork", action="store_true", help="forked engine runs instead of python -m fixpack.cli")
    a = ap.parse_args()
    t = Target(a.pack, a.profile, a.target, tuple(a.opt_in), a.fork)
    with tempfile.TemporaryDirectory() as tmp:
        if a.mode == "storm":
            result: object = storm(t, a.root, a.rounds, a.runs, a.seed, Path(tmp))
        elif a.mode == "kill":
            result = kill_sweep(t, a.root, Path(tmp))
        else:
            if a.mount is None:
                ap.error("diskfull needs --mount")
            result = disk_full_sweep(t, a.root, a.mount, a.steps)
    print(json.dumps(result.__dict__, indent=2))


if __name__ == "__main__":
    main()
