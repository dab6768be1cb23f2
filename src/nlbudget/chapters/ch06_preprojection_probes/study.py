"""Chapter 06's settings and the experiment's phases (the notebook runs them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from tqdm.std import tqdm

from nlbudget import preprojection, timing, training
from nlbudget.assets import corpora, models
from nlbudget.evaluation import bootstrap_cost, encode_items, eval_nll, last_word_eval, perplexity
from nlbudget.verdicts import stats

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
    # full: the pair's probes trained to their plateau (20 steps left their training loss
    # falling and perplexity unmoved); SmolLM2's stay at 20 steps: its probes already took
    # 3,137 s of the chapter's 3,203 s at full (the pair's 20 steps included)
    "full": dict(models="smollm2-135m", corpus="pydocs", lastword="pydocs", dtype="float32",
                 window=128, train_windows=256, eval_windows=16, lastword_items=200,
                 lastword_context=128, k=16, steps=20, batch_size=4, lr=1e-3,
                 **training.PAIR["full"], pair_k=8, pair_probe_steps=400, pair_probe_batch=16,
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

PAIR_NAME = "pythia-style (neox-par)"


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
    dtype = models.DTYPES[S["dtype"]]
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
    pair, log = training.train_pair("neox-par", S, text, tok, S["device"])
    tr = training.encode(text, tok, "train")
    run = probe_run(S, PAIR_NAME, pair, tok, preprojection.matched_budget(pair, S["pair_k"]),
                    tr[: len(tr) // C * C].view(-1, C), training.pair_val(text, tok, S),
                    encode_items(items, tok, C), S["pair_probe_steps"], S["pair_probe_batch"])
    run.train_log = {"tokens": log["tokens"], "params": log["params"],
                     "val_curve": log.get("val_curve")}
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
