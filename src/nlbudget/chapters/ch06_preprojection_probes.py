"""Chapter 06 (Part IV): position-agnostic pre-projection and content skip as frozen probes.

P4 (Shinde): modules in front of Q/K/V and a content skip around attention
(`nlbudget.preprojection`), trained on a frozen base, against LoRA at a matched trainable budget.
"""

from __future__ import annotations

import numpy as np
import torch
from tqdm.std import tqdm

from .. import corpora, models, preprojection, stats, timing, training
from ..claims import (INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, REPRODUCED, Claim, Decision, all_of,
                      decided, effect, needs_seeds)

KEY, STEM, PART = "06", "06_preprojection_probes", "IV"
TITLE = "Pre-projection and content skip as frozen probes"
SETTINGS = {
    "smoke": dict(models="smollm2-135m", corpus="pydocs", lastword="pydocs", dtype="float32",
                  window=32, train_windows=16, eval_windows=4, lastword_items=8,
                  lastword_context=64, k=4, steps=2, batch_size=2, lr=1e-3,
                  **training.PAIR["smoke"], pair_k=4, pair_probe_steps=2, pair_probe_batch=4,
                  n_boot=50, decode_tokens=4, ablation_windows=4),
    "ci": dict(models="smollm2-135m", corpus="pydocs", lastword="pydocs", dtype="float32",
               window=128, train_windows=128, eval_windows=4, lastword_items=48,
               lastword_context=128, k=16, steps=3, batch_size=4, lr=1e-3,
               **training.PAIR["ci"], pair_k=8, pair_probe_steps=8, pair_probe_batch=16,
               n_boot=1000, decode_tokens=4, ablation_windows=2),
    "paper": dict(models="EleutherAI/pythia-160m,EleutherAI/pythia-410m", corpus="wikitext-103",
                  lastword="lambada", dtype="float32", window=512, train_windows=20000,
                  eval_windows=200, lastword_items=5153, lastword_context=512, k=64, steps=2000,
                  batch_size=8, lr=1e-3, **training.PAIR["paper"], pair_k=32,
                  pair_probe_steps=2000, pair_probe_batch=32, n_boot=10000, decode_tokens=64,
                  ablation_windows=200),
}
MAIN = "pre+skip"  # the paper's setting
#: A model's last-word accuracy counts only if its frozen base gets this many items right.
MIN_CORRECT = 20
#: Cached decoding "equals" the uncached forward when their logits differ by at most
#: NOISE_FACTOR × the frozen base model's own cached-vs-uncached difference (its rounding in
#: this dtype), and at least MIN_RTOL × the largest logit. The control — the base model's
#: logits against a trained probe's — must differ by more than that same tolerance, or the
#: check cannot tell models apart.
NOISE_FACTOR, MIN_RTOL = 2.0, 1e-5
PAIR_NAME = "pythia-style (neox-par)"


# ------------------------------------------------------------------ study


def lastword_items(S: dict, text) -> list[dict]:
    lw = text if S["lastword"] == S["corpus"] else corpora.load(S["lastword"])
    if S["lastword"] == "lambada":
        return corpora.lambada_items(list(lw.paragraphs))[: S["lastword_items"]]
    return corpora.sentence_end_passages(lw.split("validation") + lw.split("test"),
                                         S["lastword_items"], seed=S["seed"])


@timing.timed("run_model")
def run_model(S, name, model, tok, train_w, eval_w, items, k, steps, batch, max_context) -> dict:
    """Every variant trained and measured on one model (`preprojection.probe_study`), its setup,
    and the decode time of the base and the wrapped model in its inference form."""
    budget = preprojection.matched_budget(model, k)
    enc = preprojection.encode_items(items, tok, max_context)
    bar = tqdm(total=4 * steps, desc=f"{name}: probes", mininterval=30)
    study = preprojection.probe_study(model, budget, train_w, eval_w, enc, steps, batch, S["lr"],
                                      seed=S["seed"], n_boot=S["n_boot"], progress=bar,
                                      ablation_windows=S["ablation_windows"])
    bar.close()
    setup = {"layers": len(preprojection.blocks(model)), "d": model.config.hidden_size, "k": k,
             "lora_rank": budget.lora_rank, "window": train_w.shape[1],
             "train_pool_windows": len(train_w), "eval_tokens": eval_w.numel(), "items": len(enc),
             "steps": steps, "batch": batch, "seed": S["seed"],
             "item_tokens_mean": float(np.mean([len(c) + len(t) for c, t in enc]))}
    wrapped = preprojection.inference_form(preprojection.variant_model(model, MAIN, budget,
                                                                       S["seed"]))
    decode = {str(b): preprojection.decode_seconds({"base": model, MAIN: wrapped}, b, 32,
                                                   S["decode_tokens"]) for b in (1, 8)}
    return {"study": study, "setup": setup, "decode": decode}


