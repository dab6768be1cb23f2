"""`nlbudget budget`: chapter 07's budget for any causal LM that transformers loads.

For each MLP layer of the model: its linear cost (the keep-first ridge surrogate, chapter 03's
fit, with an interval over windows), its random-feature recovery (chapter 07's P2 lens, σ the
MLP's own activation), and its cost when gated (P3's d+1 gate sends the tokens it scores
g > ½ to the surrogate) or linear, each layer alone, with an interval. Then the greedy path
with the combined model measured after every move, for each budget the longest prefix whose
cost's upper bound stays under it, that model checked on held-out windows, and its realized
speed against the original. The method is chapter 07's, called here (`ch07`): one code path.

Writes into `--out`: `plan.json` (per layer full / gated / linear per budget, with costs and
intervals; the held-out check and the speed), `lenses.csv`, `lenses.png`, `path.png`, and
`model/` (the weights and tokenizer, and per budget the surrogates and gates as safetensors),
which `load_budgeted(out)` turns back into a `transformers` model with the layers replaced.
Each stage is kept in `out/.stages/` under a digest of the model's weights, the windows, the
settings and the code, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from tqdm.std import tqdm

from nlbudget import capture, gating, paths, surrogates
from nlbudget.assets import code_key, corpora, gguf_header, models
from nlbudget.chapters.ch03_linear_surrogates import study as ch03
from nlbudget.chapters.ch07_budget_atlas import page as ch07_page
from nlbudget.chapters.ch07_budget_atlas import study as ch07
from nlbudget.errors import ParameterError
from nlbudget.evaluation import eval_nll, perplexity
from nlbudget.verdicts import results

#: The scales the command runs at: chapter 07's settings at that profile.
PROFILES = ("smoke", "ci", "full")
#: transformers' model types whose MLP the method knows (`capture.LAYOUTS`), and the GGUF
#: architectures that load as them.
GGUF_TYPES = {"llama": "llama", "qwen2": "qwen2", "gemma3": "gemma3_text", "gpt2": "gpt2",
              "gptneox": "gpt_neox"}
WINDOW_KINDS = ("fit_windows", "eval_windows", "select_windows", "check_windows")


def parse_budget(text: str) -> float:
    """'1%' or '0.01' → 0.01; refused outside (0, 100 %)."""
    t = str(text).strip()
    try:
        b = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise ParameterError(f"budget {text!r} is not a number or a percentage "
                             f"(e.g. 1% or 0.01)") from None
    if not (0 < b < 1) or not math.isfinite(b):
        raise ParameterError(f"budget {text!r} is outside (0, 100 %): a perplexity cost "
                             f"budget must be positive and below 100 %")
    return b


def settings(profile: str, seed: int, budgets: tuple[float, ...]) -> dict:
    """Chapter 07's settings at `profile` (its first model's), with the run's seed and
    budgets."""
    if profile not in PROFILES:
        raise ParameterError(f"profile {profile!r} is not one of {', '.join(PROFILES)}")
    return {**ch07.SETTINGS[profile], "seed": seed, "profile": profile,
            "budgets": list(budgets), "device": "cpu"}


def model_type(model: str) -> str:
    """The transformers model type of `model` (an offline name, a folder with config.json, a
    .gguf file or a hub id), read without loading its weights; refused where the method
    knows no layout for it."""
    if model in models.OFFLINE_MODELS:
        kind = {"smollm2-135m": "llama", "gemma3-270m": "gemma3_text"}[model]
    elif model.endswith(".gguf"):
        if not Path(model).is_file():
            raise ParameterError(f"no GGUF file at {model}")
        arch = gguf_header.architecture(model)
        kind = GGUF_TYPES.get(arch, arch)
    elif Path(model).is_dir():
        cfg = Path(model) / "config.json"
        if not cfg.is_file():
            raise ParameterError(f"{model} holds no config.json (save a model there with "
                                 f"save_pretrained)")
        kind = json.loads(cfg.read_text(encoding="utf-8")).get("model_type", "?")
    else:
        return "hub"  # a hub id: its type is known once its config is fetched
    if kind not in capture.LAYOUTS:
        raise ParameterError(f"{model}: architecture {kind!r} has no MLP layout the method "
                             f"knows; known: {', '.join(capture.LAYOUTS)}")
    return kind


def text_corpus(path: str | None) -> corpora.Corpus:
    """The corpus: a UTF-8 text file, paragraphs separated by blank lines (default: the
    book's shipped Python documentation)."""
    if path is None:
        return corpora.load("pydocs")
    p = Path(path)
    if not p.is_file():
        raise ParameterError(f"no corpus file at {path}")
    paras = tuple(t.strip() for t in p.read_text(encoding="utf-8").split("\n\n") if t.strip())
    return corpora.Corpus(p.name, paras, hashlib.sha256(
        "\n\n".join(paras).encode()).hexdigest(), "the user's")


def tokens_needed(S: dict) -> int:
    return sum(S[k] for k in WINDOW_KINDS) * S["window"]


def check_corpus(corpus: corpora.Corpus, S: dict) -> None:
    """Refuse a corpus whose train split has fewer words than the windows need tokens (every
    tokenizer here gives at least one token a word), before any weights load."""
    words = sum(len(p.split()) for p in corpus.split("train"))
    need = tokens_needed(S)
    if words < need:
        raise ParameterError(
            f"corpus {corpus.name} is too short: its train split (90 % of its paragraphs) has "
            f"{words:,} words; the windows at this profile need {need:,} tokens "
            f"({' + '.join(str(S[k]) for k in WINDOW_KINDS)} windows of {S['window']})")


def check_out(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise ParameterError(f"cannot write to the output folder {out}: {e}") from None


class Stages:
    """Each stage's result kept in `out/.stages/<stage>-<digest>.pt`: the digest covers the
    model's weights, the windows, the settings, and the code of this tool and of every module
    of the package it imports in turn but the page it prints with, with the package versions
    (`code_key.key`), so a resumed run reads what it computed before and a changed input, or
    an edit to any module the method runs, computes it again."""

    def __init__(self, out: Path, *parts):
        self.dir = out / ".stages"
        self.key = code_key.key(code_key.closure([Path(__file__)], {Path(ch07_page.__file__)}),
                                "budget-tool", *parts)

    def get(self, stage: str, compute):
        f = self.dir / f"{stage}-{self.key[:16]}.pt"
        if f.is_file():
            return torch.load(f, weights_only=False)
        value = compute()
        self.dir.mkdir(parents=True, exist_ok=True)
        torch.save(value, f.with_suffix(".part"))
        f.with_suffix(".part").replace(f)
        return value


class Clock:
    """Stage-by-stage progress with an estimate of time left, from forward passes: each stage
    is weighed by the batches of windows it runs through the model."""

    def __init__(self, weights: dict[str, float]):
        self.weights, self.done, self.t0 = weights, 0.0, time.perf_counter()

    def start(self, stage: str) -> None:
        left = sum(self.weights.values()) - self.done
        spent = time.perf_counter() - self.t0
        eta = (f", about {spent / self.done * left / 60:.1f} min left" if self.done
               else "")
        print(f"[budget] {stage}{eta}", flush=True)

    def end(self, stage: str) -> None:
        self.done += self.weights[stage]


def _weights(S: dict, L: int) -> dict[str, float]:
    """Forward passes (in windows) each stage runs, roughly."""
    return {"lenses": S["fit_windows"] * 2 + S["eval_windows"] * (1 + L * (1 + S["rf_seeds"])),
            "path": S["eval_windows"] + S["select_windows"] * (1 + 2 * L + 2 * L),
            "check": S["check_windows"] * (1 + len(S["budgets"])),
            "speed": 9 * S["speed_repeats"] * (4 + len(S["budgets"]))}


def windows(S: dict, text, tok) -> tuple[dict, dict]:
    """Chapter 03's fit and evaluation windows and chapter 07's select and check windows of
    `text`, each starting as the tokenizer starts a text (`ch07.with_bos`)."""
    spans = ch07.with_bos(ch03.windows(S, text, tok), tok)
    return spans, ch07.with_bos(ch07.budget_windows(spans, S, text, tok), tok)


def _bar(total: int, desc: str, on: bool):
    return tqdm(total=total, desc=desc, mininterval=10, disable=not on)


def run(model: str, corpus: str | None = None, budgets=("1%", "5%"), out="budget",
        profile: str = "ci", seed: int = 0, progress: bool = True) -> dict:
    """The budget of `model` (see the module's docstring); every bad input is refused before
    any weights load. Returns the plan (also written to `out/plan.json`)."""
    bs = tuple(sorted({parse_budget(b) for b in budgets}))
    S = settings(profile, seed, bs)
    kind = model_type(model)
    text = text_corpus(corpus)
    check_corpus(text, S)
    out = Path(out)
    check_out(out)
    lm, tok = models.load(model, dtype=torch.float32)
    if kind == "hub" and lm.config.model_type not in capture.LAYOUTS:
        raise ParameterError(f"{model}: architecture {lm.config.model_type!r} has no MLP "
                             f"layout the method knows; known: {', '.join(capture.LAYOUTS)}")
    spans, win = windows(S, text, tok)
    select, held = win["select"].windows, win["check"].windows
    L = len(capture.mlps(lm))
    stages, clock = Stages(out, lm, {k: v.windows for k, v in {**spans, **win}.items()}, S,
                           text.sha256), Clock(_weights(S, L))
    clock.start("lenses: each layer linear and with random features")
    measured, extras = stages.get("lenses", lambda: ch07.measure(
        lm, spans, S, _bar(len(spans["eval"].windows), "lenses", progress)))
    clock.end("lenses")
    clock.start("path: each layer gated and linear alone, then the greedy path")

    def path_stage():
        gates = ch07.fit_gates(lm, spans["eval"].windows, extras["sweep"], S)
        mods = ch07.modules(lm, extras["fits"], gates)
        return (gates, *ch07.choose(lm, mods, select, S, _bar(S["select_windows"], "options",
                                                                 progress), budgets=bs))

    gates, choice, path = stages.get("path", path_stage)
    clock.end("path")
    mods = ch07.modules(lm, extras["fits"], gates)
    clock.start("check: each budget's model on held-out windows")
    base = eval_nll(lm, held, S["batch_size"])
    checks = {b: ch07.check(lm, mods, path, k, held, base, S) for b, k in choice["chosen"].items()}
    clock.end("check")
    clock.start("speed: each budget's model timed against the original")
    chosen = {b: {int(l): s for l, s in c["layers"].items()} for b, c in checks.items()
              if c["moves"]}
    timed = ch07.speed(lm, mods, chosen, ch07.speed_batches(select, held, S), S)
    clock.end("speed")
    M = {"model": models.label(model), "measured": measured,
         "budget": {"choice": choice, "checks": checks, "windows": corpora.describe(win),
                    "wallclock": timed}}
    plan = write(out, model, M, S, mods, lm, tok)
    print(f"[budget] wrote {out}/plan.json, lenses.csv, lenses.png, path.png and model/ "
          f"({(time.perf_counter() - clock.t0) / 60:.1f} min)", flush=True)
    return plan


def plan_of(name: str, M: dict, S: dict) -> dict:
    """The plan: per layer its lenses and each state's cost alone with its interval, and per
    budget every layer's state, the held-out check and the realized speed."""
    B, rows = M["budget"], M["measured"]["per_layer"]
    layers = [{"layer": r["layer"],
               "linear (eval)": {"cost": r["linear"], "ci": list(r["linear_ci"])},
               "random-feature recovery": r["recovered"], "r2_linear": r["r2_linear"],
               "r2_rf_held_out": r["r2_rf_held_out"],
               **{f"{s} (select)": {"cost": o[s], "ci": o[f"{s}_ci"]} for s in ("gated", "linear")},
               "routed when gated": o["routed"]}
              for r, o in zip(rows, B["choice"]["per_layer"])]
    budgets = {}
    for b, c in B["checks"].items():
        states = {str(l["layer"]): c["layers"].get(str(l["layer"]), "full") for l in layers}
        budgets[f"{float(b):.4g}"] = {
            "states": states, "moves": c["moves"], "n_linear": c["n_linear"],
            "n_gated": c["n_gated"], "held_out": {"ppl": c["ppl"], "baseline_ppl":
                                                  c["baseline_ppl"], "cost": c["cost"],
                                                  "ci": list(c["ci"])},
            "mlp_flops_removed": c["mlp_flops_removed"], "flops_saved": c["flops_saved"],
            "select_upper": ch07_page._select_upper(B, c),
            "speed": [r for r in B["wallclock"] if r["config"] == b]}
    return {"model": name, "label": M["model"], "baseline_ppl": B["choice"]["baseline_ppl"],
            "layers": layers, "budgets": budgets, "path": B["choice"]["path"],
            "references": [r for r in B["wallclock"] if r["config"] in ch07.REFERENCES],
            "settings": {k: v for k, v in S.items() if not k.startswith("later_")},
            "windows": B["windows"], "environment": results.environment()}


def write(out: Path, name: str, M: dict, S: dict, mods: dict, lm, tok) -> dict:
    """plan.json, lenses.csv, lenses.png, path.png and model/ (weights, tokenizer, and per
    budget the surrogates and gates)."""
    import pandas as pd

    plan = plan_of(name, M, S)
    paths.atomic_write_text(out / "plan.json", json.dumps(plan, indent=1, default=str))
    table = pd.DataFrame([{"layer": l["layer"], "linear cost": l["linear (eval)"]["cost"],
                           "linear lo": l["linear (eval)"]["ci"][0],
                           "linear hi": l["linear (eval)"]["ci"][1],
                           "gated cost": l["gated (select)"]["cost"],
                           "gated lo": l["gated (select)"]["ci"][0],
                           "gated hi": l["gated (select)"]["ci"][1],
                           "routed when gated": l["routed when gated"],
                           "random-feature recovery": l["random-feature recovery"],
                           "r2 linear": l["r2_linear"], "r2 rf held out": l["r2_rf_held_out"]}
                          for l in plan["layers"]])
    table.to_csv(out / "lenses.csv", index=False)
    lens_figure(plan).savefig(out / "lenses.png", dpi=120)
    ch07_page.budget_figure({"atlas": {name: M}}).savefig(out / "path.png", dpi=120)
    save_model(out / "model", plan, mods, lm, tok)
    return plan


def lens_figure(plan: dict):
    """Each layer's cost alone, linear (evaluation windows) and gated (select windows), with
    their intervals, and the random features' recovery of the linear cost."""
    import matplotlib.pyplot as plt

    ls = plan["layers"]
    x = [l["layer"] for l in ls]
    fig, (a, b) = plt.subplots(2, 1, figsize=(9, 5), sharex=True)
    for key, colour, dx in (("linear (eval)", "#0072B2", -0.15), ("gated (select)", "#D55E00",
                                                                  0.15)):
        c = [l[key]["cost"] for l in ls]
        a.errorbar([v + dx for v in x], c, yerr=[[v - l[key]["ci"][0] for v, l in zip(c, ls)],
                                                [l[key]["ci"][1] - v for v, l in zip(c, ls)]],
                   fmt="o", ms=3, capsize=2, color=colour, label=key.replace(" (", ", ")[:-1])
    a.axhline(0, color="0.6", lw=0.8)
    a.set_ylabel("perplexity cost, layer alone")
    a.yaxis.set_major_formatter(plt.matplotlib.ticker.PercentFormatter(1.0))
    a.legend(fontsize=8)
    a.set_title(f"{plan['label']}: each MLP layer alone")
    b.bar(x, [l["random-feature recovery"] or 0 for l in ls], color="#009E73")
    b.set_ylabel("share of the linear\ncost recovered (RF)")
    b.set_xlabel("layer")
    fig.tight_layout()
    return fig


def save_model(d: Path, plan: dict, mods: dict, lm, tok) -> None:
    """The model and tokenizer as `save_pretrained` writes them, and per budget
    `budgets/<b>.json` (each layer's state) and `budgets/<b>.safetensors` (its layers'
    surrogates and gates)."""
    lm.save_pretrained(d)
    tok.save_pretrained(d)
    (d / "budgets").mkdir(parents=True, exist_ok=True)
    for b, p in plan["budgets"].items():
        tensors = {}
        for l, s in p["states"].items():
            if s == "full":
                continue
            sur = mods["linear"][int(l)].surrogate
            tensors.update({f"{l}.surrogate.W": sur.W, f"{l}.surrogate.b": sur.b})
            if s == "gated":
                gate = mods["gated"][int(l)].gate
                tensors.update({f"{l}.gate.{k}": v for k, v in gate.state_dict().items()})
        save_file({k: v.contiguous() for k, v in tensors.items()}, d / "budgets" / f"{b}.safetensors")
        paths.atomic_write_text(d / "budgets" / f"{b}.json", json.dumps(
            {"states": p["states"], "threshold": 0.5, "keep_first": 1}, indent=1))


def load_budgeted(path, budget: str | float | None = None):
    """The budgeted model a `budget` run wrote to `path`: the saved model with each layer of
    the chosen budget (default: the largest the run measured) replaced — linear layers by
    their surrogate (the MLP at position 0), gated layers by the MLP behind their gate."""
    from transformers import AutoModelForCausalLM

    d = Path(path) / "model"
    saved = sorted((f.stem for f in (d / "budgets").glob("*.json")), key=float)
    if not saved:
        raise ParameterError(f"{path} holds no budgeted model (run `nlbudget budget` first)")
    b = saved[-1] if budget is None else f"{parse_budget(budget):.4g}"
    if b not in saved:
        raise ParameterError(f"{path} has no budget {budget}; saved: {', '.join(saved)}")
    spec = json.loads((d / "budgets" / f"{b}.json").read_text(encoding="utf-8"))
    t = load_file(d / "budgets" / f"{b}.safetensors")
    lm = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32).eval()
    mlp = capture.mlps(lm)
    for l, s in spec["states"].items():
        if s == "full":
            continue
        sur = surrogates.LinearSurrogate(t[f"{l}.surrogate.W"], t[f"{l}.surrogate.b"])
        if s == "linear":
            new = surrogates.KeepFirst(mlp[int(l)], sur, spec["keep_first"])
        else:
            d_in = t[f"{l}.gate.mean"].shape[0]
            gate = gating.Gate(t[f"{l}.gate.mean"], t[f"{l}.gate.std"],
                               torch.nn.Linear(d_in, 1), "linear", d_in + 1)
            gate.load_state_dict({k.split(".", 2)[2]: v for k, v in t.items()
                                  if k.startswith(f"{l}.gate.")})
            new = gating.HybridMLP(mlp[int(l)], sur, gate.eval(), spec["threshold"],
                                   spec["keep_first"])
        capture.blocks(lm)[int(l)].mlp = new
    return lm


def held_out_ppl(lm, plan: dict, tok, corpus=None) -> float:
    """The budgeted model's perplexity on the run's held-out windows (as `plan` records them)."""
    S = plan["settings"]
    text = text_corpus(corpus)
    return perplexity(eval_nll(lm, windows(S, text, tok)[1]["check"].windows, S["batch_size"]))
