"""Chapter 04's settings and the experiment's phases (the notebook runs them)."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from tqdm.std import tqdm

from nlbudget import budget, capture, gating, surrogates, timing, training
from nlbudget import two_phase as two_phase_
from nlbudget.assets import corpora, models
from nlbudget.capture import blocks, mlps
from nlbudget.evaluation import bootstrap_cost, perplexity
from nlbudget.gating import GATE_KINDS
from nlbudget.verdicts import stats

KEY, STEM = "04", "04_adaptive_gating"

GATES = ",".join(GATE_KINDS)

#: `gates` is a comma-separated list of these (`book.profiles.validate` checks it).
LIST_CHOICES = {"gates": GATE_KINDS}

SETTINGS = {
    "smoke": dict(models="smollm2-135m", corpus="pydocs", cross_corpus="shakespeare",
                  dtype="float32", window=32, fit_windows=8, gate_windows=6, select_windows=4,
                  eval_windows=4, batch_size=4, gates="linear,pca-2,mlp-16", curve_layers=2,
                  nofly_windows=4, max_cost=0.01, **training.PAIR["smoke"], pair_seeds=1,
                  phase1_steps=2, phase2_steps=2, ft_lr=1e-4, gate_lr=1e-3, sparsity=0.1, n_boot=50,
                  random_draws=3, speed_rounds=2),
    # ci: random routing drawn twice (full: 3; its sweep was most of the chapter's time)
    "ci": dict(models="smollm2-135m", corpus="pydocs", cross_corpus="shakespeare",
               dtype="float32", window=256, fit_windows=40, gate_windows=2, select_windows=2,
               eval_windows=2, batch_size=8, gates=GATES, curve_layers=2, nofly_windows=2,
               max_cost=0.01, **training.PAIR["ci"], pair_seeds=1, phase1_steps=4, phase2_steps=4,
               ft_lr=1e-4, gate_lr=1e-2, sparsity=0.1, n_boot=1000, random_draws=2,
               speed_rounds=2),
    # full: gates fit on 64 windows (16,384 tokens; the paper 25–50k, tex line 103): on 8
    # windows (2,048 tokens) the 577-parameter gates over-fit (training AUC 0.83, held out
    # 0.52) and failed their positive control. The δ sweep costs ≈ 30 s a window, so the select
    # windows go from 48 to 20 (the power calculation put the gate-AUC row at 18) within the
    # 60-minute budget; routing would need ≈ 70 evaluation windows, so eval_windows stays 8.
    # Two-phase on the pair (trained to its plateau): a tenth of P3's 2,000 + 3,000 steps.
    # speed_rounds: paired timing rounds of the wall-clock saved (a few at smoke and ci; the
    # decided figures are full's)
    "full": dict(models="smollm2-135m", corpus="pydocs", cross_corpus="shakespeare",
                 dtype="float32", window=256, fit_windows=40, gate_windows=64, select_windows=20,
                 eval_windows=8, batch_size=8, gates=GATES, curve_layers=2, nofly_windows=16,
                 max_cost=0.01, **training.PAIR["full"], pair_seeds=3, phase1_steps=200,
                 phase2_steps=300, ft_lr=1e-4, gate_lr=1e-2, sparsity=0.1, n_boot=10000,
                 random_draws=3, speed_rounds=30),
    "paper": dict(models="gpt2-medium,EleutherAI/pythia-410m", corpus="wikitext-103",
                  cross_corpus="lambada", dtype="float32", window=512, fit_windows=20,
                  gate_windows=60, select_windows=20, eval_windows=24, batch_size=8, gates=GATES,
                  curve_layers=6, nofly_windows=100, max_cost=0.01, **training.PAIR["paper"],
                  pair_seeds=3, phase1_steps=2000, phase2_steps=3000, ft_lr=2e-5, gate_lr=1e-3,
                  sparsity=0.1, n_boot=10000, random_draws=3, speed_rounds=30),
}


def spread(n_layers: int, n: int) -> list[int]:
    """n layers spread evenly over the depth (the routing-curve layers)."""
    return sorted({min(n_layers - 1, round(n_layers * (i + 0.5) / n)) for i in range(n)})


def _ranges(spans):
    return {k: [v.start, v.stop] for k, v in spans.items()}


def windows(S: dict, text, tok) -> dict:
    """The fit / gate / select / no-fly / eval ranges of windows for a pretrained model: one
    shuffled mixture of the corpus's train-split paragraphs, dealt to disjoint ranges.

    Fit and gate windows are dealt first, exactly as chapter 03 deals its fit and evaluation
    windows (`ch03.windows`): with the same counts they are the same windows, so the ridge
    fits and the per-token losses chapter 03 measured on them are read back (`memo`), not
    recomputed. The other ranges are dealt from the paragraphs left."""
    first = corpora.mixed_windows(text, tok, S["window"], {
        "fit": S["fit_windows"], "gate": S["gate_windows"]}, S["seed"])
    taken = [i for span in first.values() for i in span.paragraphs]
    rest = corpora.mixed_windows(text, tok, S["window"], {
        "select": S["select_windows"], "nofly": S["nofly_windows"],
        "eval": S["eval_windows"]}, S["seed"], exclude=taken)
    return {**first, **rest}


@dataclass
class Run:
    """One model under study and what differs between the pretrained models and the pair:
    its ridge fits (every layer, without position 0, which always keeps its MLP), its gate /
    select / eval windows, the layers that get every gate kind, the batch size."""

    model: nn.Module
    fits: dict
    gate: torch.Tensor  # training windows: δ labels, gates fit
    select: torch.Tensor  # held out from training: AUCs, the order for compound gating
    eval: torch.Tensor  # final: costs
    S: dict
    curve_layers: list[int]
    batch_size: int
    progress: object = None  # a tqdm bar over the sweeps' windows, or None
    r2: list | None = None  # R² of each layer's fit, where the chapter reports it
    seed: int | None = None  # the seed a pair model was trained from (else the run's)
    curve: list | None = None  # a pair model's validation curve over its training

    @property
    def L(self) -> int:
        return len(self.fits)

    @property
    def family(self) -> float:
        """The per-layer level of intervals that hold together over the L layers."""
        return stats.bonferroni(self.L)

    def hybrid(self, gates: list[dict], l: int, kind: str = "linear:x", thr: float = 0.5):
        """Layer l's MLP behind one of its gates, routing tokens with g > thr to the surrogate."""
        return gating.HybridMLP(mlps(self.model)[l], self.fits[l], gates[l]["gates"][kind], thr)


