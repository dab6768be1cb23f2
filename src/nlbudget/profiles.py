"""The three scales every chapter runs at, and validation of papermill parameters.

`smoke` takes seconds (tests), `ci` is the default book build (minutes on 2 CPU cores),
`paper` uses the papers' models and corpora (GPU and Hugging Face hub).
Every notebook's `parameters` cell holds `profile`, `seed`, `results_dir` and optional
overrides of its chapter's settings (`None` = the profile's value); the next cell calls
`validate`, which fails at once, naming the valid choices.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PROFILES = ("smoke", "ci", "paper")
RUN_PARAMETERS = ("profile", "seed", "results_dir")
#: Settings that take one of a few strings.
CHOICES = {"dtype": ("bfloat16", "float32"),
           "corpus": ("pydocs", "shakespeare", "wikitext-103"),
           "cross_corpus": ("pydocs", "shakespeare", "wikitext-103", "lambada"),
           "lastword": ("pydocs", "shakespeare", "lambada")}


#: The matched pair of small models trained from scratch (Part II): the same settings in
#: every chapter that uses it, so the cached checkpoints are shared.
PAIR = {
    "smoke": dict(pair_layers=3, pair_d_model=64, pair_context=64, pair_batch=8,
                  pair_vocab=512, pair_steps=10, pair_eval_windows=8),
    "ci": dict(pair_layers=6, pair_d_model=128, pair_context=128, pair_batch=16,
               pair_vocab=4096, pair_steps=500, pair_eval_windows=128),
    "paper": dict(pair_layers=6, pair_d_model=256, pair_context=256, pair_batch=32,
                  pair_vocab=8192, pair_steps=4000, pair_eval_windows=256),
}

#: Part II.b's gate kinds: P3's d+1 logistic gate, its larger gates (PCA to k dims +
#: logistic) and a small MLP gate. `linear` is required: routing and compound gating use it.
GATE_KINDS = ("linear", "pca-2", "pca-6", "pca-12", "mlp-16")
GATES = ",".join(GATE_KINDS)
#: Settings that hold a comma-separated list of choices.
LIST_CHOICES = {"gates": GATE_KINDS}


class ParameterError(ValueError):
    """A bad notebook parameter; the message names what is valid."""


@dataclass(frozen=True)
class Chapter:
    key: str  # "01"
    stem: str  # "01_gated_mlp_symmetry", also the results file name
    part: str  # "I" .. "IV"
    title: str
    settings: dict[str, dict] = field(default_factory=dict)  # profile -> settings


CHAPTERS: dict[str, Chapter] = {
    c.key: c
    for c in [
        Chapter(
            "01",
            "01_gated_mlp_symmetry",
            "I",
            "Gated MLPs as symmetry-broken rank-1 bilinear attention",
            {
                "smoke": dict(n_inputs=64, d_model=8, d_hidden=16, n_alpha=9, rank=2),
                "ci": dict(n_inputs=4096, d_model=64, d_hidden=256, n_alpha=61, rank=4),
                "paper": dict(n_inputs=16384, d_model=576, d_hidden=1536, n_alpha=121, rank=4),
            },
        ),
        Chapter(
            "02",
            "02_linear_surrogates",
            "II",
            "Linear surrogates: how much of each MLP is linear",
            {
                "smoke": dict(models="smollm2-135m", corpus="pydocs", dtype="bfloat16",
                              window=32, fit_windows=8, eval_windows=4, batch_size=4,
                              **PAIR["smoke"], ft_steps=2, ft_lr=1e-4, n_boot=100),
                "ci": dict(models="smollm2-135m", corpus="pydocs", dtype="bfloat16",
                           window=256, fit_windows=40, eval_windows=32, batch_size=8,
                           **PAIR["ci"], ft_steps=40, ft_lr=1e-4, n_boot=1000),
                "paper": dict(models="gpt2-medium,gpt2-large,EleutherAI/pythia-160m,"
                              "EleutherAI/pythia-410m,EleutherAI/pythia-1b,"
                              "EleutherAI/pythia-2.8b",
                              corpus="wikitext-103", dtype="float32",
                              window=512, fit_windows=20, eval_windows=100, batch_size=8,
                              **PAIR["paper"], ft_steps=200, ft_lr=1e-4, n_boot=10000),
            },
        ),
        Chapter(
            "03",
            "03_adaptive_gating",
            "II",
            "Adaptive gating: which tokens need the MLP?",
            {
                "smoke": dict(models="smollm2-135m", corpus="pydocs", cross_corpus="shakespeare",
                              dtype="bfloat16", window=32, fit_windows=8, gate_windows=6,
                              select_windows=4, eval_windows=4, batch_size=4, gates="linear,pca-2,mlp-16",
                              curve_layers=2, nofly_windows=4, max_cost=0.01,
                              **PAIR["smoke"], phase1_steps=2, phase2_steps=2, ft_lr=1e-4,
                              gate_lr=1e-3, sparsity=0.1, n_boot=50),
                "ci": dict(models="smollm2-135m", corpus="pydocs", cross_corpus="shakespeare",
                           dtype="bfloat16", window=256, fit_windows=40, gate_windows=12,
                           select_windows=8, eval_windows=10, batch_size=8, gates=GATES, curve_layers=3,
                           nofly_windows=24, max_cost=0.01, **PAIR["ci"], phase1_steps=20,
                           phase2_steps=20, ft_lr=1e-4, gate_lr=1e-2, sparsity=0.1,
                           n_boot=1000),
                "paper": dict(models="gpt2-medium,EleutherAI/pythia-410m",
                              corpus="wikitext-103", cross_corpus="lambada",
                              dtype="float32", window=512, fit_windows=20, gate_windows=60,
                              select_windows=20, eval_windows=24, batch_size=8, gates=GATES, curve_layers=6,
                              nofly_windows=100, max_cost=0.01, **PAIR["paper"],
                              phase1_steps=2000, phase2_steps=3000, ft_lr=2e-5,
                              gate_lr=1e-3, sparsity=0.1, n_boot=10000),
            },
        ),
        Chapter(
            "04",
            "04_fixed_universal",
            "III",
            "Fixed universal transformers: programming through the embedding",
            {
                "smoke": dict(ru_widths="2,8", ru_steps=20, dyck_len=8, hop_len=8, hops="1",
                              hop_vocab=4, heads=2, layers=2, d=2, m=16, steps=8, batch=16,
                              seeds=1, lr=1e-2, n_test=200),
                "ci": dict(ru_widths="2,4,8,16,32,64", ru_steps=300, dyck_len=16, hop_len=16,
                           hops="1", hop_vocab=6, heads=2, layers=2, d=4, m=64, steps=600,
                           batch=64, seeds=2, lr=5e-3, n_test=1000),
                "paper": dict(ru_widths="2,4,8,16,32,64,128,256", ru_steps=3000, dyck_len=40,
                              hop_len=32, hops="1,2,3,4", hop_vocab=8, heads=2, layers=3, d=8,
                              m=256, steps=5000, batch=128, seeds=5, lr=3e-3, n_test=5000),
            },
        ),
        Chapter(
            "05",
            "05_preprojection_probes",
            "IV",
            "Pre-projection and content skip as frozen probes",
            {
                "smoke": dict(models="smollm2-135m", corpus="pydocs", lastword="pydocs",
                              dtype="bfloat16", window=32, train_windows=16, eval_windows=4,
                              lastword_items=8, lastword_context=64, k=4, steps=2,
                              batch_size=2, lr=1e-3, **PAIR["smoke"], pair_k=4,
                              pair_probe_steps=2, pair_probe_batch=4, n_boot=50,
                              decode_tokens=4),
                "ci": dict(models="smollm2-135m", corpus="pydocs", lastword="pydocs",
                           dtype="bfloat16", window=128, train_windows=256, eval_windows=32,
                           lastword_items=200, lastword_context=192, k=16, steps=24,
                           batch_size=4, lr=1e-3, **PAIR["ci"], pair_k=8,
                           pair_probe_steps=100, pair_probe_batch=16, n_boot=1000,
                           decode_tokens=16),
                "paper": dict(models="EleutherAI/pythia-160m,EleutherAI/pythia-410m",
                              corpus="wikitext-103", lastword="lambada", dtype="float32",
                              window=512, train_windows=20000, eval_windows=200,
                              lastword_items=5153, lastword_context=512, k=64, steps=2000,
                              batch_size=8, lr=1e-3, **PAIR["paper"], pair_k=32,
                              pair_probe_steps=2000, pair_probe_batch=32, n_boot=10000,
                              decode_tokens=64),
            },
        ),
        Chapter(
            "06",
            "06_does_symmetry_matter",
            "I",
            "Does breaking the exchange symmetry matter?",
            {
                "smoke": dict(variants="gated-silu,symmetric-silu,rank2-silu", seeds=2,
                              lm_layers=1, lm_d_model=32, lm_context=32, lm_batch=4,
                              lm_vocab=512, lm_steps=4, lm_eval_windows=4, mod_p=11,
                              mod_d=16, mod_steps=30, mod_seeds=2, gate_windows=2, window=64),
                "ci": dict(variants="standard-gelu,symmetric-silu,gated-silu,gated-gelu,"
                           "gated-relu,bilinear,rank2-silu,rank4-silu", seeds=3,
                           lm_layers=2, lm_d_model=64, lm_context=64, lm_batch=16,
                           lm_vocab=2048, lm_steps=250, lm_eval_windows=64, mod_p=23,
                           mod_d=32, mod_steps=1500, mod_seeds=5, gate_windows=16,
                           window=256),
                "paper": dict(variants="standard-gelu,symmetric-silu,gated-silu,gated-gelu,"
                              "gated-relu,bilinear,rank2-silu,rank4-silu", seeds=5,
                              lm_layers=6, lm_d_model=256, lm_context=256, lm_batch=32,
                              lm_vocab=8192, lm_steps=3000, lm_eval_windows=256, mod_p=97,
                              mod_d=128, mod_steps=5000, mod_seeds=10, gate_windows=64, window=256),
            },
        ),
    ]
}


def chapter(key: str) -> Chapter:
    """Look a chapter up by number ("01", "1") or stem."""
    k = str(key)
    for c in CHAPTERS.values():
        if k in (c.key, c.stem) or (k.isdigit() and int(k) == int(c.key)):
            return c
    valid = ", ".join(f"{c.key} ({c.stem})" for c in CHAPTERS.values())
    raise ParameterError(f"unknown chapter {key!r}; valid chapters: {valid}")


def _check_type(name: str, value, default):
    if isinstance(default, bool) or isinstance(value, bool):
        ok = isinstance(value, bool) and isinstance(default, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float))
    else:
        ok = isinstance(value, type(default))
    if not ok:
        raise ParameterError(
            f"parameter {name}={value!r} must be of type {type(default).__name__} "
            f"(profile default: {default!r})"
        )
    if isinstance(default, (int, float)) and not isinstance(default, bool) and value <= 0:
        raise ParameterError(f"parameter {name}={value!r} must be positive")


def validate(key: str, profile: str = "ci", seed: int = 0, results_dir: str | None = None,
             **overrides) -> dict:
    """Return the chapter's settings for `profile`, with `seed` and valid overrides applied.

    Raises ParameterError for an unknown profile, a seed that is not a non-negative integer,
    an unknown parameter name, or an override of the wrong type.
    """
    ch = chapter(key)
    if profile not in PROFILES:
        raise ParameterError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILES)}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ParameterError(f"seed must be a non-negative integer, got {seed!r}")
    settings = dict(ch.settings[profile])
    unknown = sorted(set(overrides) - set(settings))
    if unknown:
        valid = ", ".join([*RUN_PARAMETERS, *settings])
        raise ParameterError(
            f"unknown parameter(s) {', '.join(unknown)} for chapter {ch.stem}; valid: {valid}"
        )
    for name, value in overrides.items():
        if value is None:
            continue
        _check_type(name, value, settings[name])
        if name in CHOICES and value not in CHOICES[name]:
            raise ParameterError(f"parameter {name}={value!r} is not valid; valid: "
                                 f"{', '.join(CHOICES[name])}")
        if name in LIST_CHOICES:
            items = value.split(",")
            bad = [v for v in items if v not in LIST_CHOICES[name]]
            if bad or "linear" not in items or len(set(items)) != len(items):
                raise ParameterError(
                    f"parameter {name}={value!r} is not valid: a comma-separated list, without "
                    f"repeats, including 'linear', of: {', '.join(LIST_CHOICES[name])}")
        settings[name] = value
    return {"chapter": ch.stem, "profile": profile, "seed": seed, **settings}


def parse_seed(text: str) -> int:
    """A seed given on the command line."""
    try:
        return int(text)
    except (TypeError, ValueError):
        raise ParameterError(f"seed must be a non-negative integer, got {text!r}") from None
