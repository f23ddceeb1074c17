"""Proof runs: each fix's tests fail on the clean image and pass once the profile is applied.

The image is a Python environment with the target installed (a virtual environment with vLLM 0.30.0
stands in for the Gaudi image). For every fix of the profile, ``fixes/<id>/test_*.py`` runs in that
interpreter twice: on the clean install (it must fail: it shows the bug) and after the profile is
applied with every opt-in (it must pass). Then the apply is run again (everything already applied,
nothing written) and the profile is reverted (every byte back). Results come back as data.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

from .engine import Request, apply, revert, status
from .errors import EXIT_CONFLICT, BadInputError, ConflictError, FixpackError, MismatchError, Terminated
from .interrupts import Term, signals
from .loader import load_pack, load_profile
from .model import Fix
from .progress import QUIET, Progress
from .safepath import sha256_regular
from .states import Action, State
from .structs import dataclass, field


@dataclass
class ProofResult:
    """One fix's proof: the pytest summary line and exit code on the clean and the patched image."""

    fix: str
    clean_rc: int = -1
    clean_summary: str = ""
    patched_rc: int = -1
    patched_summary: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"fix": self.fix, "clean_rc": self.clean_rc, "clean_summary": self.clean_summary,
                "patched_rc": self.patched_rc, "patched_summary": self.patched_summary, "ok": self.ok}

    @property
    def ok(self) -> bool:
        # pytest exits 1 when tests ran and some failed; 2-5 are errors, not a shown bug
        return self.clean_rc == 1 and self.patched_rc == 0


@dataclass
class ProofRun:
    results: list[ProofResult] = field(default_factory=list)
    reapply_wrote_nothing: bool = False
    revert_restored_bytes: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results) and self.reapply_wrote_nothing and self.revert_restored_bytes

    def as_dict(self) -> dict[str, Any]:
        """The body of ``prove --json`` (schemas/prove.schema.json adds the common keys)."""
        return {"results": [r.as_dict() for r in self.results], "reapply_wrote_nothing": self.reapply_wrote_nothing,
                "revert_restored_bytes": self.revert_restored_bytes, "notes": list(self.notes)}

    @property
    def exit_code(self) -> int:
        """0 when every fix is proven and the image came back byte for byte, else 4 (a conflict)."""
        return 0 if self.ok else EXIT_CONFLICT


def check_interpreter(python: str) -> None:
    """Refuse an interpreter (``--python PATH``) that is no executable file, before anything is written.

    Raises BadInputError (exit 2) naming the path and how to build a stand-in image."""
    if shutil.which(python) is None:
        path = Path(python)
        why = ("no such file" if not path.exists() else "not a file" if not path.is_file() else "not executable")
        raise BadInputError(_no_interpreter(python, why))


def _no_interpreter(python: str, why: str) -> str:
    return (f"--python {python}: {why}; give the interpreter of a stand-in image of the release "
            f"(`bash tools/image-venv.sh VERSION DIR` builds one; then pass DIR/bin/python)")


def site_packages(python: str) -> Path:
    """The purelib folder of ``python`` (where pip installed the target). Raises BadInputError when the
    interpreter cannot be run or fails."""
    try:
        out = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True)
    except OSError as exc:  # gone, not executable, not a program
        raise BadInputError(_no_interpreter(python, exc.strerror or str(exc))) from exc
    except subprocess.CalledProcessError as exc:
        why = f"it exited {exc.returncode}: {exc.stderr.strip()[-300:]}"
        raise BadInputError(_no_interpreter(python, why)) from exc
    return Path(out.stdout.strip())


def check_pytest(python: str) -> None:
    """Refuse, before anything is written, an interpreter that cannot import pytest: every proof would fail
    to run on the clean and on the patched image alike. Raises BadInputError (exit 2) saying how to add it."""
    try:
        proc = subprocess.run([python, "-c", "import pytest"], capture_output=True, text=True)
    except OSError as exc:
        raise BadInputError(_no_interpreter(python, exc.strerror or str(exc))) from exc
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise BadInputError(f"--python {python}: this Python cannot import pytest ({why}), which runs the proofs; "
                            f"install it there (`{python} -m pip install pytest`) or give an image's Python that "
                            f"has it (`bash tools/setup.sh` makes .venv so); nothing was written")


