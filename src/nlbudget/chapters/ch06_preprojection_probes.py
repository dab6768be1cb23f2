"""Chapter 06 (Part IV): position-agnostic pre-projection and content skip as frozen probes.

P4 (Shinde): modules in front of Q/K/V and a content skip around attention
(`nlbudget.preprojection`), trained on a frozen base, against LoRA at a matched trainable budget.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from tqdm.std import tqdm

from nlbudget import preprojection, timing, training
from nlbudget.assets import corpora, models
from nlbudget.book import pages
from nlbudget.evaluation import bootstrap_cost, encode_items, eval_nll, last_word_eval, perplexity
from nlbudget.verdicts import stats
from nlbudget.verdicts.claims import (INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, REPRODUCED, Claim, Decision, all_of,
                      decided, effect, needs_seeds)

KEY, STEM = "06", "06_preprojection_probes"
SETTINGS = {
    "smoke": dict(models="smollm2-135m", corpus="pydocs", lastword="pydocs", dtype="float32",
                  window=32, train_windows=16, eval_windows=4, lastword_items=8,
                  lastword_context=64, k=4, steps=2, batch_size=2, lr=1e-3,
                  **training.PAIR["smoke"], pair_k=4, pair_probe_steps=2, pair_probe_batch=4,
                  probe_seeds=1, n_boot=50, decode_tokens=4, ablation_windows=4),
    "ci": dict(models="smollm2-135m", corpus="pydocs", lastword="pydocs", dtype="float32",
               window=128, train_windows=128, eval_windows=4, lastword_items=48,
               lastword_context=128, k=16, steps=3, batch_size=4, lr=1e-3,
               **training.PAIR["ci"], pair_k=8, pair_probe_steps=8, pair_probe_batch=16,
               probe_seeds=1, n_boot=1000, decode_tokens=4, ablation_windows=2),
    "full": dict(models="smollm2-135m", corpus="pydocs", lastword="pydocs", dtype="float32",
                 window=128, train_windows=256, eval_windows=16, lastword_items=200,
                 lastword_context=128, k=16, steps=20, batch_size=4, lr=1e-3,
                 **training.PAIR["full"], pair_k=8, pair_probe_steps=20, pair_probe_batch=16,
                 probe_seeds=3, n_boot=10000, decode_tokens=4, ablation_windows=8),
    "paper": dict(models="EleutherAI/pythia-160m,EleutherAI/pythia-410m", corpus="wikitext-103",
                  lastword="lambada", dtype="float32", window=512, train_windows=20000,
                  eval_windows=200, lastword_items=5153, lastword_context=512, k=64, steps=2000,
                  batch_size=8, lr=1e-3, **training.PAIR["paper"], pair_k=32,
                  pair_probe_steps=2000, pair_probe_batch=32, probe_seeds=3, n_boot=10000,
                  decode_tokens=64, ablation_windows=200),
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
#: Minimum effects against LoRA. The paper evaluates on 500 items, where one binomial standard
#: error of an accuracy near its 35 % is about 2 points: it could not itself tell apart a
#: smaller gain. Perplexity: 2 % lower than LoRA's (the same margin as chapter 02's).
MIN_ACC_GAIN, MIN_PPL_GAIN = 0.02, 0.02
#: "Late layers use the skip most": a Spearman ρ of at least this between layer and use.
MIN_RHO = 0.3


# ------------------------------------------------------------------ study


def lastword_items(S: dict, text) -> list[dict]:
    lw = text if S["lastword"] == S["corpus"] else corpora.load(S["lastword"])
    if S["lastword"] == "lambada":
        return corpora.lambada_items(list(lw.paragraphs))[: S["lastword_items"]]
    return corpora.sentence_end_passages(lw.split("validation") + lw.split("test"),
                                         S["lastword_items"], seed=S["seed"])



@dataclass
class Run:
    """One model the probes are trained on, with its windows, items and budget, and what every
    variant is checked against: the frozen base's logits and K/V cache on two windows."""

    name: str
    model: object
    tok: object
    budget: preprojection.Budget
    train: torch.Tensor
    eval: torch.Tensor
    items: list  # (context ids, target ids) per last-word item
    steps: int
    batch: int
    S: dict
    probe_ids: torch.Tensor
    base_cache: list
    base_logits: torch.Tensor
    progress: object = None
    train_log: dict | None = None  # the pair model's training record