def study(S: dict) -> dict:
    dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}[S["dtype"]]
    text = corpora.load(S["corpus"])
    items = lastword_items(S, text)
    out = {}
    for name in S["models"].split(","):
        model, tok = models.load(name, dtype=dtype, device=S["device"])
        W = S["window"]
        out[name] = run_model(
            S, name, model, tok, corpora.token_windows(text.text("train"), tok, W, S["train_windows"]),
            corpora.token_windows(text.text("validation"), tok, W, S["eval_windows"]), items,
            S["k"], S["steps"], S["batch_size"], S["lastword_context"])
        del model
    tok = training.train_tokenizer(text, vocab_size=S["pair_vocab"])
    C = S["pair_context"]
    cfg = training.pair_config("neox-par", S)
    bar = tqdm(total=cfg.steps, desc="train neox-par", mininterval=60)
    pair, log = training.train_or_load(cfg, text, tok, progress=bar, device=S["device"])
    bar.close()
    tr, va = training.encode(text, tok, "train"), training.encode(text, tok, "validation")
    out[PAIR_NAME] = run_model(S, PAIR_NAME, pair, tok, tr[: len(tr) // C * C].view(-1, C),
                               va[: S["pair_eval_windows"] * C].view(-1, C), items, S["pair_k"],
                               S["pair_probe_steps"], S["pair_probe_batch"], C)
    return {"studies": {m: r["study"] for m, r in out.items()},
            "setup": {m: r["setup"] for m, r in out.items()},
            "decode": {m: r["decode"] for m, r in out.items()},
            "min_correct": MIN_CORRECT, "n_items": len(items),
            "items": [{"context_tail": it["context"][-160:], "target": it["target"]}
                      for it in items[:5]],
            "pair_train_log": {k: log[k] for k in ("tokens", "params")}}


# ------------------------------------------------------------------ claims


def _scale(F):
    return "; ".join(f"{m}: k={s['k']}, {s['steps']} steps × {s['batch']}×{s['window']} tokens, "
                     f"{s['eval_tokens']:,} eval tokens, {s['items']} last-word items, 1 seed"
                     for m, s in F["setup"].items())


def _pct(x):
    return "n/a" if x is None else f"{x:+.1%}"


def claim_ppl(F, S) -> Claim:
    """P4: "~40 % lower perplexity" from the frozen probes (Pythia-160M: −39 %). Any trained
    parameters lower perplexity on similar text, so the modules are judged against LoRA at the
    same trainable budget: the interval of PPL(modules)/PPL(LoRA) − 1 must lie below 0."""
    decs, texts = {}, []
    for m, st in F["studies"].items():
        r = st[MAIN]
        lo, hi = r["vs_lora"]["ppl_ci"]
        decs[m] = needs_seeds(effect(-hi, -lo, what="LoRA − modules PPL change"), 1)
        texts.append(f"{models.label(m)}: {st['base']['ppl']:.2f} → {r['ppl']:.2f} "
                     f"({_pct(r['vs_base']['ppl_change'])} vs the frozen base); LoRA "
                     f"{_pct(st['lora']['vs_base']['ppl_change'])}; modules vs LoRA "
                     f"{_pct(r['vs_lora']['ppl_change'])} [{_pct(lo)}, {_pct(hi)}]")
    return decided("P4.frozen-probe-ppl", all_of(decs), measured="; ".join(texts),
                   control="LoRA on all attention projections at the nearest trainable budget, "
                   "same batches, steps and learning rate",
                   needs="≥ 3 seeds per variant and a learning-rate sweep per variant",
                   scale=_scale(F))


def claim_lambada(F, S) -> Claim:
    """P4: "~40 % better LAMBADA accuracy" (Pythia-160M: +40.6 %). Judged against LoRA at the
    same budget: the interval of accuracy(modules) − accuracy(LoRA) must lie above 0; a model
    counts only if its frozen base gets MIN_CORRECT items right."""
    decs, texts = {}, []
    for m, st in F["studies"].items():
        b, r = st["base"], st[MAIN]
        lo, hi = r["vs_lora"]["acc_diff_ci"]
        t = (f"{models.label(m)}: {b['accuracy']:.1%} ({b['correct']}/{F['n_items']}) → "
             f"{r['accuracy']:.1%}; LoRA {st['lora']['accuracy']:.1%}; modules − LoRA "
             f"{100 * r['vs_lora']['acc_diff']:+.1f} pp")
        if b["correct"] < MIN_CORRECT:
            decs[m] = Decision(NOT_RUN, f"base < {MIN_CORRECT} correct")
            t += " (not counted: base too weak)"
        else:
            decs[m] = needs_seeds(effect(lo, hi, what="modules − LoRA accuracy"), 1)
            t += f" [{100 * lo:+.1f}, {100 * hi:+.1f}] pp"
        texts.append(t)
    lw = "" if S["lastword"] == "lambada" else f"; {S['lastword']} last-word items, not LAMBADA"
    dec = all_of(decs)
    return decided("P4.frozen-probe-lambada", dec, measured="; ".join(texts) + lw,
                   control="LoRA at the nearest trainable budget, same batches, steps and "
                   "learning rate",
                   needs=("≥ 3 seeds per variant" if dec.verdict == INCONCLUSIVE else
                          f"a model whose frozen base gets ≥ {MIN_CORRECT} items right"),
                   scale=_scale(F))


def claim_skip_by_depth(F, S) -> Claim:
    """P4: "late layers use [the skip] most, early layers keep relying on attention". Use is
    measured by ablation — the perplexity change when one layer's skip is switched off — and
    the trend by Spearman ρ between layer and that change, with a Fisher-z interval, per
    model (the norm ratio ‖skip‖/‖attn‖ is reported too: it tracks activation scale)."""
    decs, texts = {}, []
    for m, st in F["studies"].items():
        abl = st[MAIN]["skip_ablation"]
        rho, lo, hi = stats.spearman_interval([u["layer"] for u in abl],
                                              [u["ppl_change"] for u in abl])
        use = st[MAIN]["skip_use"]
        r_norm = stats.spearman_interval([u["layer"] for u in use], [u["ratio"] for u in use])[0]
        decs[m] = needs_seeds(effect(lo, hi, what="Spearman ρ"), 1)
        top = max(abl, key=lambda u: u["ppl_change"]) if abl else {"layer": None, "ppl_change": 0}
        texts.append(f"{models.label(m)}: ρ(layer, PPL change with the skip off) = {rho:+.2f} "
                     f"[{lo:+.2f}, {hi:+.2f}] over {len(abl)} layers (largest at layer "
                     f"{top['layer']}: {top['ppl_change']:+.2%}); by the norm ratio ρ = {r_norm:+.2f}")
    return decided("P4.skip-by-depth", all_of(decs), measured="; ".join(texts),
                   control="no trend with depth (ρ = 0)",
                   needs="≥ 3 seeds of the probes", scale=_scale(F))


def claim_no_kv_overhead(F, S) -> Claim:
    """P4: "no K/V cache overhead (cached K/V keep their size, the new modules are per-token)".
    Every wrapped variant: the cache holds as many bytes as the base model's, and cached greedy
    decoding gives the logits of one uncached forward pass (so the cache is not stale) — while
    the base model's logits, the control, differ."""
    ok_bytes, ok_logits, ctrl, texts = True, True, True, []
    for m, st in F["studies"].items():
        base_bytes = st["base"]["cache_check"]["bytes"]
        floor = st["base"]["cache_check"]["max_abs"]  # the unmodified model's own rounding
        for v, r in st.items():
            c = r["cache_check"]
            tol = max(NOISE_FACTOR * floor, MIN_RTOL * c["scale"])
            ok_bytes &= c["bytes"] == base_bytes
            ok_logits &= c["max_abs"] <= tol
            if v != "base":
                ctrl &= c["reference_max_abs"] > tol
        worst = max(r["cache_check"]["max_abs"] / r["cache_check"]["scale"] for r in st.values())
        texts.append(f"{models.label(m)}: cache {base_bytes:,} bytes for every variant: "
                     f"{all(r['cache_check']['bytes'] == base_bytes for r in st.values())}; cached "
                     f"vs uncached logits, worst relative |Δ| {worst:.1e}")
    if not ctrl:
        dec = Decision(INCONCLUSIVE, "a trained probe's logits match the base model's: the "
                       "logit check cannot tell models apart at this budget")
    elif ok_bytes and ok_logits:
        dec = Decision(REPRODUCED, "same cache bytes, and cached decoding equals the uncached "
                       "forward, for every variant")
    else:
        dec = Decision(NOT_REPRODUCED, f"cache bytes equal: {ok_bytes}; cached = uncached: "
                       f"{ok_logits}")
    return decided("P4.no-kv-overhead", dec, measured="; ".join(texts),
                   control="the frozen base model's uncached logits (must differ from a trained "
                   "probe's)", needs="a longer probe training, so the probes move off the base",
                   scale="2 prompts × 16 tokens, 4 decoded tokens")


CLAIMS = (claim_lambada, claim_ppl, claim_skip_by_depth, claim_no_kv_overhead)


def claims(F: dict, S: dict) -> list[Claim]:
    return [c(F, S) for c in CLAIMS]
