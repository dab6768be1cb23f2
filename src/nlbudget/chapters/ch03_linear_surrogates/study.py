"""Chapter 03's settings and the experiment's phases (the notebook runs them)."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import torch

from nlbudget import paths, surrogates, timing, training
from nlbudget.assets import corpora, devices
from nlbudget.capture import blocks, mlps
from nlbudget.evaluation import bootstrap_cost, eval_nll, perplexity
from nlbudget.verdicts import stats

KEY, STEM = "03", "03_linear_surrogates"

#: The matched pair: sequential (GPT-2's topology) and parallel (Pythia's) residual.
KINDS = ("neox-seq", "neox-par")

_PAPER_MODELS = ("gpt2-medium,gpt2-large,EleutherAI/pythia-160m,EleutherAI/pythia-410m,"
                 "EleutherAI/pythia-1b,EleutherAI/pythia-2.8b")

SETTINGS = {
    "smoke": dict(models="smollm2-135m", corpus="pydocs", dtype="float32", window=32,
                  fit_windows=8, eval_windows=4, batch_size=4, **training.PAIR["smoke"],
                  pair_seeds=1, ft_steps=2, ft_final_steps=2, ft_lr=1e-4, n_boot=100),
    # fit_windows × window ≈ 10k tokens, P3's fit size (fewer over-fit the 577-parameter rows of
    # W and b: 16 windows raised the worst keep-first layer's cost from +19 % to +133 %);
    # eval_windows = chapter 04's gate_windows: the same windows, measured once (`memo`)
    "ci": dict(models="smollm2-135m", corpus="pydocs", dtype="float32", window=256,
               fit_windows=40, eval_windows=2, batch_size=8, **training.PAIR["ci"],
               pair_seeds=1, ft_steps=6, ft_final_steps=6, ft_lr=1e-4, n_boot=1000),
    # full: three seeds of the pair (the seed rows); 64 evaluation windows, sized from a first
    # full run at 16, where 2 of 30 layers' corrected intervals still crossed 0 (about ±2 %:
    # four times the windows halve them); progressive linearization with P3's schedule (50
    # steps after each layer, 200 at the end)
    "full": dict(models="smollm2-135m", corpus="pydocs", dtype="float32", window=256,
                 fit_windows=40, eval_windows=64, batch_size=8, **training.PAIR["full"],
                 pair_seeds=3, ft_steps=50, ft_final_steps=200, ft_lr=1e-4, n_boot=10000),
    "paper": dict(models=_PAPER_MODELS, corpus="wikitext-103", dtype="float32", window=512,
                  fit_windows=20, eval_windows=100, batch_size=8, **training.PAIR["paper"],
                  pair_seeds=3, ft_steps=50, ft_final_steps=200, ft_lr=1e-4, n_boot=10000),
}

#: P3's threshold for a "cheap" layer, and the share of layers the text reports under it.
CHEAP, CHEAP_SHARE = 0.03, 0.70

REFERENCE = "data/reference/p3_all_linear_costs.csv"


def windows(S: dict, text, tok) -> dict:
    """Fit and evaluation windows for a pretrained model, from one mixture of the corpus's
    documents (shuffled paragraphs of its train split, dealt to disjoint ranges). Chapter 04
    deals its fit and gate-training windows by this same call, so with the same counts its
    ridge fits and per-token losses are this chapter's, read back rather than recomputed."""
    return corpora.mixed_windows(text, tok, S["window"], {"fit": S["fit_windows"],
                                                          "eval": S["eval_windows"]}, S["seed"])


def variants(model, fits: dict) -> dict:
    """The two ways to linearize a layer: `plain` (fit and replace at every position, the
    paper's method) and `keep-first` (fit without position 0, keep the full MLP there).
    `fits` is `surrogates.fit_layers_both`'s {skip_first: (fits, R²)}."""
    mlp = mlps(model)
    return {"plain": fits[False][0],
            "keep-first": {l: surrogates.KeepFirst(mlp[l], f) for l, f in fits[True][0].items()}}


