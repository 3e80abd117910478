"""evoattn as a transformers (5.x) attention implementation, on a small Llama-style model with
grouped-query attention and random weights (nothing is downloaded).

    python3 transformers_llama.py [--batch 2] [--seq 1024] [--dtype bf16] [--iters 20]

What it does:
  * `register()` adds "evoattn" to transformers' AttentionInterface (the attention call) and to
    its AttentionMaskInterface (the mask builder). Both are needed: for a name that has no mask
    builder, transformers' `create_causal_mask` returns None without looking at the 2-D
    attention_mask, so padding would be dropped silently.
  * `compare()` runs the same weights and the same tokens through "sdpa" and "evoattn" (one
    model, switched with `model.set_attn_implementation`) and through an fp32 "sdpa" copy of the
    same (rounded) weights as the reference; checks the logits of the prefill and of a KV-cache
    decode (one query against a growing key cache: the bottom-right causal alignment); greedy
    `generate` with both; that a padded batch is refused; and times the prefill.

Exit status 0 when every check holds, 1 otherwise. A GPU test can import it:

    from transformers_llama import register, build_model, compare
    result = compare(batch=1, seq=256, iters=3)
    assert result["ok"], result

evoattn computes the forward pass only (no backward, no dropout) and has no per-token mask: the
attention function below refuses, with ValueError and a reason, whatever it cannot compute
exactly (padding, a pre-allocated StaticCache, sliding windows, packed sequences, attention
probabilities, dropout, float32 activations) instead of falling back to another implementation.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from typing import Any, Optional

import evoattn
import torch
import transformers
from transformers import AttentionInterface, AutoModelForCausalLM, LlamaConfig
from transformers.masking_utils import (
    AttentionMaskInterface,
    bidirectional_mask_function,
    causal_mask_function,
    prepare_padding_mask,
    sdpa_mask,
)

NAME = "evoattn"

# Checks: ours must be within TOL_FACTOR x sdpa's own error, plus ATOL_REL x the logits' scale.
# Why: both runs share every op but attention, so sdpa-bf16's distance to an fp32 sdpa run of the
# same rounded weights measures the rounding the whole bf16/fp16 model incurs; a correct fused
# kernel rounds differently but no worse (fp32 accumulation, P rounded to the input dtype, as
# FlashAttention does), so its distance should be about the same. 2x leaves room for a different
# rounding path; a real fault (wrong mask alignment, scale or GQA head mapping) moves the logits
# by O(their scale), far beyond. The absolute term only keeps a near-exact sdpa from setting an
# impossibly tight bar.
TOL_FACTOR = 2.0
ATOL_REL = 1e-3

# Random init: every weight N(0, 0.02) (Llama's initializer_range), except q_proj and k_proj,
# drawn so that the attention scores q.k*scale have a standard deviation of about QK_SCORE_STD.
# With 0.02 everywhere the scores' spread is ~0.4: attention is nearly uniform over the visible
# keys, so a wrong scale (or a near miss of the mask) would hardly move the logits. With a spread
# of ~2.5 each row's softmax is peaked but not one-hot. (score std ~ std^2 * hidden, for any D.)
INIT_STD = 0.02
QK_SCORE_STD = 2.5

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
_UNSUPPORTED_KWARGS = ("sliding_window", "softcap", "s_aux", "position_bias", "cu_seq_lens_q", "cu_seq_lens_k")


# --------------------------------------------------------------------------------------------
# The attention function and the mask builder transformers calls for attn_implementation="evoattn"
# --------------------------------------------------------------------------------------------


def _plain_reason(q_length, kv_length, q_offset, kv_offset, mask_function, attention_mask) -> Optional[str]:
    """None when the mask transformers asks for is a plain pattern evoattn computes without a mask
    tensor (causal aligned bottom-right, or full), else why not."""
    if mask_function is causal_mask_function:
        # causal_mask_function(q + q_offset, kv + kv_offset) is `kv + kv_offset <= q + q_offset`:
        # bottom-right (key j visible to query i iff j <= i + Sk - Sq) exactly when the last
        # query and the last key are the same position. A DynamicCache (or no cache) gives that;
        # a StaticCache gives kv_length = max_cache_len, its unused slots masked by padding.
        if int(q_offset) - int(kv_offset) != kv_length - q_length:
            return (
                f"the keys do not end at the last query (q_length={q_length}, kv_length={kv_length}, "
                f"q_offset={int(q_offset)}, kv_offset={int(kv_offset)}): a pre-allocated cache such as "
                "StaticCache, whose unused slots must be masked; use the default DynamicCache"
            )
    elif mask_function is not bidirectional_mask_function:
        return (
            "the mask is not plain causal or full (a sliding window, chunked attention, packed "
            "sequences, or a mask function the model adds)"
        )
    if attention_mask is not None:
        padding = prepare_padding_mask(attention_mask, kv_length, kv_offset)[:, kv_offset : kv_offset + kv_length]
        if not bool(padding.all()):
            return (
                "attention_mask masks some tokens (padding): evoattn has no per-token mask; pass "
                "sequences of one length unpadded (or batch them by length)"
            )
    return None


def evoattn_mask(
    batch_size: int,
    q_length: int,
    kv_length: int,
    q_offset: Any = 0,
    kv_offset: int = 0,
    mask_function=causal_mask_function,
    attention_mask: Optional[torch.Tensor] = None,
    allow_is_causal_skip: bool = True,
    allow_is_bidirectional_skip: bool = False,
    **kwargs,
) -> Optional[torch.Tensor]:
    """The mask builder registered under "evoattn" (AttentionMaskInterface's signature, as
    `sdpa_mask`). Returns None when the mask is a plain pattern (the attention function then
    takes it from the module's causality: bottom-right causal, or none). Otherwise, or where the
    caller asks for a materialized mask (`allow_*_skip=False`, e.g. a compileable cache), it
    returns sdpa's boolean [B, 1, Sq, Sk] mask, which the attention function accepts only if it
    is one of the plain patterns and refuses otherwise, with the reason found here."""
    reason = _plain_reason(q_length, kv_length, q_offset, kv_offset, mask_function, attention_mask)
    skip = allow_is_causal_skip if mask_function is causal_mask_function else allow_is_bidirectional_skip
    if reason is None and skip:
        return None
    mask = sdpa_mask(
        batch_size=batch_size,
        q_length=q_length,
        kv_length=kv_length,
        q_offset=q_offset,
        kv_offset=kv_offset,
        mask_function=mask_function,
        attention_mask=attention_mask,
        allow_is_causal_skip=False,
        allow_is_bidirectional_skip=False,
        **kwargs,
    )
    if reason is not None and mask is not None:
        mask._evoattn_reason = reason  # read back by the attention function's error message
    return mask


def _mask_pattern(mask: torch.Tensor, sq: int, sk: int) -> Optional[str]:
    """Which plain pattern a 4-D mask tensor is, for every batch row and head: "none",
    "bottom-right" or "top-left"; None if it is none of them. Boolean masks: True = visible.
    Float (additive) masks: 0 = visible, <= -1e4 (finfo.min, -inf) = hidden; any other value is a
    bias, not a mask. Costs a comparison on the GPU and a sync: only non-plain paths get here."""
    if mask.dim() != 4 or tuple(mask.shape[-2:]) != (sq, sk):
        return None
    if mask.dtype == torch.bool:
        visible = mask
    elif mask.is_floating_point():
        visible = mask == 0
        if not bool((visible | (mask <= -1e4)).all()):
            return None
    else:
        return None
    i = torch.arange(sq, device=mask.device)[:, None]
    j = torch.arange(sk, device=mask.device)[None, :]
    if bool(visible.all()):
        return "none"
    if bool((visible == (j <= i + (sk - sq))).all()):
        return "bottom-right"
    if bool((visible == (j <= i)).all()):
        return "top-left"
    return None


def evoattn_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Optional[torch.Tensor],
    dropout: float = 0.0,
    scaling: Optional[float] = None,
    is_causal: Optional[bool] = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature (as `sdpa_attention_forward`): query
    [B, H, Sq, D], key and value [B, Hkv, Sk, D] with Hkv = num_key_value_heads (transformers
    does not repeat them: evoattn takes GQA as is); returns ([B, Sq, H, D] contiguous, None)."""
    if kwargs.get("output_attentions", False):
        raise ValueError(
            "evoattn: output_attentions=True: the attention probabilities are never materialized; use 'eager'"
        )
    if dropout:
        raise ValueError(
            f"evoattn: attention dropout {dropout} (the model is in training mode with attention_dropout > 0): "
            "evoattn has no dropout; call model.eval() or set attention_dropout=0"
        )
    for name in _UNSUPPORTED_KWARGS:
        value_ = kwargs.get(name)
        if value_ is not None and not (name == "softcap" and value_ == 0):
            raise ValueError(f"evoattn: {name} is not supported (the model passed {name}={value_!r})")
    if query.dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(
            f"evoattn: attention in {query.dtype}: evoattn computes in float16 or bfloat16; "
            "load the model with dtype=torch.bfloat16 (or float16)"
        )
    sq, sk = query.shape[2], key.shape[2]
    if attention_mask is None:
        # As sdpa_attention_forward: the is_causal kwarg wins over the module's flag. With no mask
        # tensor, our mask builder has checked that the keys end at the last query, so "causal"
        # is bottom-right: a prefill (Sq == Sk, where it equals top-left), a KV-cache decode step
        # (Sq == 1: every cached key visible) and a chunked prefill (Sq < Sk) alike.
        causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
        if causal and sk < sq:
            raise ValueError(f"evoattn: causal attention with fewer keys ({sk}) than queries ({sq})")
        mode: Any = "bottom-right" if causal else False
    else:
        mode = _mask_pattern(attention_mask, sq, sk)
        if mode is None:
            reason = getattr(attention_mask, "_evoattn_reason", None) or (
                "it is not a plain causal or full mask (padding, a pre-allocated cache's unused "
                "slots, a sliding window, packed sequences, or a custom 4-D mask or bias)"
            )
            raise ValueError(f"evoattn: cannot apply this attention mask: {reason}")
        if mode == "none":
            mode = False
    o = evoattn.attention(query, key, value, causal=mode, scale=scaling)
    # o is laid out like query (which may already be a [B, S, H, D] buffer seen through a
    # transpose): .contiguous() is then free. Llama reshapes (copying if needed) but some models
    # call .view() on the result, so return what sdpa and eager return: a contiguous tensor.
    return o.transpose(1, 2).contiguous(), None


def register(name: str = NAME) -> str:
    """Registers the attention function and its mask builder under `name` (process-wide;
    idempotent) and returns the name, for `attn_implementation=name`."""
    AttentionInterface.register(name, evoattn_attention_forward)
    AttentionMaskInterface.register(name, evoattn_mask)
    return name


# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------


def make_config(head_dim: int = 64) -> LlamaConfig:
    """A small Llama with GQA: 1024 hidden, 8 layers, 16 query heads sharing 4 KV heads."""
    return LlamaConfig(
        vocab_size=32000,
        hidden_size=1024,
        intermediate_size=2816,
        num_hidden_layers=8,
        num_attention_heads=16,
        num_key_value_heads=4,
        head_dim=head_dim,
        max_position_embeddings=4096,
        rms_norm_eps=1e-5,
        attention_dropout=0.0,
        tie_word_embeddings=False,
        # No special tokens: greedy generation runs its full length (no stop at a random EOS).
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )


def _fill_weights(model: torch.nn.Module, seed: int, weights_dtype: torch.dtype) -> None:
    """Overwrites every parameter from one CPU generator (sorted names: independent of the
    construction order and of transformers' own init), rounded through weights_dtype."""
    gen = torch.Generator().manual_seed(seed)
    qk_std = math.sqrt(QK_SCORE_STD / model.config.hidden_size)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda item: item[0]):
            if name.endswith("norm.weight"):
                w = torch.ones(p.shape)
            elif name.endswith(".bias"):
                w = torch.zeros(p.shape)
            elif ".q_proj." in name or ".k_proj." in name:
                w = torch.randn(p.shape, generator=gen) * qk_std
            else:
                w = torch.randn(p.shape, generator=gen) * INIT_STD
            p.copy_(w.to(weights_dtype))