def tree_digest(root: Path, package: str) -> str:
    """sha256 over every file of ``root/package`` (paths, modes, bytes), ``__pycache__`` aside: each file read in
    blocks (:func:`sha256_regular`, never held whole), a link by its target (never read through), anything else
    (a FIFO would block the read) by its kind, unread."""
    h = hashlib.sha256()
    for p in sorted((root / package).rglob("*")):
        if "__pycache__" in p.parts:
            continue
        try:
            st = p.lstat()
        except FileNotFoundError:  # (gone since the listing: as before, when is_file said no)
            continue
        if stat.S_ISDIR(st.st_mode):
            continue
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        h.update(oct(st.st_mode & 0o777).encode() + b"\0")
        if stat.S_ISLNK(st.st_mode):
            h.update(b"link:" + os.fsencode(os.readlink(p)))
        elif not stat.S_ISREG(st.st_mode):
            h.update(b"other:" + oct(stat.S_IFMT(st.st_mode)).encode())
        else:
            try:
                h.update(bytes.fromhex(sha256_regular(p)))
            except OSError as exc:  # (one swapped since the lstat: a FIFO, a link) its change shows, unread
                h.update(f"unreadable:{exc.errno}".encode())
    return h.hexdigest()


@dataclass(frozen=True)
class TestRun:
    """One run of a fix's proof tests: pytest's exit code, its summary line and the end of its output."""

    rc: int
    summary: str
    output: str


def run_proof(python: str, folder: Path, cwd: Path, env: dict[str, str], timeout: int = 900) -> TestRun:
    """Run the proof tests in ``folder`` with ``python`` and ``env`` laid over the environment (without
    the caller's PYTHONPATH unless ``env`` sets one). Raises BadInputError when ``python`` cannot be run."""
    try:
        proc = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)],
                              capture_output=True, text=True, cwd=cwd, timeout=timeout,
                              env=_test_env(env))
    except OSError as exc:  # the interpreter went away (or never ran) between two proofs
        raise BadInputError(_no_interpreter(python, exc.strerror or str(exc))) from exc
    lines = [ln for ln in proc.stdout.splitlines() if re.search(r"\b(passed|failed|error|no tests ran)\b", ln)]
    summary = lines[-1].strip("= ") if lines else proc.stdout[-300:] + proc.stderr[-300:]
    return TestRun(proc.returncode, summary, (proc.stdout + proc.stderr)[-20000:])


def run_tests(python: str, folder: Path, cwd: Path, env: dict[str, str], timeout: int = 900) -> tuple[int, str]:
    """Run the proof tests in ``folder``; return (exit code, pytest's summary line)."""
    run = run_proof(python, folder, cwd, env, timeout)
    return run.rc, run.summary


def _timed(progress: Progress, what: str, python: str, folder: Path, cwd: Path,
           env: dict[str, str]) -> tuple[int, str]:
    start = time.monotonic()
    rc, summary = run_tests(python, folder, cwd, env)
    progress.note(f"{what}: rc={rc} {summary} ({time.monotonic() - start:.1f} s)")
    return rc, summary


def _test_env(extra: dict[str, str]) -> dict[str, str]:
    import os
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(extra)
    return env