def probe_run(S: dict, name: str, model, tok, budget: preprojection.Budget, train_w, eval_w,
              encoded: list, steps: int, batch: int) -> Run:
    """A `Run`: the base model's logits and K/V cache on two evaluation windows, for the
    variants' step-0 and cache checks; a progress bar over the probes' training steps."""
    probe_ids = eval_w[:2, : min(16, eval_w.shape[1])]
    with torch.no_grad():
        base_logits = model(input_ids=eval_w[:2]).logits
    return Run(name, model, tok, budget, train_w, eval_w, encoded, steps, batch, S, probe_ids,
               preprojection.cache_tensors(model, probe_ids), base_logits,
               tqdm(total=4 * steps * S["probe_seeds"], desc=f"{name}: probes", mininterval=30))


def runs(S: dict, text, items: list):
    """Each pretrained model of the profile, then the pythia-style model of the matched pair
    (trained by chapter 03, read from the cache), one at a time."""
    dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}[S["dtype"]]
    W = S["window"]
    for name in S["models"].split(","):
        model, tok = models.load(name, dtype=dtype, device=S["device"])
        budget = preprojection.matched_budget(model, S["k"])
        yield probe_run(S, name, model, tok, budget,
                        corpora.token_windows(text.text("train"), tok, W, S["train_windows"]),
                        corpora.token_windows(text.text("validation"), tok, W, S["eval_windows"]),
                        encode_items(items, tok, S["lastword_context"]), S["steps"],
                        S["batch_size"])
        del model
    tok = training.train_tokenizer(text, vocab_size=S["pair_vocab"])
    C = S["pair_context"]
    cfg = training.pair_config("neox-par", S)
    bar = tqdm(total=cfg.steps, desc="train neox-par", mininterval=60)
    pair, log = training.train_or_load(cfg, text, tok, progress=bar, device=S["device"])
    bar.close()
    tr, va = training.encode(text, tok, "train"), training.encode(text, tok, "validation")
    run = probe_run(S, PAIR_NAME, pair, tok, preprojection.matched_budget(pair, S["pair_k"]),
                    tr[: len(tr) // C * C].view(-1, C), va[: S["pair_eval_windows"] * C].view(-1, C),
                    encode_items(items, tok, C), S["pair_probe_steps"], S["pair_probe_batch"])
    run.train_log = {k: log[k] for k in ("tokens", "params")}
    yield run


@timing.timed("probe")
def probe(run: Run, v: str, seed: int | None = None) -> tuple[dict, tuple]:
    """One variant on the frozen model: trained as a probe (the base is not), then its held-out
    perplexity, last-word accuracy, K/V cache against the base's, and, with a skip, the skip's
    use per layer (its ablation, layer by layer, for the paper's setting). Returns (record,
    (per-token losses, per-item hits)) — the latter for the paired comparisons. `seed` draws
    the probe's initial weights and batches (default: the run's)."""
    S = run.S
    seed = S["seed"] if seed is None else seed
    m = preprojection.variant_model(run.model, v, run.budget, seed)
    with torch.no_grad():
        step0 = torch.equal(m(input_ids=run.eval[:2]).logits, run.base_logits)
    losses = preprojection.train_probe(m, run.train, run.steps, run.batch, S["lr"], seed,
                                       run.progress) if v != "base" else []
    nll = eval_nll(m, run.eval, 8)
    hit = last_word_eval(m, run.items, 8)["correct"].float()
    cache = preprojection.cache_tensors(m, run.probe_ids)
    check = preprojection.cached_vs_uncached(m, run.probe_ids,
                                             reference=run.model if v != "base" else None)
    out = {"trainable": preprojection.trainable(m), "sizes": run.budget.sizes(v),
           "train_tokens": len(losses) * run.batch * run.train.shape[1],
           "train_loss": losses, "step0_identical": step0,
           "ppl": perplexity(nll), "accuracy": float(hit.mean()), "correct": int(hit.sum()),
           "cache_identical": cache == run.base_cache, "cache_bytes": preprojection.cache_bytes(cache),
           "base_cache_bytes": preprojection.cache_bytes(run.base_cache), "cache_check": check}
    if preprojection.probes(m) and preprojection.probes(m)[0].skip is not None:
        out["skip_use"] = preprojection.skip_use(m, run.eval, 8)
        if v == "pre+skip":  # the paper's setting: use measured by ablation, layer by layer
            out["skip_ablation"] = preprojection.skip_ablation(
                m, run.eval[:S["ablation_windows"]], 8, S["n_boot"], seed)
    return out, (nll, hit)


def seeds(S: dict) -> list[int]:
    """The probes' seeds (`probe_seeds`, from the run's seed on): every variant, LoRA included,
    is trained from each."""
    return [S["seed"] + i for i in range(S["probe_seeds"])]


def add_seed(figures: dict, name: str, seed: int, records: dict) -> None:
    """File one seed's probes of model `name`: the first seed's records are the page's; what
    the claims compare over seeds goes to `by_seed`."""
    figures["studies"].setdefault(name, records)
    r = records[MAIN]
    abl = r.get("skip_ablation", [])
    rho = stats.spearman_interval([u["layer"] for u in abl],
                                  [u["ppl_change"] for u in abl])[0] if abl else None

    def finite(x):  # undefined (e.g. ρ of constant values) is recorded as None
        return float(x) if x is not None and np.isfinite(x) else None

    figures.setdefault("by_seed", {}).setdefault(name, []).append({
        "seed": seed, "ppl_vs_lora": finite(r["vs_lora"]["ppl_change"]),
        "acc_diff_vs_lora": finite(r["vs_lora"]["acc_diff"]), "skip_rho": finite(rho)})


def against_references(records: dict, kept: dict, S: dict) -> None:
    """Every variant against the frozen base and against LoRA: relative perplexity and
    accuracy changes with paired bootstrap intervals (windows, items), into `records`."""
    n_boot, seed = S["n_boot"], S["seed"]
    for ref in ("base", "lora"):
        if ref not in kept:
            continue
        (nll0, hit0), r0 = kept[ref], records[ref]
        for v, (nll, hit) in kept.items():
            if v in ("base", ref):
                continue
            acc = records[v]["accuracy"]
            records[v][f"vs_{ref}"] = {
                "ppl_change": records[v]["ppl"] / r0["ppl"] - 1,
                "ppl_ci": bootstrap_cost(nll0, nll, n_boot, seed),
                # relative accuracy change: undefined (None) when the reference gets none right
                "acc_change": acc / r0["accuracy"] - 1 if r0["accuracy"] else None,
                "acc_ci": stats.bootstrap_paired(hit0, hit, "ratio", n_boot, seed),
                "acc_diff": acc - r0["accuracy"],
                "acc_diff_ci": stats.bootstrap_paired(hit0, hit, "diff", n_boot, seed)}


def setup(run: Run) -> dict:
    """What the results record of a run's scale."""
    if run.progress is not None:
        run.progress.close()
    return {"layers": len(preprojection.blocks(run.model)), "d": run.model.config.hidden_size,
            "seeds": seeds(run.S),
            "k": run.budget.k, "lora_rank": run.budget.lora_rank, "window": run.train.shape[1],
            "train_pool_windows": len(run.train), "eval_tokens": run.eval.numel(),
            "items": len(run.items), "steps": run.steps, "batch": run.batch, "seed": run.S["seed"],
            "item_tokens_mean": float(np.mean([len(c) + len(t) for c, t in run.items]))}


@timing.timed("decode")
def decode(run: Run) -> dict:
    """Seconds per generated token of the base and the wrapped model in its inference form."""
    S = run.S
    wrapped = preprojection.inference_form(preprojection.variant_model(run.model, MAIN, run.budget,
                                                                       S["seed"]))
    return {str(b): preprojection.decode_seconds({"base": run.model, MAIN: wrapped}, b, 32,
                                                 S["decode_tokens"]) for b in (1, 8)}


def items_record(items: list) -> dict:
    return {"min_correct": MIN_CORRECT, "n_items": len(items),
            "items": [{"context_tail": it["context"][-160:], "target": it["target"]}
                      for it in items[:5]]}


# ------------------------------------------------------------------ the page


def scale(S: dict) -> dict:
    """The paper's scale beside this build's, for `pages.scale_box`."""
    return {
        "models": ("Pythia-160M, Pythia-410M", f"{S['models']} (de-quantized Q4_1, {S['dtype']}); "
                   "the Pythia-style model trained in chapter 03"),
        "module sizes": ("not in the summary", f"k = {S['k']} (SmolLM2), {S['pair_k']} "
                         "(Pythia-style)"),
        "training": ("not in the summary", f"{S['steps']} steps × {S['batch_size']} × "
                     f"{S['window']} tokens (SmolLM2); {S['pair_probe_steps']} × "
                     f"{S['pair_probe_batch']} × {S['pair_context']} (Pythia-style); 1 seed"),
        "baseline": ("the frozen base", "LoRA at the same trainable budget, and the frozen base"),
        "last-word items": ("LAMBADA test set (5,153)", f"{S['lastword_items']} items from "
                            f"{S['lastword']}")}


def comparison_table(F: dict) -> pd.DataFrame:
    """Each variant: trainable parameters, perplexity and last-word accuracy, against the base
    and against LoRA with paired intervals."""
    rows = []
    for m, st in F["studies"].items():
        for v, r in st.items():
            vb, vl = r.get("vs_base"), r.get("vs_lora")
            ci = vl["acc_diff_ci"] if vl else (None, None)
            rows.append({
                "model": m, "variant": v, "trainable": f"{r['trainable']:,}",
                "PPL": f"{r['ppl']:.2f}",
                "PPL vs base": f"{pages.pct(vb['ppl_change'])} {pages.interval(*vb['ppl_ci'])}"
                if vb else "",
                "PPL vs LoRA": f"{pages.pct(vl['ppl_change'])} {pages.interval(*vl['ppl_ci'])}"
                if vl else "",
                "last-word acc.": f"{r['accuracy']:.1%} ({r['correct']}/{F['n_items']})",
                "acc. vs LoRA (pp)": f"{100 * vl['acc_diff']:+.1f} [{100 * ci[0]:+.1f}, "
                f"{100 * ci[1]:+.1f}]" if ci[0] is not None else ""})
    return pd.DataFrame(rows).set_index(["model", "variant"])


def cache_table(F: dict):
    return pd.DataFrame([{
        "model": m, "variant": v, "cache bytes": r["cache_check"]["bytes"],
        "cached vs uncached (rel.)": r["cache_check"]["max_abs"] / r["cache_check"]["scale"],
        "control: vs base model (rel.)": r["cache_check"].get("reference_max_abs", np.nan)
        / r["cache_check"]["scale"]}
        for m, st in F["studies"].items() for v, r in st.items()]
    ).set_index(["model", "variant"]).style.format(
        {"cached vs uncached (rel.)": "{:.1e}", "control: vs base model (rel.)": "{:.1e}"})


def decode_table(F: dict) -> pd.DataFrame:
    return pd.DataFrame([{"model": m, "batch": b, "base ms/token": 1e3 * t["base"],
                          "pre+skip ms/token": 1e3 * t["pre+skip"],
                          "overhead": f"{t['pre+skip'] / t['base'] - 1:+.1%}"}
                         for m, dm in F["decode"].items() for b, t in dm.items()]
                        ).set_index(["model", "batch"]).round(2)


def glue(F: dict) -> dict:
    """The numbers the prose quotes."""
    st = F["studies"][next(iter(F["studies"]))]
    vb, vl = st["pre+skip"]["vs_base"], st["pre+skip"]["vs_lora"]
    gates = [u["gate"] for u in st["pre+skip"]["skip_use"]]
    return {"min_correct": str(MIN_CORRECT), "smol_vs_base": pages.pct(vb["ppl_change"]),
            "smol_lora_vs_base": pages.pct(st["lora"]["vs_base"]["ppl_change"]),
            "smol_vs_lora": f"{pages.pct(vl['ppl_change'])} {pages.interval(*vl['ppl_ci'])}",
            "gate_range": f"{min(gates):.3f}–{max(gates):.3f}",
            "train_tokens": f"{st['pre+skip']['train_tokens']:,}"}


# ------------------------------------------------------------------ claims


def _scale(F):
    return "; ".join(f"{m}: k={s['k']}, {s['steps']} steps × {s['batch']}×{s['window']} tokens, "
                     f"{s['eval_tokens']:,} eval tokens, {s['items']} last-word items, "
                     f"{len(s.get('seeds', [s.get('seed')]))} seed(s)"
                     for m, s in F["setup"].items())


def _over_seeds(F, m, key: str, one_seed: tuple) -> tuple:
    """The interval a claim reads for model `m`: the union of a t interval over its seeds'
    values of `key` (`by_seed`: the spread between seeds) and the first seed's own BCa interval
    over windows or items (the sampling of the evaluation set, which the seeds share); with
    one seed only the latter, which `needs_seeds` then keeps from deciding."""
    vals = [r[key] for r in F.get("by_seed", {}).get(m, []) if r.get(key) is not None]
    if len(vals) < 2 or None in one_seed:
        return tuple(one_seed)
    _, lo, hi = stats.t_interval(vals)
    return min(lo, one_seed[0]), max(hi, one_seed[1])


def _n_seeds(F, m) -> int:
    """How many seeds model `m`'s probes were trained from, as its results record them."""
    setup = F["setup"][m]
    return len(setup.get("seeds", [setup["seed"]]))


def _pct(x):
    return "n/a" if x is None else f"{x:+.1%}"


def claim_ppl(F, S) -> Claim:
    """P4: "~40 % lower perplexity" from the frozen probes (Pythia-160M: −39 %). Any trained
    parameters lower perplexity on similar text, so the modules are judged against LoRA at the
    same trainable budget: the interval of PPL(modules)/PPL(LoRA) − 1 must lie below
    −MIN_PPL_GAIN (reproduced); above it, not reproduced."""
    decs, texts = {}, []
    for m, st in F["studies"].items():
        r = st[MAIN]
        lo, hi = _over_seeds(F, m, "ppl_vs_lora", r["vs_lora"]["ppl_ci"])
        decs[m] = needs_seeds(effect(-hi - MIN_PPL_GAIN, -lo - MIN_PPL_GAIN,
                                     what=f"LoRA − modules PPL change beyond {MIN_PPL_GAIN:g}"),
                              _n_seeds(F, m))
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
    same budget: the interval of accuracy(modules) − accuracy(LoRA) must lie above
    MIN_ACC_GAIN (reproduced; below it, not reproduced); a model counts only if its frozen base
    gets MIN_CORRECT items right."""
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
            lo, hi = _over_seeds(F, m, "acc_diff_vs_lora", (lo, hi))
            decs[m] = needs_seeds(effect(lo - MIN_ACC_GAIN, hi - MIN_ACC_GAIN,
                                         what=f"modules − LoRA accuracy beyond {MIN_ACC_GAIN:g}"),
                                  _n_seeds(F, m))
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
        lo, hi = _over_seeds(F, m, "skip_rho", (lo, hi))
        decs[m] = needs_seeds(effect(lo - MIN_RHO, hi - MIN_RHO,
                                     what=f"Spearman ρ beyond {MIN_RHO:g}"), _n_seeds(F, m))
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