@timing.timed("middle third")
def middle_third(model, variants: dict, eval_windows: torch.Tensor, sweep, S: dict) -> dict:
    """The middle third of the layers linear at once, for each variant, and its MLPs zeroed
    (`ablated`: what linearizing them could lose at most), against the sweep's baseline
    losses."""
    layers = surrogates.middle_layers(len(sweep.linear["plain"]))
    out = {"layers": layers}
    zeroed = {l: surrogates.Ablated() for l in layers}
    for v, mods in {**variants, "ablated": zeroed}.items():
        with surrogates.replaced(model, {l: mods[l] for l in layers}):
            nll = eval_nll(model, eval_windows, S["batch_size"])
        out[v] = {"cost": perplexity(nll) / perplexity(sweep.baseline) - 1,
                  "ci": bootstrap_cost(sweep.baseline, nll, S["n_boot"], S["seed"])}
    return out


def layer_report(model, fits: dict, sweep, middle: dict, fit_windows: torch.Tensor,
                 S: dict) -> dict:
    """What Part II.a keeps for one model: each layer's R² and cost with a bootstrap interval
    over evaluation windows, and one corrected for the number of layers (`ci_family`: "does
    any layer improve?"), per variant; the middle third; ‖y₀‖ against the other positions."""
    L, n_boot, seed = len(sweep.linear["plain"]), S["n_boot"], S["seed"]
    report = {"n_layers": L, "baseline_ppl": perplexity(sweep.baseline),
              "eval_tokens": int(sweep.baseline.numel()), "fit_tokens": int(fit_windows.numel()),
              "first_position_ratio": surrogates.first_position_ratio(
                  model, fit_windows[:S["batch_size"]]),
              "r2": {"plain": [fits[False][1][l] for l in range(L)],
                     "keep-first": [fits[True][1][l] for l in range(L)]},
              "cost": {}, "ci": {}, "ci_family": {}, "middle": middle,
              "family_level": stats.bonferroni(L)}
    for v, losses in sweep.linear.items():
        report["cost"][v] = [sweep.cost(v, l) for l in range(L)]
        report["ci"][v] = [bootstrap_cost(sweep.baseline, losses[l], n_boot, seed)
                           for l in range(L)]
        report["ci_family"][v] = [bootstrap_cost(sweep.baseline, losses[l], n_boot, seed,
                                                 report["family_level"]) for l in range(L)]
    return report


def pair_data(S: dict, text) -> dict:
    """The pair's tokenizer, streams, fit windows (≈ 10k tokens, as P3) and eval windows."""
    tok = training.train_tokenizer(text, vocab_size=S["pair_vocab"])
    train_stream = training.encode(text, tok, "train")
    C = S["pair_context"]
    return {"tok": tok, "train": train_stream, "context": C,
            "fit": train_stream[: 80 * C].view(80, C), "eval": training.pair_val(text, tok, S)}


def seeds(S: dict) -> list[int]:
    """The matched pair's seeds (`pair_seeds` of them, from the run's seed on): both models are
    trained from each, so the pair is compared in pairs over seeds."""
    return [S["seed"] + i for i in range(S["pair_seeds"])]


def add_seed(group: dict, kind: str, seed: int, record: dict, summary: dict) -> None:
    """File one seed's run: the first seed's whole record is the page's (tables, plots);
    every seed's `summary` goes to `by_seed`, which the claims read."""
    group.setdefault(kind, record)
    group[kind].setdefault("by_seed", []).append({"seed": seed, **summary})


def pair_summary(record: dict) -> dict:
    """What the claims read of one seed of a pair model."""
    return {"ablation_cost": record["ablation"]["cost"],
            "middle_cost": record["report"]["middle"]["plain"]["cost"],
            "middle_ablation": record["report"]["middle"]["ablated"]["cost"],
            "curve": record.get("curve")}


def progressive_summary(run: dict) -> dict:
    """Validation perplexity of one seed's progressive run: the original model (start), the
    linearized model and the equal-compute control at the end."""
    return {"start_ppl": run["linearized"][0]["val_ppl"],
            "linearized_ppl": run["linearized"][-1]["val_ppl"],
            "control_ppl": run["control"][-1]["val_ppl"]}