def prove(pack_root: Path, profile: str, python: str, target: str | None = None, only: tuple[str, ...] = (),
          progress: Progress = QUIET) -> ProofRun:
    """Run the whole proof on the image of ``python``; the image is left as it was found.

    The image's site-packages is patched in place for the run (the whole profile, every opt-in) and
    reverted in ``finally``. ``only`` proves a subset of the fixes (the profile is still applied
    whole: a fix's proof runs on the image it ships in). ``progress`` hears a line per proof run.

    ``target`` defaults to the profile's one target with fixes. The proof tests run with the
    profile's ``[proof] env`` (e.g. offline switches for the target) added to the environment.
    Raises MismatchError when the image is not clean to start with (a fix already applied),
    BadInputError when the target is not named and the profile has fixes for several.
    """
    pack = load_pack(pack_root)
    prof = load_profile(pack, profile)
    if target is None:
        with_fixes = sorted({pack.fixes[f].target for f in prof.default + prof.opt_in})
        if len(with_fixes) != 1:
            raise BadInputError(f"profile {profile} has fixes for {', '.join(with_fixes) or 'no target'}: name the "
                                f"target to prove with --target")
        target = with_fixes[0]
    fixes = [f for f in pack.ordered(prof.default + prof.opt_in) if f.target == target]
    unknown = sorted(set(only) - {f.id for f in fixes})
    if unknown:
        raise BadInputError(f"not a fix of profile {profile} on {target}: {', '.join(unknown)} "
                            f"(its fixes: {', '.join(f.id for f in fixes)})")
    fixes = [f for f in fixes if not only or f.id in only]
    env = dict(prof.proof_env)
    root = site_packages(python)
    package = prof.target(target).package
    if not (root / package).is_dir():  # said here: the status below would name a --root the user never gave
        raise BadInputError(f"--python {python}: this Python has no {package} installed (its site-packages {root} "
                            f"holds no {package}/): give the image's Python, one with the release of profile "
                            f"{profile} installed (`bash tools/setup.sh` makes .venv so; `--light` does not)")
    check_pytest(python)
    req = Request(pack_root=pack_root, profile=profile, roots={target: root}, only_targets=(target,),
                  all_opt_in=True)
    st = status(req)  # the selection the proof applies: every opt-in
    if not st.ok:
        raise MismatchError(f"cannot prove on {root} ({python}): {st.error}")
    # what the proof does not apply (a component, unless named) is reported skipped: not the proof's concern
    dirty = [f for f in st.fixes if f.state not in (State.ABSENT, State.SKIPPED)]
    if dirty:
        raise MismatchError(f"the image at {root} is not clean: "
                            + ", ".join(f"{f.id}: {f.state.value}" for f in dirty)
                            + f"; revert it first (a proof killed before its revert leaves it so): "
                            f"{_revert_command(pack_root, profile, target, root)}")
    got: list[int] = []
    try:
        with signals(got):
            return _prove(req, python, fixes, package, env, progress, got)
    except (Term, FixpackError) as exc:  # a write SIGTERM cut rolled itself back and said so as for Ctrl-C
        if signal.SIGTERM not in got or isinstance(exc, Terminated):
            raise
        raise Terminated(f"terminated (SIGTERM) while proving on {root}; the image was left as it was found "
                         f"(what the proof had applied was reverted, every byte checked). Run again with more "
                         f"time") from None


def _revert_command(pack_root: Path, profile: str, target: str, root: Path) -> str:
    from .progname import command, run_words  # only when there is an image to revert

    return command("revert", "--profile", profile, "--pack", str(pack_root), *run_words((target,), {target: root}))


def _prove(req: Request, python: str, fixes: list[Fix], package: str, env: dict[str, str], progress: Progress,
           got: list[int]) -> ProofRun:
    """The proof once the image is found clean: clean runs, apply, patched runs, apply again, revert (in
    ``finally``, with SIGTERM and SIGINT held off until it is done: :func:`fixpack.interrupts.signals`)."""
    pack_root, profile, target = req.pack_root, req.profile, req.only_targets[0]
    root = req.roots[target]
    before = tree_digest(root, package)
    run = ProofRun([ProofResult(f.id) for f in fixes])
    for res, fix in zip(run.results, fixes):
        res.clean_rc, res.clean_summary = _timed(progress, f"{fix.id}: clean image", python, fix.folder, pack_root, env)
    try:
        with progress.step(f"applying profile {profile} to {root}"):
            applied = apply(req)
        if not applied.ok:
            raise ConflictError(f"the profile did not apply to {root}: {applied.error}")
        for res, fix in zip(run.results, fixes):
            res.patched_rc, res.patched_summary = _timed(progress, f"{fix.id}: patched image", python, fix.folder,
                                                         pack_root, env)
        after = tree_digest(root, package)
        progress.note("applying again (must write nothing), then reverting")
        again = apply(req)
        run.reapply_wrote_nothing = again.ok and all(f.action is Action.NONE for f in again.fixes) and \
            tree_digest(root, package) == after
    finally:
        held: list[int] = []
        with signals(held, deferred=True):
            reverted = revert(Request(pack_root=pack_root, profile=profile, roots={target: root},
                                      only_targets=(target,)))
            run.revert_restored_bytes = reverted.ok and tree_digest(root, package) == before
        if not run.revert_restored_bytes:
            why = reverted.error or "its bytes differ from the clean image's"
            run.notes.append(f"revert failed: {why}")
            if got or held:  # the run ends here: say how to finish the revert
                kind = Terminated if signal.SIGTERM in got + held else MismatchError
                raise kind(f"interrupted while proving on {root}, and the revert failed ({why}); the image is "
                           f"not clean: {_revert_command(pack_root, profile, target, root)}")
        got += held
        if signal.SIGTERM in held:
            raise Term()
        if signal.SIGINT in held:
            raise KeyboardInterrupt
    return run
