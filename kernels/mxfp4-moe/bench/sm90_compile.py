"""Shared by the offline compile checks (ranked_compile_check.py, gemm_sass_check.py): compile a Gluon kernel
for an NVIDIA target without a GPU, and read the cubin with the cuobjdump in Triton's wheel."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource


def compile_gluon(fn, ptrs: dict[str, str], ints: tuple[str, ...], consts: dict[str, object],
                  maxnreg: int | None, arch: int = 90, div16_extra: tuple[str, ...] = (), num_warps: int = 1):
    """``fn`` (a gluon.jit kernel) compiled for sm_``arch`` with ``num_warps`` warps (default one): ``ptrs`` names each pointer argument's
    type (16-byte aligned, as are the four strides that need it), ``ints`` the int32 ones, ``consts`` the
    constexprs (``div16_extra``: more int arguments to mark 16-divisible); ``maxnreg`` caps the registers (None: the compiler's choice)."""
    sig = {n: ptrs.get(n) or ("i32" if n in ints else "constexpr") for n in fn.arg_names}
    div16 = [n for n in fn.arg_names if n not in consts and (n in ptrs or n in ("stride_am", "stride_we", "stride_se",
                                                                               "stride_ym") or n in div16_extra)]
    src = GluonASTSource(fn=fn, signature=sig,
                         constexprs={(fn.arg_names.index(k),): v for k, v in consts.items()},
                         attrs={(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in div16})
    opts = {"num_warps": num_warps} | ({"maxnreg": maxnreg} if maxnreg else {})
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options=opts)


def cuobjdump(compiled, *flags: str) -> str:
    """What ``cuobjdump FLAGS`` prints for the compiled kernel's cubin (``-sass``, ``--dump-resource-usage``)."""
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        return subprocess.run([str(tool), *flags, f.name], capture_output=True, text=True).stdout
