"""The serving recipe (recipes/<org>/<model>/recipe.yaml): load, check, render the launch command.

    python -m muse_spark_open.recipe check  RECIPE [--repo DIR]
    python -m muse_spark_open.recipe launch RECIPE      # prints the environment and `vllm serve ...`
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

REQUIRED = ("model", "hardware", "image", "precision", "context", "concurrency", "parsers", "environment", "launch")


def load(path: str | Path) -> dict[str, Any]:
    import yaml

    data = yaml.safe_load(Path(path).read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a mapping")
    return data


def arg_value(args: list[str], flag: str) -> str | None:
    """The value of ``--flag=value`` or ``--flag value`` in a launch argument list."""
    for i, a in enumerate(args):
        if a == flag:
            return args[i + 1] if i + 1 < len(args) else ""
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def has_flag(args: list[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in args)


def check(recipe: dict[str, Any], repo: Path | None = None) -> list[str]:
    """Problems with the recipe (empty when it is consistent with itself, the port and the pack)."""
    from . import env
    from .config import MuseSparkTextConfig
    from .guard import ARCH

    p: list[str] = []
    missing = [k for k in REQUIRED if k not in recipe]
    if missing:
        return [f"missing sections: {', '.join(missing)}"]
    m, ctx, conc, par = recipe["model"], recipe["context"], recipe["concurrency"], recipe.get("parallelism", {})
    args = [str(a) for a in recipe["launch"].get("args", [])]
    envv = {str(k): str(v) for k, v in recipe["environment"].items()}

    if m.get("architecture") != ARCH:
        p.append(f"model.architecture {m.get('architecture')!r} is not {ARCH}")
    if not args or args[0] != m.get("id"):
        p.append("launch.args must start with the model id")
    d = MuseSparkTextConfig()
    for key, want in (("layers", d.num_hidden_layers), ("global_layers", d.num_global_layers),
                      ("experts", d.num_experts), ("vocab_size", d.vocab_size)):
        if m.get(key) != want:
            p.append(f"model.{key} {m.get(key)} differs from the port's {want}")
    if ctx.get("native_context") != d.max_position_embeddings:
        p.append("context.native_context differs from the config's max_position_embeddings")
    if not has_flag(args, "--language-model-only"):
        p.append("launch.args lack --language-model-only (the server refuses to start without it)")

    flags = {
        "--max-model-len": ctx.get("max_model_len"),
        "--block-size": ctx.get("block_size"),
        "--num-gpu-blocks-override": ctx.get("kv_pool_blocks"),
        "--max-num-seqs": conc.get("max_num_seqs"),
        "--max-num-batched-tokens": conc.get("max_num_batched_tokens"),
        "--tensor-parallel-size": par.get("tensor_parallel_size", recipe["hardware"].get("cards")),
        "--reasoning-parser": recipe["parsers"].get("reasoning"),
        "--tool-call-parser": recipe["parsers"].get("tool"),
    }
    for flag, want in flags.items():
        got = arg_value(args, flag)
        if got is None or str(got) != str(want):
            p.append(f"launch {flag}={got} but the recipe says {want}")
    if recipe["parsers"].get("enable_auto_tool_choice") and not has_flag(args, "--enable-auto-tool-choice"):
        p.append("parsers.enable_auto_tool_choice without --enable-auto-tool-choice")
    if recipe["hardware"].get("cards") != par.get("tensor_parallel_size", recipe["hardware"].get("cards")):
        p.append("tensor_parallel_size differs from the card count")
    p += _check_expert_split(par, envv)

    try:
        env.read_all({k: v for k, v in envv.items() if k.startswith(env.PREFIX)})
    except env.SwitchError as e:
        p.append(f"environment: {e}")

    if repo is not None:
        p += _check_against_repo(recipe, repo, envv)
    return p


def _check_expert_split(par: dict[str, Any], envv: dict[str, str]) -> list[str]:
    """The experts' split (parallelism.expert_parallel x expert_tensor_parallel, default EP over the whole
    tensor-parallel group) must cover the group and be the one MUSE_SPARK_MOE_TP_SPLIT makes the port load."""
    tp = par.get("tensor_parallel_size")
    etp = par.get("expert_tensor_parallel", 1)
    ep = par.get("expert_parallel", tp)
    if tp is None:
        return []
    p: list[str] = []
    if not isinstance(ep, int) or not isinstance(etp, int) or ep * etp != tp:
        p.append(f"parallelism: expert_parallel {ep} x expert_tensor_parallel {etp} is not the "
                 f"tensor_parallel_size {tp}")
    split = envv.get("MUSE_SPARK_MOE_TP_SPLIT", "1")
    if split != str(etp):
        p.append(f"environment MUSE_SPARK_MOE_TP_SPLIT={split} but parallelism.expert_tensor_parallel is {etp} "
                 f"(set MUSE_SPARK_MOE_TP_SPLIT: \"{etp}\")")
    return p


def _check_against_repo(recipe: dict[str, Any], repo: Path, envv: dict[str, str]) -> list[str]:
    from . import buckets as bk

    tomllib = _toml()
    p: list[str] = []
    img, ctx, conc = recipe["image"], recipe["context"], recipe["concurrency"]
    prof_path = repo / "profiles" / f"{img.get('profile')}.toml"
    if not prof_path.is_file():
        return [f"image.profile {img.get('profile')!r}: no {prof_path}"]
    prof = tomllib.loads(prof_path.read_text())
    for opt in img.get("opt_in_fixes", []):
        if opt not in prof["fixes"]["opt_in"]:
            p.append(f"opt-in fix {opt!r} is not an opt-in of profile {img['profile']}")
    for name, pin in (img.get("pins") or {}).items():
        t = prof["targets"].get(name)
        if t is None:
            p.append(f"pin for {name}: not a target of the profile")
            continue
        for key in ("version", "commit", "branch"):
            if key in pin and str(pin[key]) != str(t.get(key)):
                p.append(f"pin {name}.{key} {pin[key]} differs from the profile's {t.get(key)}")
    for rel in (img.get("dockerfile"), conc.get("buckets"), recipe.get("gates", {}).get("runner"),
                recipe.get("gates", {}).get("thresholds")):
        if rel and not (repo / rel).exists():
            p.append(f"{rel}: no such file in the checkout")
    if envv.get("VLLM_BUCKETING_FROM_FILE") != conc.get("buckets"):
        p.append("VLLM_BUCKETING_FROM_FILE is not the recipe's bucket file")
    # the long-prefill switches are those the fix documents for the recipe
    fix = repo / "fixes" / "vllm-long-prefill-share" / "fix.toml"
    if "vllm-long-prefill-share" in img.get("opt_in_fixes", []) and fix.is_file():
        doc = tomllib.loads(fix.read_text()).get("env", {})
        for k, text in doc.items():
            want = text.rsplit("recipe:", 1)[-1].strip() if "recipe:" in text else None
            if want is not None and envv.get(k) != want:
                p.append(f"{k}={envv.get(k)} but {fix.relative_to(repo)} gives the recipe value {want}")
    if conc.get("buckets") and (repo / conc["buckets"]).is_file():
        bf = bk.parse_file(repo / conc["buckets"])
        for key, want in (("max_model_len", ctx.get("max_model_len")), ("block_size", ctx.get("block_size")),
                          ("max_num_seqs", conc.get("max_num_seqs")), ("pool_blocks", ctx.get("kv_pool_blocks")),
                          ("max_num_batched_tokens", conc.get("max_num_batched_tokens"))):
            if bf.checks.get(key) != want:
                p.append(f"bucket file says {key}={bf.checks.get(key)}, the recipe {want}")
        if max(b for b, _, _ in bf.decode) != conc.get("max_num_seqs"):
            p.append("the largest decode batch bucket is not max_num_seqs")
    return p


def _toml() -> Any:
    """tomllib (3.11+), else tomli, else the copy pip vendors (Python 3.10 images)."""
    for name in ("tomllib", "tomli", "pip._vendor.tomli"):
        try:
            return __import__(name, fromlist=["loads"])
        except ImportError:
            continue
    raise ImportError("no TOML reader: Python 3.11+, or pip install tomli")


def launch_lines(recipe: dict[str, Any]) -> list[str]:
    envv = recipe["environment"]
    lines = [f"export {k}={shlex.quote(str(v))}" for k, v in envv.items()]
    cmd = recipe["launch"]["command"].split() + [str(a) for a in recipe["launch"]["args"]]
    lines.append(" ".join(shlex.quote(c) for c in cmd))
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=("check", "launch"))
    ap.add_argument("recipe")
    ap.add_argument("--repo", help="the fix pack's checkout (checks pins, files, fixes)")
    a = ap.parse_args(argv)
    recipe = load(a.recipe)
    if a.command == "launch":
        print("\n".join(launch_lines(recipe)))
        return 0
    problems = check(recipe, Path(a.repo) if a.repo else None)
    for pr in problems:
        print(f"recipe: {pr}")
    print("recipe: ok" if not problems else f"recipe: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
