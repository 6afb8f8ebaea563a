"""An independent reference forward of the DeepSeek-V3 architecture in PyTorch.

Written from the published architecture (the DeepSeek-V2 and V3 technical reports:
multi-head latent attention with a decoupled rotary key, DeepSeekMoE with shared
experts and auxiliary-loss-free sigmoid routing over expert groups, YaRN), reading the
checkpoint format that Hugging Face `DeepseekV3ForCausalLM` checkpoints use: config.json
plus safetensors (one file or shards with model.safetensors.index.json), BF16/F32 or
F8_E4M3 with 128 x 128 block `weight_scale_inv`.

Everything is computed in float64 in the textbook (expanded) form over the whole
sequence at once: no latent cache, no absorbed projections; that is the point of it.

Test tooling only; used by compare_deepseek.py.
"""

import json
import math
import os
import struct

import torch

_DTYPES = {
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "F64": torch.float64,
}


def _read_safetensors(path):
    """All tensors of one safetensors file, as float64 or uint8 (F8_E4M3 codes)."""
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = bytearray(data[begin:end])
        shape = info["shape"]
        if info["dtype"] == "F8_E4M3":
            codes = torch.frombuffer(raw, dtype=torch.uint8).clone().reshape(shape)
            tensors[name] = ("f8", codes)
        else:
            t = torch.frombuffer(raw, dtype=_DTYPES[info["dtype"]]).clone().reshape(shape)
            tensors[name] = ("float", t.to(torch.float64))
    return tensors


def _e4m3_to_float(codes):
    """OCP FP8 E4M3FN: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits, no infinity."""
    c = codes.to(torch.int64)
    sign = torch.where((c & 0x80) != 0, -1.0, 1.0).to(torch.float64)
    exp = (c >> 3) & 0xF
    man = (c & 0x7).to(torch.float64)
    normal = (1.0 + man / 8.0) * torch.pow(2.0, (exp - 7).to(torch.float64))
    subnormal = (man / 8.0) * (2.0 ** -6)
    value = torch.where(exp == 0, subnormal, normal) * sign
    nan = (exp == 0xF) & ((c & 0x7) == 0x7)
    return torch.where(nan, torch.full_like(value, float("nan")), value)