def build_model(
    attn_implementation: str,
    dtype: torch.dtype = torch.bfloat16,
    seed: int = 0,
    *,
    weights_dtype: Optional[torch.dtype] = None,
    head_dim: int = 64,
    device: str = "cuda",
) -> torch.nn.Module:
    """The Llama of make_config() with seeded random weights, on `device`, in eval mode.
    Weights are rounded to `weights_dtype` (default `dtype`) then stored in `dtype`: an fp32
    model with weights_dtype=bf16 holds exactly the bf16 model's weights."""
    if attn_implementation == NAME:
        register()
    model = AutoModelForCausalLM.from_config(
        make_config(head_dim), attn_implementation=attn_implementation, dtype=dtype
    )
    _fill_weights(model, seed, weights_dtype or dtype)
    return model.to(device).eval()


def _use(model: torch.nn.Module, impl: str) -> None:
    model.set_attn_implementation(impl)
    if model.config._attn_implementation != impl:  # set_attn_implementation only warns when it cannot
        raise RuntimeError(f"{type(model).__name__} did not switch to attn_implementation={impl!r}")


# --------------------------------------------------------------------------------------------
# The comparison
# --------------------------------------------------------------------------------------------


def _err(x: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    d = (x.float() - ref.float()).abs()
    return d.max().item(), d.mean().item()


def _judge(ours: torch.Tensor, sdpa: torch.Tensor, ref: torch.Tensor) -> dict:
    """Errors of ours and sdpa against the fp32 reference, ours against sdpa, and the verdict."""
    scale = ref.float().abs().max().item()
    ours_max, ours_mean = _err(ours, ref)
    sdpa_max, sdpa_mean = _err(sdpa, ref)
    diff_max, diff_mean = _err(ours, sdpa)
    limit_max = TOL_FACTOR * sdpa_max + ATOL_REL * scale
    limit_mean = TOL_FACTOR * sdpa_mean + ATOL_REL * scale
    return {
        "logit_scale": scale,
        "max_abs_diff": diff_max,  # ours vs sdpa, same dtype
        "mean_abs_diff": diff_mean,
        "max_rel_diff": diff_max / scale if scale else float("inf"),
        "ours_vs_fp32_max": ours_max,
        "ours_vs_fp32_mean": ours_mean,
        "sdpa_vs_fp32_max": sdpa_max,
        "sdpa_vs_fp32_mean": sdpa_mean,
        "limit_max": limit_max,
        "limit_mean": limit_mean,
        "ok": ours_max <= limit_max and ours_mean <= limit_mean and math.isfinite(ours_max),
    }


@torch.no_grad()
def _forced_decode(model, impl: str, input_ids: torch.Tensor, forced: torch.Tensor) -> torch.Tensor:
    """Logits [B, N, V] of a prefill then N-1 single-token steps through the KV cache, feeding
    `forced` [B, N] (the same tokens for every implementation): step 0 is the prefill's last
    position (Sq == Sk), step t >= 1 one query against S + t cached keys (bottom-right)."""
    _use(model, impl)
    b, s = input_ids.shape
    ones = torch.ones(b, s + forced.shape[1], dtype=torch.long, device=input_ids.device)
    out = model(input_ids=input_ids, attention_mask=ones[:, :s], use_cache=True, logits_to_keep=1)
    cache, steps = out.past_key_values, [out.logits[:, -1].float()]
    for t in range(forced.shape[1] - 1):
        out = model(
            input_ids=forced[:, t : t + 1], attention_mask=ones[:, : s + t + 1], past_key_values=cache, use_cache=True
        )
        cache = out.past_key_values
        steps.append(out.logits[:, -1].float())
    return torch.stack(steps, dim=1)


@torch.no_grad()
def _time_prefill(model, input_ids: torch.Tensor, impls: tuple, iters: int, warmup: int = 3) -> dict:
    """Median (and min) ms of a prefill (generate's first forward: the whole sequence into a new
    DynamicCache, the last position's logits), CUDA events, implementations interleaved (their
    order alternating per round) so that clock and thermal drift hit both alike."""
    samples: dict = {impl: [] for impl in impls}

    def once(impl):
        _use(model, impl)  # host work, outside the timed span
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        model(input_ids=input_ids, use_cache=True, logits_to_keep=1)
        end.record()
        return start, end

    for _ in range(warmup):
        for impl in impls:
            once(impl)
    torch.cuda.synchronize()
    for round_ in range(iters):
        for impl in impls if round_ % 2 == 0 else impls[::-1]:
            start, end = once(impl)
            end.synchronize()
            samples[impl].append(start.elapsed_time(end))
    return {impl: {"median_ms": statistics.median(v), "min_ms": min(v)} for impl, v in samples.items()}


def compare(
    batch: int = 2,
    seq: int = 1024,
    dtype: torch.dtype = torch.bfloat16,
    iters: int = 20,
    new_tokens: int = 8,
    head_dim: int = 64,
    seed: int = 0,
) -> dict:
    """Everything in the module docstring; returns a JSON-able dict with the numbers and "ok"."""
    register()
    torch.manual_seed(seed)
    model = build_model("sdpa", dtype, seed, head_dim=head_dim)
    # The reference: the same weights (rounded to `dtype`) computed in float32 by sdpa.
    reference = build_model("sdpa", torch.float32, seed, weights_dtype=dtype, head_dim=head_dim)
    gen = torch.Generator().manual_seed(seed + 1)
    input_ids = torch.randint(0, model.config.vocab_size, (batch, seq), generator=gen).to("cuda")
    result: dict = {
        "batch": batch,
        "seq": seq,
        "dtype": str(dtype).replace("torch.", ""),
        "head_dim": head_dim,
        "layers": model.config.num_hidden_layers,
        "heads": model.config.num_attention_heads,
        "kv_heads": model.config.num_key_value_heads,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name(),
    }

    # 1. Prefill logits, every position (Sq == Sk: top-left and bottom-right agree).
    with torch.no_grad():
        ref_logits = reference(input_ids=input_ids, use_cache=False).logits.float()
        _use(model, "sdpa")
        sdpa_logits = model(input_ids=input_ids, use_cache=False).logits
        _use(model, NAME)
        ours_logits = model(input_ids=input_ids, use_cache=False).logits
    result["prefill"] = _judge(ours_logits, sdpa_logits, ref_logits)
    del ref_logits, sdpa_logits, ours_logits

    # 2. Greedy generate with the KV cache (DynamicCache) through each implementation.
    with torch.no_grad():
        ones = torch.ones_like(input_ids)
        tokens = {}
        for impl in ("sdpa", NAME):
            _use(model, impl)
            out = model.generate(input_ids, attention_mask=ones, max_new_tokens=new_tokens, do_sample=False)
            tokens[impl] = out[:, seq:]
    same = tokens["sdpa"] == tokens[NAME]

    # 3. Decode logits, compared on the same tokens. With random weights nothing makes one token
    # clearly likelier than the next: over 32000 logits the top two of a step are often closer
    # than bf16's rounding of them, so two correct implementations may pick different greedy
    # tokens, after which their contexts differ and their later steps are not comparable. So the
    # pass/fail check feeds sdpa's greedy tokens to both implementations through the KV cache
    # (teacher forcing; step t's logits depend only on tokens before t) and compares every step's
    # logits with the tolerance above, against an fp32 full-sequence forward over the same
    # tokens. Token agreement is reported; a divergence counts against evoattn only through
    # those logits (at the divergence step the contexts are still equal, so it is checked too).
    forced = tokens["sdpa"]
    sdpa_steps = _forced_decode(model, "sdpa", input_ids, forced)
    ours_steps = _forced_decode(model, NAME, input_ids, forced)
    with torch.no_grad():
        context = torch.cat([input_ids, forced[:, :-1]], dim=1)
        ref_steps = reference(input_ids=context, use_cache=False, logits_to_keep=new_tokens).logits.float()
    result["decode"] = _judge(ours_steps, sdpa_steps, ref_steps)
    first_step = _judge(ours_steps[:, 1:2], sdpa_steps[:, 1:2], ref_steps[:, 1:2]) if new_tokens > 1 else None
    result["decode"]["first_decode_step_max_abs_diff"] = first_step["max_abs_diff"] if first_step else None
    divergence = None
    if not bool(same.all()):
        where = (~same).nonzero()  # (row, step) pairs; the earliest step over all rows
        row, step = [int(x) for x in where[where[:, 1].argmin()]]
        top2 = sdpa_steps[row, step].topk(2).values
        divergence = {
            "row": row,
            "step": step,
            "sdpa_token": int(tokens["sdpa"][row, step]),
            "evoattn_token": int(tokens[NAME][row, step]),
            "sdpa_top2_gap": (top2[0] - top2[1]).item(),
        }
    result["generate"] = {"new_tokens": new_tokens, "tokens_equal": bool(same.all()), "first_divergence": divergence}

    # 4. A padded batch must be refused, not computed without its mask.
    padded = torch.ones_like(input_ids)
    padded[0, : max(1, seq // 8)] = 0
    _use(model, NAME)
    try:
        with torch.no_grad():
            model(input_ids=input_ids, attention_mask=padded, use_cache=False, logits_to_keep=1)
        result["refuses_padding"] = False
        result["padding_error"] = None
    except ValueError as e:
        result["refuses_padding"] = True
        result["padding_error"] = str(e)

    # 5. Prefill time, both implementations interleaved.
    del reference
    torch.cuda.empty_cache()
    result["prefill_time"] = _time_prefill(model, input_ids, ("sdpa", NAME), iters)
    result["iters"] = iters

    result["ok"] = bool(result["prefill"]["ok"] and result["decode"]["ok"] and result["refuses_padding"])
    return result


def _report(r: dict) -> None:
    print(
        f"{r['device']}, torch {r['torch']}, transformers {r['transformers']}; Llama {r['layers']} layers, "
        f"{r['heads']} heads / {r['kv_heads']} KV heads, D={r['head_dim']}, {r['dtype']}, B={r['batch']}, S={r['seq']}"
    )
    print(f"logits vs sdpa ({r['dtype']}) and vs an fp32 sdpa reference of the same weights:")
    print(f"  {'':<8} {'max|d|':>9} {'mean|d|':>9} {'max/scale':>9} {'ours-fp32':>9} {'sdpa-fp32':>9} {'limit':>9}  ok")
    for what in ("prefill", "decode"):
        j = r[what]
        print(
            f"  {what:<8} {j['max_abs_diff']:9.3g} {j['mean_abs_diff']:9.3g} {j['max_rel_diff']:9.3g} "
            f"{j['ours_vs_fp32_max']:9.3g} {j['sdpa_vs_fp32_max']:9.3g} {j['limit_max']:9.3g}  {j['ok']}"
        )
    print(
        f"  (max over every position and vocab entry; scale = max |fp32 logit| = {r['prefill']['logit_scale']:.3g}; "
        f"limit = {TOL_FACTOR:g} x sdpa-fp32 + {ATOL_REL:g} x scale, also applied to the means)"
    )
    if r["decode"]["first_decode_step_max_abs_diff"] is not None:
        print(f"  first decode step (1 query, S+1 keys): max |d| = {r['decode']['first_decode_step_max_abs_diff']:.3g}")
    g = r["generate"]
    if g["tokens_equal"]:
        print(f"greedy generate, {g['new_tokens']} tokens with the KV cache: tokens equal to sdpa's")
    else:
        d = g["first_divergence"]
        print(
            f"greedy generate, {g['new_tokens']} tokens: first divergence at row {d['row']} step {d['step']} "
            f"(sdpa {d['sdpa_token']}, evoattn {d['evoattn_token']}; sdpa's top-2 gap there {d['sdpa_top2_gap']:.3g}: "
            "a near-tie if the decode logits above are within the limit)"
        )
    print(f"padded batch refused: {r['refuses_padding']}" + (f" ({r['padding_error']})" if r["padding_error"] else ""))
    t = r["prefill_time"]
    print(f"prefill (whole sequence into a new KV cache, last logits), median of {r['iters']}, ms:")
    print(f"  {'impl':<8} {'median':>8} {'min':>8}")
    for impl in ("sdpa", NAME):
        print(f"  {impl:<8} {t[impl]['median_ms']:8.3f} {t[impl]['min_ms']:8.3f}")
    print(f"  sdpa / evoattn: {t['sdpa']['median_ms'] / t[NAME]['median_ms']:.3f}x")
    print("PASS" if r["ok"] else "FAIL")


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--dtype", choices=sorted(_DTYPES), default="bf16")
    parser.add_argument("--iters", type=int, default=20, help="timed prefills per implementation")
    parser.add_argument("--new-tokens", type=int, default=8, help="greedy tokens generated")
    parser.add_argument("--head-dim", type=int, choices=(64, 128, 256), default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args(argv)
    if args.new_tokens < 1 or args.batch < 1 or args.seq < 1 or args.iters < 1:
        parser.error("--batch, --seq, --iters and --new-tokens must be at least 1")
    if not torch.cuda.is_available():
        print("no CUDA GPU is visible to PyTorch: evoattn runs on NVIDIA GPUs", file=sys.stderr)
        return 1
    result = compare(
        batch=args.batch,
        seq=args.seq,
        dtype=_DTYPES[args.dtype],
        iters=args.iters,
        new_tokens=args.new_tokens,
        head_dim=args.head_dim,
        seed=args.seed,
    )
    _report(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