@timing.timed("pair: training")
def train_pair(kind: str, seed: int, S: dict, text, data: dict):
    """One model of the matched pair from `seed`, trained here (or read from the cache);
    returns (the model, what its results record of the training)."""
    model, log = training.train_pair(kind, {**S, "seed": seed}, text, data["tok"], S["device"])
    return model, {"params": log["params"], "train_tokens": log["tokens"], "seed": seed,
                   "final_train_loss": float(np.mean(log["train_loss"][-20:])),
                   "curve": log.get("val_curve")}


@timing.timed("pair: ablation")
def ablation_cost(model, windows: torch.Tensor, batch_size: int = 8) -> dict:
    """Validation perplexity with every MLP intact and with every MLP zeroed."""
    base = perplexity(eval_nll(model, windows, batch_size))
    with surrogates.replaced(model, {l: surrogates.Ablated() for l in range(len(blocks(model)))}):
        ablated = perplexity(eval_nll(model, windows, batch_size))
    return {"ppl": base, "ppl_mlps_ablated": ablated, "cost": ablated / base - 1}


def schedule(S: dict, data: dict, seed: int) -> dict:
    """Progressive linearization's schedule (P3 §5): the middle layers centre-out, `ft_steps`
    per stage and `ft_final_steps` at the end, batches drawn from `seed`; the control runs the
    same schedule without linearizing."""
    return dict(order=surrogates.centre_out(S["pair_layers"], S["pair_layers"] // 2),
                fit_windows=data["fit"], train_stream=data["train"], val_windows=data["eval"],
                steps_per_stage=S["ft_steps"], final_steps=S["ft_final_steps"], lr=S["ft_lr"],
                batch_size=S["pair_batch"], context=data["context"], seed=seed)


@timing.timed("progressive")
def progressive_linearization(model, order: list[int], fit_windows: torch.Tensor,
                              train_stream: torch.Tensor, val_windows: torch.Tensor,
                              steps_per_stage: int, final_steps: int, lr: float,
                              batch_size: int, context: int, seed: int,
                              linearize: bool = True, progress=None) -> list[dict]:
    """P3 §5 on a copy of `model`: for each layer of `order` (centre outwards) fit a ridge
    surrogate on the current model, freeze it in place of the MLP, then fine-tune every
    other parameter for `steps_per_stage` steps; finish with `final_steps`. With
    `linearize=False` the same schedule runs without linearizing (the equal-compute
    control). Returns the validation perplexity after each stage."""
    m = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=lr,
                            betas=(0.9, 0.95), weight_decay=0.0)

    def val_ppl():
        m.eval()
        return perplexity(eval_nll(m, val_windows))

    records = [{"stage": "start", "linear_layers": [], "steps": 0, "val_ppl": val_ppl()}]
    linear, steps = [], 0
    for layer, n_steps in [(l, steps_per_stage) for l in order] + [(None, final_steps)]:
        if layer is not None and linearize:
            m.eval()
            fits, _ = surrogates.fit_layers(m, fit_windows, layers=[layer])
            # buffers only: frozen, no gradients
            blocks(m)[layer].mlp = devices.follow(fits[layer], blocks(m)[layer])
            linear.append(layer)
        for _ in range(n_steps):
            training.lm_step(m, training.random_windows(train_stream, batch_size, context, gen), opt)
            if progress is not None:
                progress.update(1)
        steps += n_steps
        records.append({"stage": "final" if layer is None else f"L{layer}",
                        "linear_layers": list(linear), "steps": steps, "val_ppl": val_ppl()})
    return records


def summarise(F: dict) -> dict:
    """Per model and surrogate variant: share of cheap layers, median, max, middle third."""
    out = {}
    for name, rep in F["pretrained"].items():
        for v in ("plain", "keep-first"):
            out[f"{name} / {v}"] = _row(rep, v)
    for kind, p in F["pair"].items():
        out[f"{kind} / plain"] = _row(p["report"], "plain")
    return out


def summary_table(F: dict) -> pd.DataFrame:
    return pd.DataFrame(summarise(F)).T


def _row(rep, v):
    c = np.array(rep["cost"][v])
    return {"share < 3%": float(np.mean(c < CHEAP)), "median cost": float(np.median(c)),
            "max cost": float(c.max()), "middle-third cost": rep["middle"][v]["cost"]}


def author_costs() -> pd.DataFrame:
    """The author's per-layer all-linear costs (transcribed, cited in the file)."""
    return pd.read_csv(paths.shipped() / REFERENCE)
