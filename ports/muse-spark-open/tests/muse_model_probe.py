"""Build the vLLM model on CPU from a tiny checkpoint and compare it with the CPU reference.

Run in its own process by test_muse_model.py (vLLM's distributed state and default dtype stay
there). The stand-in image has no vllm._C, so three CPU kernels are replaced by plain PyTorch:
the unquantized GEMM shim, the rotary embedding's native path, and the attention kernel (by the
reference's causal/sliding-window softmax). Everything else is the model as served.
"""

import json
import socket
import sys

import torch
import torch.nn.functional as F

from muse_spark_open.plugin import register

register()
ckpt = sys.argv[1]
out: dict = {}

from vllm.config import set_current_vllm_config  # noqa: E402
from vllm.distributed import init_distributed_environment, initialize_model_parallel  # noqa: E402
from vllm.engine.arg_utils import EngineArgs  # noqa: E402

try:
    EngineArgs(model=ckpt, skip_tokenizer_init=True, max_model_len=256, dtype="bfloat16", enforce_eager=True).create_engine_config()
    out["refused"] = None
except Exception as e:  # pydantic wraps the ValueError
    out["refused"] = str(e)

cfg = EngineArgs(model=ckpt, skip_tokenizer_init=True, language_model_only=True, max_model_len=256,
                 dtype="bfloat16", enforce_eager=True).create_engine_config()
mm = cfg.model_config.multimodal_config
from vllm.model_executor.model_loader.utils import get_model_architecture  # noqa: E402

out["model_cls"] = get_model_architecture(cfg.model_config)[0].__module__  # what vLLM would build
out["config"] = [cfg.model_config.architecture, cfg.model_config.is_multimodal_model, bool(mm and mm.language_model_only)]

s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
with set_current_vllm_config(cfg):
    init_distributed_environment(world_size=1, rank=0, distributed_init_method=f"tcp://127.0.0.1:{port}", local_rank=0, backend="gloo")
    initialize_model_parallel(1, 1)
    torch.set_default_dtype(torch.bfloat16)
    from muse_spark_open.model import MuseSparkForConditionalGeneration
    from muse_spark_open.reference import MuseSparkReference, _open_tensors, attention_mask

    model = MuseSparkForConditionalGeneration(vllm_config=cfg, prefix="")
    loaded = model.load_weights(_open_tensors(__import__("pathlib").Path(ckpt)).items())
    out["unloaded"] = sorted({n for n, _ in model.named_parameters()} - loaded)
    out["skipped_towers"] = model.skipped_tower_tensors
    out["mxfp4_layers"] = [layer.mlp.mxfp4 for layer in model.model.layers]

    from vllm.model_executor.layers.linear import LinearBase
    from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding

    for mod in model.modules():
        if isinstance(mod, (LinearBase, VocabParallelEmbedding)):
            mod.cpu_linear = lambda x, w, b=None: F.linear(x, w, b)
        if type(mod).__name__.endswith("RotaryEmbedding"):
            mod._forward_method = mod.forward_native
    ref = MuseSparkReference.from_checkpoint(ckpt, dtype=torch.float32)

    class StandInAttention(torch.nn.Module):
        def __init__(self, nh, nkv, hd, window):
            super().__init__()
            self.nh, self.nkv, self.hd, self.window = nh, nkv, hd, window

        def forward(self, q, k, v):
            t = q.shape[0]
            q, k, v = (x.view(t, -1, self.hd).float() for x in (q, k, v))
            k, v = (x.repeat_interleave(self.nh // self.nkv, 1) for x in (k, v))
            sc = torch.einsum("qhd,khd->hqk", q, k) * self.hd**-0.5
            sc = sc.masked_fill(~attention_mask(t, self.window), float("-inf"))
            return torch.einsum("hqk,khd->qhd", sc.softmax(-1), v).reshape(t, -1)

    for layer in model.model.layers:
        a = layer.self_attn
        # the window vLLM's Attention of this layer was built with (None: full-length), not the reference's
        a.attn = StandInAttention(a.num_heads, a.num_kv_heads, a.head_dim, a.attn.sliding_window)
    # compare in float32: cast the loaded model (uint8 experts stay packed) and its rope cache
    model.float()
    for mod in model.modules():
        if type(mod).__name__.endswith("RotaryEmbedding"):
            mod.cos_sin_cache = mod._compute_cos_sin_cache().float()
    model.logits_processor.head_dtype = torch.float32
    ids = [1, 5, 9, 33, 2, 7, 70, 11, 12, 40, 41, 3]
    with torch.no_grad():
        logits = model.compute_logits(model(torch.tensor(ids), torch.arange(len(ids)))).float()
    want = ref.forward(ids)
    out["max_abs_diff"] = (logits - want).abs().max().item()
    out["argmax_equal"] = bool(torch.equal(logits.argmax(-1), want.argmax(-1)))
print("PROBE " + json.dumps(out))
