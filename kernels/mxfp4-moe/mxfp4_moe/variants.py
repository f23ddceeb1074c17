"""Variant files (``variants/<name>``): the shapes the kernels are built and checked for."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# installed (fixpack's kernels component, pip): mxfp4_moe/variant_files/; from the checkout: variants/
_INSTALLED = Path(__file__).resolve().parent / "variant_files"
VARIANTS_DIR = _INSTALLED if _INSTALLED.is_dir() else Path(__file__).resolve().parent.parent / "variants"

_REQUIRED = ("hidden_size", "latent_size", "expert_size", "experts", "top_k")
_OPTIONAL = {"local_experts": None, "first_mxfp4_layer": 1, "last_mxfp4_layer": 1, "cards": 0, "tp_split": 1}


@dataclass(frozen=True)
class Variant:
    name: str
    hidden_size: int
    latent_size: int
    expert_size: int
    experts: int
    top_k: int
    local_experts: int
    first_mxfp4_layer: int
    last_mxfp4_layer: int
    cards: int = 0  # cards serving the experts (0: experts / local_experts, the EP-only figure)
    tp_split: int = 1  # the experts' TP split when served (MUSE_SPARK_MOE_TP_SPLIT): EP cards/tp_split x TP tp_split

    @property
    def served_routing(self) -> str:
        """The benchmark's routing name of the served split, e.g. "ep2tp4" (EP-only: "ep8")."""
        if self.tp_split == 1:
            return f"ep{self.cards}"
        return f"ep{self.cards // self.tp_split}tp{self.tp_split}"

    @property
    def expert_bytes(self) -> int:
        """Packed weights plus scales of one expert (w13 and w2)."""
        from .format import mxfp4_nbytes
        return (mxfp4_nbytes(2 * self.expert_size, self.latent_size)
                + mxfp4_nbytes(self.latent_size, self.expert_size))


def parse_variant(text: str, name: str = "?") -> Variant:
    values: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, sep, val = line.partition("=")
        key, val = key.strip(), val.strip()
        if not sep or not key or not val:
            raise ValueError(f"variant {name}, line {lineno}: expected 'key = integer', got {raw!r}")
        if key not in _REQUIRED and key not in _OPTIONAL:
            raise ValueError(f"variant {name}, line {lineno}: unknown key {key!r}")
        if key in values:
            raise ValueError(f"variant {name}, line {lineno}: {key} given twice")
        try:
            values[key] = int(val)
        except ValueError:
            raise ValueError(f"variant {name}, line {lineno}: {key} must be an integer, got {val!r}") from None
    missing = [k for k in _REQUIRED if k not in values]
    if missing:
        raise ValueError(f"variant {name}: missing {', '.join(missing)}")
    for key, default in _OPTIONAL.items():
        values.setdefault(key, values["experts"] if default is None else default)
    if not values["cards"] and values["local_experts"] and values["experts"] % values["local_experts"] == 0:
        values["cards"] = values["experts"] // values["local_experts"]
    v = Variant(name=name, **values)
    for key in ("latent_size", "expert_size"):
        if getattr(v, key) % 32:
            raise ValueError(f"variant {name}: {key} must be a multiple of 32 (one E8M0 scale per 32)")
    if not 1 <= v.top_k <= v.experts or v.experts % v.local_experts:
        raise ValueError(f"variant {name}: need 1 <= top_k <= experts and experts divisible by local_experts")
    t = v.tp_split
    if t < 1 or v.cards % t or v.experts % (v.cards // t) or v.expert_size % (32 * t):
        raise ValueError(f"variant {name}: tp_split {t} must divide cards ({v.cards}), the EP size must divide "
                         f"the experts and the expert size must split into whole 32-element blocks")
    return v


def split_routing(name: str) -> tuple[int, int] | None:
    """"ep2tp4" -> (2, 4), "ep8" -> (8, 1); None for another name (e.g. "local")."""
    import re
    m = re.fullmatch(r"ep(\d+)(?:tp(\d+))?", name)
    return (int(m.group(1)), int(m.group(2) or 1)) if m else None


def load_variant(name_or_path: str) -> Variant:
    path = Path(name_or_path)
    if not path.is_file():
        path = VARIANTS_DIR / name_or_path
    if not path.is_file():
        known = sorted(p.name for p in VARIANTS_DIR.iterdir() if p.is_file())
        raise FileNotFoundError(f"no variant {name_or_path!r} (known: {', '.join(known)})")
    return parse_variant(path.read_text(), path.name)