def load_checkpoint(model_dir):
    """name -> float64 tensor, FP8 weights dequantized with their block scales."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    raw = {}
    for name in files:
        raw.update(_read_safetensors(os.path.join(model_dir, name)))
    out = {}
    for name, (kind, t) in raw.items():
        if name.endswith("_scale_inv"):
            continue
        if kind == "f8":
            scale = raw[name + "_scale_inv"][1]
            rows, cols = t.shape
            # Each 128 x 128 block (edge blocks partial) has one scale.
            full = scale.repeat_interleave(128, 0)[:rows].repeat_interleave(128, 1)[:, :cols]
            # f32 product, as the checkpoint's own dequantization computes it.
            out[name] = (_e4m3_to_float(t).to(torch.float32) * full.to(torch.float32)).to(
                torch.float64)
        else:
            out[name] = t
    return out


def _rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _yarn_mscale(factor, m):
    return 1.0 if factor <= 1.0 else 0.1 * m * math.log(factor) + 1.0


def rope_tables(cfg, positions):
    """cos, sin [T, rope_dim / 2] and the softmax scale of the attention."""
    dim = cfg["qk_rope_head_dim"]
    base = cfg.get("rope_theta", 10000.0)
    freqs = 1.0 / base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    qk_head_dim = cfg["qk_nope_head_dim"] + dim
    scale = qk_head_dim ** -0.5
    magnitude = 1.0
    rs = cfg.get("rope_scaling")
    if rs and (rs.get("type") or rs.get("rope_type")) == "yarn":
        factor = float(rs["factor"])
        original = rs.get("original_max_position_embeddings", cfg["max_position_embeddings"])
        beta_fast = rs.get("beta_fast", 32)
        beta_slow = rs.get("beta_slow", 1)
        mscale = rs.get("mscale", 1.0)
        mscale_all_dim = rs.get("mscale_all_dim", 0.0)

        def dim_of(rotations):  # the dimension turning `rotations` times over `original`
            return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

        low = max(math.floor(dim_of(beta_fast)), 0)
        high = min(math.ceil(dim_of(beta_slow)), dim - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        freqs = freqs / factor * ramp + freqs * (1 - ramp)
        magnitude = _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all_dim)
        scale = scale * _yarn_mscale(factor, mscale_all_dim) ** 2
    angles = positions.to(torch.float64)[:, None] * freqs[None, :]
    return torch.cos(angles) * magnitude, torch.sin(angles) * magnitude, scale


def rotate(x, cos, sin):
    """Rotary embedding over adjacent pairs (2i, 2i + 1) of the last dimension."""
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    a, b = pairs[..., 0], pairs[..., 1]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).reshape(x.shape)


def route(cfg, logits, bias):
    """Expert ids [T, k] and their weights [T, k] (DeepSeek-V3's routing)."""
    if cfg.get("scoring_func", "sigmoid") == "sigmoid":
        scores = torch.sigmoid(logits)
    else:
        scores = torch.softmax(logits, dim=-1)
    choice = scores + bias[None, :]
    t, n = choice.shape
    groups = cfg["n_group"]
    per_group = n // groups
    grouped = choice.reshape(t, groups, per_group)
    group_scores = grouped.topk(min(2, per_group), dim=-1).values.sum(-1)
    best_groups = group_scores.topk(cfg["topk_group"], dim=-1).indices
    allowed = torch.zeros(t, groups, dtype=torch.bool)
    allowed.scatter_(1, best_groups, True)
    allowed = allowed[:, :, None].expand(t, groups, per_group).reshape(t, n)
    masked = choice.masked_fill(~allowed, float("-inf"))
    ids = masked.topk(cfg["num_experts_per_tok"], dim=-1).indices
    weights = scores.gather(1, ids)
    if cfg.get("norm_topk_prob", True):
        weights = weights / weights.sum(-1, keepdim=True)
    return ids, weights * cfg.get("routed_scaling_factor", 2.5)


def _swiglu(w, prefix, x):
    gate = x @ w[prefix + "gate_proj.weight"].T
    up = x @ w[prefix + "up_proj.weight"].T
    return (torch.nn.functional.silu(gate) * up) @ w[prefix + "down_proj.weight"].T


def forward(cfg, w, tokens):
    """Logits [T, vocab] (float64) of one sequence, positions 0..T-1."""
    eps = cfg.get("rms_norm_eps", 1e-6)
    heads = cfg["num_attention_heads"]
    nope, rope_dim = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"]
    vdim, lora = cfg["v_head_dim"], cfg["kv_lora_rank"]
    t = len(tokens)
    cos, sin, scale = rope_tables(cfg, torch.arange(t))
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    h = w["model.embed_tokens.weight"][torch.tensor(tokens)]
    routed = cfg.get("n_routed_experts")
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        x = _rms_norm(h, w[p + "input_layernorm.weight"], eps)
        # Queries, directly or through the low-rank path.
        if cfg.get("q_lora_rank"):
            cq = _rms_norm(x @ w[p + "self_attn.q_a_proj.weight"].T,
                           w[p + "self_attn.q_a_layernorm.weight"], eps)
            q = cq @ w[p + "self_attn.q_b_proj.weight"].T
        else:
            q = x @ w[p + "self_attn.q_proj.weight"].T
        q = q.reshape(t, heads, nope + rope_dim)
        q_nope, q_pe = q[..., :nope], rotate(q[..., nope:], cos[:, None, :], sin[:, None, :])
        # Keys and values from the compressed vector; the rotary key is shared by heads.
        kv = x @ w[p + "self_attn.kv_a_proj_with_mqa.weight"].T
        c = _rms_norm(kv[:, :lora], w[p + "self_attn.kv_a_layernorm.weight"], eps)
        k_pe = rotate(kv[:, lora:], cos, sin)
        up = (c @ w[p + "self_attn.kv_b_proj.weight"].T).reshape(t, heads, nope + vdim)
        k_nope, v = up[..., :nope], up[..., nope:]
        scores = (torch.einsum("qhd,khd->hqk", q_nope, k_nope) +
                  torch.einsum("qhd,kd->hqk", q_pe, k_pe)) * scale
        scores = scores.masked_fill(~causal[None], float("-inf"))
        attn = torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v)
        h = h + attn.reshape(t, heads * vdim) @ w[p + "self_attn.o_proj.weight"].T
        x = _rms_norm(h, w[p + "post_attention_layernorm.weight"], eps)
        moe = (routed is not None and i >= cfg.get("first_k_dense_replace", 3) and
               i % cfg.get("moe_layer_freq", 1) == 0)
        if not moe:
            h = h + _swiglu(w, p + "mlp.", x)
            continue
        logits = x @ w[p + "mlp.gate.weight"].T
        ids, weights = route(cfg, logits, w[p + "mlp.gate.e_score_correction_bias"])
        out = torch.zeros_like(x)
        for row in range(t):
            for j in range(ids.shape[1]):
                e = int(ids[row, j])
                out[row] += weights[row, j] * _swiglu(w, p + f"mlp.experts.{e}.", x[row:row + 1])[0]
        if cfg.get("n_shared_experts", 1):
            out = out + _swiglu(w, p + "mlp.shared_experts.", x)
        h = h + out
    h = _rms_norm(h, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return h @ head.T