def pretrained_run(name: str, S: dict, text) -> tuple[Run, object, dict]:
    """A pretrained model, its windows (`windows`) and ridge fits (read back from chapter 03's
    memo where the windows agree). Returns (run, tokenizer, the windows by range)."""
    dtype = models.DTYPES[S["dtype"]]
    model, tok = models.load(name, dtype=dtype, device=S["device"])
    spans = windows(S, text, tok)
    fits, r2 = surrogates.fit_layers(model, spans["fit"].windows, batch_size=S["batch_size"],
                                     skip_first=True, dtype=dtype)
    bar = tqdm(total=S["gate_windows"] + S["select_windows"] + S["eval_windows"],
               desc=f"{name}: sweeps", mininterval=30)
    run = Run(model, fits, spans["gate"].windows, spans["select"].windows, spans["eval"].windows,
              S, spread(len(fits), S["curve_layers"]), S["batch_size"], bar)
    run.r2 = [r2[l] for l in range(len(fits))]
    return run, tok, spans


def pair_run(kind: str, seed: int, S: dict, text, data: dict) -> Run:
    """One model of the matched pair from `seed` (trained by chapter 03, read from the cache),
    fit on its own training stream; one routing-curve layer and half the pair's evaluation
    windows."""
    model, log = training.train_pair(kind, {**S, "seed": seed}, text, data["tok"], S["device"])
    spans = data["spans"]
    fits, _ = surrogates.fit_layers(model, spans["fit"].windows, skip_first=True)
    return Run(model, fits, spans["gate"].windows, spans["select"].windows,
               data["eval"][: len(data["eval"]) // 2], S, spread(S["pair_layers"], 1),
               2 * S["batch_size"], seed=seed, curve=log.get("val_curve"))


def seeds(S: dict) -> list[int]:
    """The matched pair's seeds (`pair_seeds`, from the run's seed on), as chapter 03 trains them."""
    return [S["seed"] + i for i in range(S["pair_seeds"])]


def add_seed(group: dict, kind: str, seed: int, record: dict) -> None:
    """File one seed's two-phase run: the first seed's record is the page's; every seed's
    final perplexities (and learning curve) go to `by_seed`, which the claim reads."""
    keep = ("start_ppl", "phase1_ppl", "phase2_soft_ppl", "phase2_hard_ppl", "control_ppl", "curve")
    group.setdefault(kind, record)
    group[kind].setdefault("by_seed", []).append({"seed": seed, **{k: record.get(k) for k in keep}})


def pair_data(S: dict, text) -> dict:
    """The pair's tokenizer, training stream, its fit / gate / select windows, and the
    validation windows."""
    tok = training.train_tokenizer(text, vocab_size=S["pair_vocab"])
    train_stream = training.encode(text, tok, "train")
    C = S["pair_context"]
    spans = corpora.consecutive_windows(train_stream, C, {"fit": 80, "gate": 4 * S["gate_windows"],
                                                          "select": 4 * S["select_windows"]})
    return {"tok": tok, "train": train_stream, "context": C, "spans": spans,
            "eval": training.encode(text, tok, "validation")[: S["pair_eval_windows"] * C].view(-1, C)}


def _rows(a: torch.Tensor) -> torch.Tensor:
    """Positions 1 … T−2 of (N, T, …) as rows: the tokens that have a next-token loss and
    are not the first position (which always keeps its MLP)."""
    return a[:, 1:-1].reshape(-1, *a.shape[2:])


def _deltas(sweep, variant: str) -> dict[int, torch.Tensor]:
    """δ = L_lin − L_full per token, positions 1 … T−2: {layer: (N, T−2)}."""
    return {l: (nll - sweep.baseline)[:, 1:] for l, nll in sweep.linear[variant].items()}


@timing.timed("gating: δ sweeps")
def deltas(run: Run) -> dict:
    """Phase 1. δ per token on the training and selection windows: one linearization sweep of
    each (the training windows' may be read back from chapter 03's measurement, `memo`), and
    each layer's all-linear cost on them."""
    S, L, n_gate = run.S, run.L, run.gate.shape[0]
    lin = {l: surrogates.KeepFirst(mlps(run.model)[l], run.fits[l]) for l in range(L)}
    halves = [surrogates.linearization_sweep(run.model, w, {"linear": lin}, run.batch_size,
                                             run.progress) for w in (run.gate, run.select)]
    sw = surrogates.Sweep(torch.cat([h.baseline for h in halves]),
                          {"linear": {l: torch.cat([h.linear["linear"][l] for h in halves])
                                      for l in range(L)}})
    d_all = _deltas(sw, "linear")
    return {"sweep": sw, "gate": {l: d[:n_gate] for l, d in d_all.items()},
            "select": {l: d[n_gate:] for l, d in d_all.items()},
            "all_linear": {l: (sw.cost("linear", l), bootstrap_cost(
                sw.baseline, sw.linear["linear"][l], S["n_boot"], S["seed"])) for l in range(L)}}


@timing.timed("gating: activations")
def activations(run: Run) -> dict:
    """Every layer's MLP input x, residual stream h and the token embeddings e on the training
    and selection windows, as the gates read them."""
    return capture.activations(run.model, torch.cat([run.gate, run.select]), run.batch_size)


def _parts(acts, l, rows):
    """What a gate may read at layer l, as rows: x (the routing gate's input), and the residual
    stream h = e + c split into token embedding e and context c (P3 §4.2)."""
    h = _rows(acts[f"blocks.{l}.mlp.resid"][rows])
    e, c = gating.split_token_context(h, _rows(acts["embed"][rows]))
    return {"x": _rows(acts[f"blocks.{l}.mlp.in"][rows]), "h": h.double(), "e": e, "c": c}


@timing.timed("gating: gates and AUCs")
def layer_gates(run: Run, d: dict, acts: dict, l: int,
                fractions=(0.1, 0.25, 0.75, 0.9)) -> dict:
    """Phase 2, layer l. δ labels on the training tokens; a d+1 gate on x (the router), and on
    h, e, c (token vs context); at the curve layers every gate kind, at thresholds routing as
    many training tokens as the d+1 gate. Each gate's AUC on the held-out selection tokens, with
    intervals over windows (and Bonferroni over layers for "any"/"share" claims)."""
    S, seed, n_boot, family = run.S, run.S["seed"], run.S["n_boot"], run.family
    kinds = S["gates"].split(",")
    n_gate = run.gate.shape[0]
    window_of = _rows(torch.arange(run.select.shape[0])[:, None].expand(run.select.shape)).numpy()
    y, thr, rule = gating.delta_labels(d["gate"][l])
    X, Xs = _parts(acts, l, slice(0, n_gate)), _parts(acts, l, slice(n_gate, None))
    gates = {f"linear:{p}": gating.fit_gate("linear", X[p], y, seed) for p in "xhec"}
    with torch.no_grad():  # the share of training tokens the d+1 gate routes at g > ½
        on_train = gates["linear:x"](X["x"])
        routed_train = float((on_train > 0.5).double().mean())
    auc_train = stats.auc(on_train.numpy(), y.numpy())  # beside the held-out AUC: over-fitting
    same_share = {}
    if l in run.curve_layers:
        gates.update({k: gating.fit_gate(k, X["x"], y, seed) for k in kinds if k != "linear"})
        with torch.no_grad():  # thresholds at which the other gates route as many tokens
            same_share = {k: gating.threshold_for_fraction(gates[k](X["x"]), routed_train)
                          for k in kinds if k != "linear"}
    yl = gating.delta_labels(d["select"][l])[0].numpy()
    with torch.no_grad():
        scores = {k: g(Xs[k.split(":")[1] if ":" in k else "x"]).numpy() for k, g in gates.items()}
        sel_score = gates["linear:x"](Xs["x"])
    aucs = {k: stats.bootstrap_auc(s, yl, window_of, n_boot, seed) for k, s in scores.items()}
    fam = {k: stats.bootstrap_auc(scores[k], yl, window_of, n_boot, seed, family)
           for k in ("linear:x", "linear:h", "linear:e")}
    pairs = [(k, "linear:x") for k in scores if not k.startswith("linear:")]
    pairs += [(k, "linear:h") for k in ("linear:c", "linear:e")]
    diffs = {f"{a}−{b}": stats.bootstrap_auc_diff(scores[a], scores[b], yl, window_of, n_boot,
                                                  seed, family) for a, b in pairs}
    row = {"layer": l, "labels": {"threshold": thr, "rule": rule,
                                  "share_linear_ok": float(y.double().mean())},
           "all_linear": {"cost": d["all_linear"][l][0], "ci": d["all_linear"][l][1]},
           "auc": aucs, "auc_train": auc_train, "auc_family": fam, "auc_diff_family": diffs,
           "delta": gating.delta_summary(d["gate"][l]),
           "gate_params": {k: g.n_params for k, g in gates.items()}}
    if l in run.curve_layers:
        qs = np.linspace(0, 1, 41)
        row["delta_quantiles"] = {"q": qs.tolist(), "delta": torch.quantile(
            d["gate"][l].double().flatten(), torch.tensor(qs)).tolist()}
        row["thresholds"] = {f: gating.threshold_for_fraction(gates["linear:x"](X["x"]), f)
                             for f in fractions}
    return {"gates": gates, "row": row, "sel_score": sel_score, "routed_train": routed_train,
            "same_share": same_share}


@torch.no_grad()
def eval_shares(run: Run, layers: list[dict]) -> list[float]:
    """Each layer's share of evaluation tokens (positions 1 …, as the gate sees them in the
    sweep: the unmodified prefix's MLP input) that its d+1 gate routes at g > ½ — the share its
    random control routes, on the same tokens."""
    acts = capture.activations(run.model, run.eval, run.batch_size)
    return [float((layers[l]["gates"]["linear:x"](acts[f"blocks.{l}.mlp.in"][:, 1:].flatten(0, 1))
                   > 0.5).double().mean()) for l in range(run.L)]


@timing.timed("gating: routing")
def routing(run: Run, layers: list[dict]) -> dict:
    """Phase 3. On the evaluation windows, one sweep: each layer's d+1 gate (g > ½); the control,
    random routing of the share of these same evaluation tokens the gate routes (`eval_shares`);
    at the curve layers the d+1 gate at other thresholds and every other kind at the same share
    as on its training tokens. Fills each layer's row with its costs and intervals; returns the
    sweep and its variants."""
    S, seed, n_boot, family = run.S, run.S["seed"], run.S["n_boot"], run.family
    mlp, L, draws = mlps(run.model), run.L, S["random_draws"]
    kinds, curve = S["gates"].split(","), run.curve_layers
    share = eval_shares(run, layers)
    variants = {"gate": {l: run.hybrid(layers, l) for l in range(L)},
                **{f"random{k}": {l: gating.RandomRouting(
                    mlp[l], run.fits[l], share[l], seed + 1000 * (k + 1) + l)
                    for l in range(L)} for k in range(draws)}}
    fractions = list(layers[curve[0]]["row"]["thresholds"]) if curve else []
    for f in fractions:
        variants[f"linear@{f:g}"] = {l: run.hybrid(layers, l, thr=layers[l]["row"]["thresholds"][f])
                                     for l in curve}
    for k in kinds:
        if k != "linear":
            variants[k] = {l: run.hybrid(layers, l, k, layers[l]["same_share"][k]) for l in curve}
    ev = surrogates.linearization_sweep(run.model, run.eval, variants, run.batch_size, run.progress)

    def result(v, l):
        return {"cost": ev.cost(v, l), "routed": variants[v][l].fraction,
                "ci": bootstrap_cost(ev.baseline, ev.linear[v][l], n_boot, seed),
                "ci_family": bootstrap_cost(ev.baseline, ev.linear[v][l], n_boot, seed, family)}

    for l, row in enumerate(layer["row"] for layer in layers):
        row["gate"] = result("gate", l)
        # the expected loss under random routing: the mean over draws, token by token;
        # relative to the gate, > 0 where the gate chose better than chance
        rnd = torch.stack([ev.linear[f"random{k}"][l] for k in range(draws)]).mean(0)
        cost = perplexity(rnd) / perplexity(ev.baseline) - 1
        row["random"] = {
            "cost": cost, "draws": [ev.cost(f"random{k}", l) for k in range(draws)],
            "routed": float(np.mean([variants[f"random{k}"][l].fraction for k in range(draws)])),
            "target": share[l], "target_train": layers[l]["routed_train"],
            "vs_gate": cost - row["gate"]["cost"],
            "ci": bootstrap_cost(ev.baseline, rnd, n_boot, seed),
            "vs_gate_ci_family": bootstrap_cost(ev.linear["gate"][l], rnd, n_boot, seed, family)}
        if l in curve:
            row["curve"] = sorted([{"threshold": row["thresholds"][f], "target": f,
                                    **result(f"linear@{f:g}", l)} for f in fractions]
                                  + [{"threshold": 0.5, "target": None, **row["gate"]}],
                                  key=lambda p: p["routed"])
            row["kinds"] = {"linear": row["gate"],
                            **{k: result(k, l) for k in kinds if k != "linear"}}
    return {"sweep": ev, "variants": variants}


@timing.timed("gating: compound")
def compound_gating(run: Run, layers: list[dict], d: dict, ev: dict,
                    compound_grid=None) -> dict:
    """Phase 4. Every layer's gate at once on the evaluation windows; then the greedy choice:
    layers ordered by the loss each gate is expected to add on the selection windows, the
    largest prefix of that order whose cost on the selection windows stays under `max_cost`,
    measured on the evaluation windows; FLOPs and wall-clock saved."""
    S, L, bs = run.S, run.L, run.batch_size
    n_boot, seed, base = S["n_boot"], S["seed"], ev["sweep"].baseline
    comp = {l: run.hybrid(layers, l) for l in range(L)}
    fl = gating.flops_per_token(run.model, run.eval.shape[1])

    def saved(r):
        return fl.saved([r["routed"].get(l, 0.0) for l in range(L)])

    all_on = budget.measure_combined(run.model, run.eval, comp, bs, base, n_boot, seed)
    expected = {l: float((d["select"][l].flatten().double()
                          * (layers[l]["sel_score"].flatten() > 0.5).double()).mean())
                for l in range(L)}
    order = sorted(range(L), key=lambda l: expected[l])
    grid = compound_grid or sorted({1, 2, 4, 8, 16, L} & set(range(1, L + 1)))
    base_sel = d["sweep"].baseline[run.gate.shape[0]:]
    select = {k: budget.measure_combined(run.model, run.select, {l: comp[l] for l in order[:k]},
                                         bs, base_sel)["cost"] for k in grid}
    under = [k for k in grid if select[k] < S["max_cost"]]
    k_star = max(under) if under else 0
    held_out = {k: budget.measure_combined(run.model, run.eval, {l: comp[l] for l in order[:k]},
                                           bs, base, n_boot, seed) for k in grid}
    chosen = held_out.get(k_star, {"cost": 0.0, "ci": (0.0, 0.0), "routed": {}})
    return {
        "all": {"cost": all_on["cost"], "ci": all_on["ci"], "ppl": all_on["ppl"],
                "routed": [all_on["routed"][l] for l in range(L)], "flops_saved": saved(all_on),
                "flops_saved_blocks": fl.saved([all_on["routed"][l] for l in range(L)],
                                               with_head=False)},
        "order": order, "expected": [expected[l] for l in range(L)],
        "selection": {str(k): v for k, v in select.items()},
        "held_out": {str(k): {"cost": v["cost"], "ci": v["ci"], "flops_saved": saved(v)}
                     for k, v in held_out.items()},
        "max_cost": S["max_cost"], "k_star": k_star, "chosen_layers": sorted(order[:k_star]),
        "chosen": {"cost": chosen["cost"], "ci": chosen["ci"], "flops_saved": saved(chosen)},
        # the wall-clock saved, against the FLOPs saved; `speed_rounds` paired rounds
        "wallclock": budget.realized(
            run.model, {"all": (comp, saved(all_on)),
                        "chosen": ({l: comp[l] for l in order[:k_star]}, saved(chosen))},
            {bs: run.eval[:bs]}, S["speed_rounds"], replace=surrogates.replaced),
        "flops": {"mlp": fl.mlp, "surrogate": fl.surrogate, "gate": fl.gate,
                  "blocks": fl.blocks, "head": fl.head}}


def report(run: Run, layers: list[dict], ev: dict, comp: dict) -> dict:
    """The phases' results for one model, as its results file keeps them."""
    if run.progress is not None:
        run.progress.close()
    flops = comp.pop("flops")
    return {"n_layers": run.L, "baseline_ppl": perplexity(ev["sweep"].baseline),
            "tokens": {"gate": int(run.gate.numel()), "select": int(run.select.numel()),
                       "eval": int(run.eval.numel())},
            "kinds": run.S["gates"].split(","), "curve_layers": list(run.curve_layers),
            "family_level": run.family, "probe_layers": list(range(run.L)),
            "per_layer": [layer["row"] for layer in layers], "flops": flops, "compound": comp}


@timing.timed("no-fly")
def nofly(run: Run, tok, spans: dict, text, other) -> dict:
    """P3 §4.3 at the middle layer: δ per token, with the layer's surrogate in place of its MLP,
    on the no-fly windows (which build the lists), the corpus's test split and the other corpus
    (which test them). Tokens are keyed two ways: by the input token, whose MLP is routed, and by
    the target (next) token, which is what the author's code keys them by."""
    S, W, layer = run.S, run.S["window"], run.L // 2
    module = surrogates.KeepFirst(mlps(run.model)[layer], run.fits[layer])
    sets = {S["corpus"]: spans["nofly"].windows,
            f"{S['corpus']} (test split)": corpora.token_windows(
                text.text("test"), tok, W, S["nofly_windows"]),
            S["cross_corpus"]: corpora.token_windows(other.text("validation"), tok, W,
                                                     S["nofly_windows"])}
    bar = tqdm(total=3 * S["nofly_windows"], desc="no-fly", mininterval=30)
    keyed, summary = {"input": {}, "target": {}}, {}
    for name, w in sets.items():
        sw = surrogates.linearization_sweep(run.model, w, {"linear": {layer: module}},
                                            S["batch_size"], bar)
        d = _deltas(sw, "linear")[layer]  # (N, T−2): positions 1 … T−2
        keyed["input"][name] = gating.token_means(w[:, 1:-1], d)
        keyed["target"][name] = gating.token_means(w[:, 2:], d)
        summary[name] = {"tokens": int(d.numel()), "delta": gating.delta_summary(d)}
    bar.close()
    build = next(iter(sets))
    out = {"layer": layer, "build": build, "min_obs": 10, "sets": summary}
    for key, means in keyed.items():
        lst = gating.nofly_list(means[build])
        out[f"by_{key}"] = {name: gating.transfer(means[build], means[name], lst)
                            for name in sets if name != build}
        if key == "input":
            top = sorted(lst, key=lambda t: -means[build][t][0])[:12]
            out["examples"] = [
                {"token": tok.decode([t]), "build": means[build][t][0],
                 **{name: means[name][t][0] if t in means[name] else None
                    for name in sets if name != build}} for t in top]
    return out


@timing.timed("two-phase")
def two_phase(run: Run, data: dict) -> dict:
    """P3 §5.3 on a copy of the pair model, at its middle third: phase 1 (`_phase1`), phase 2
    (`_phase2`), then hard routing (MLP where g > ½); the control fine-tunes the unmodified model
    for phase 1 + phase 2 steps on the same batches. Validation perplexities, gate statistics."""
    S, model, val = run.S, run.model, data["eval"]
    layers = surrogates.middle_layers(S["pair_layers"])
    bar = tqdm(total=2 * (S["phase1_steps"] + S["phase2_steps"]), desc="two-phase",
               mininterval=30)
    start = two_phase_.val_ppl(model, val)
    originals = {l: copy.deepcopy(blocks(model)[l].mlp) for l in layers}
    seed = S["seed"] if run.seed is None else run.seed
    gen = torch.Generator().manual_seed(seed)
    m, fits = two_phase_.phase1(model, layers, data, S, gen, lambda: bar.update(1))
    after1 = two_phase_.val_ppl(m, val)
    gated = two_phase_.phase2(m, originals, fits, data, S, gen, lambda: bar.update(1))
    soft = two_phase_.val_ppl(m, val)
    gate_vals = two_phase_.gate_values(m, gated, val)
    for g in gated.values():
        g.hard = True
    hard = two_phase_.val_ppl(m, val)
    control = copy.deepcopy(model)
    opt, gen = two_phase_.adamw(control.parameters(), S["ft_lr"]), torch.Generator().manual_seed(seed)
    for _ in range(S["phase1_steps"] + S["phase2_steps"]):
        training.lm_step(control, training.random_windows(data["train"], S["pair_batch"], data["context"], gen), opt)
        bar.update(1)
    bar.close()
    return {"layers": list(layers), "start_ppl": start, "phase1_ppl": after1,
            "phase2_soft_ppl": soft, "phase2_hard_ppl": hard, "control_ppl": two_phase_.val_ppl(control, val),
            "mean_gate": {l: float(v.mean()) for l, v in gate_vals.items()},
            "share_linear_hard": {l: float((v <= 0.5).double().mean())
                                  for l, v in gate_vals.items()},
            "steps": {"phase1": S["phase1_steps"], "phase2": S["phase2_steps"],
                      "control": S["phase1_steps"] + S["phase2_steps"]},
            "seed": seed}


def ranges_pretrained(spans: dict, S: dict) -> dict:
    """Which windows each range of a pretrained model's study holds (written to the results)."""
    return {"mixture": corpora.describe(spans),
            "test": {"nofly": [0, S["nofly_windows"] * S["window"]]}}


def ranges_pair(data: dict) -> dict:
    return {"train": _ranges(data["spans"]), "validation": {"eval": [0, data["eval"].numel()]}}
