"""The `paper` profile, end to end, offline: every chapter runs through papermill at
profile=paper with local stand-ins for the hub's models and datasets (nlbudget.book.standins),
the hub switched off, and the smoke profile's budgets — so every branch the `paper` profile
takes (hub model ids, WikiText-103 / LAMBADA through `datasets`, float32, the paper's model
families) is executed in CI."""

import os
import subprocess
import sys

import pytest
import torch

from nlbudget.assets import devices, models
from nlbudget.book import standins
from nlbudget import paths
from nlbudget.book import profiles, runner
from nlbudget.verdicts import results

KEYS = profiles.available_chapters()


def takes_another_path(key: str) -> bool:
    """Whether chapter `key`'s `paper` settings name other models or corpora than its `smoke`
    settings (hub loading, other families): else its `paper` run with the smoke budgets
    (`standins.overrides`) is its smoke run again, which the notebook tests already make."""
    ch = profiles.chapter(key)
    return any(ch.settings["paper"].get(k) != ch.settings["smoke"].get(k)
               for k in standins.IDENTITY)


PAPER_KEYS = [k for k in KEYS if takes_another_path(k)]


def test_the_chapters_left_out_of_the_paper_run_take_the_smoke_path():
    assert set(PAPER_KEYS) == {"03", "04", "06", "07"}  # the hub's models and corpora
    for k in set(KEYS) - set(PAPER_KEYS):
        ch = profiles.chapter(k)
        assert {**ch.settings["paper"], **standins.overrides(k)} == {
            **ch.settings["smoke"], **{i: ch.settings["paper"][i] for i in standins.IDENTITY
                                       if i in ch.settings["paper"]}}, k


@pytest.fixture(scope="module")
def paper_env(tmp_path_factory):
    root = tmp_path_factory.mktemp("paper")
    cache = root / "cache"
    real = paths.cache_dir()
    for sub in ("models", "corpora"):  # the offline SmolLM2 and pydocs, shared read-only
        (cache / sub).mkdir(parents=True)
        for p in (real / sub).iterdir():
            (cache / sub / p.name).symlink_to(p)
    mp = pytest.MonkeyPatch()
    mp.setenv("NLBUDGET_CACHE", str(cache))
    env = standins.build(root / "standins")
    for k, v in env.items():
        mp.setenv(k, v)
    yield root
    mp.undo()


def test_standins_cover_every_hub_asset_the_paper_profile_names():
    ids = standins.hub_model_ids()
    assert "gpt2-medium" in ids and "EleutherAI/pythia-160m" in ids
    assert all(i not in models.OFFLINE_MODELS for i in ids)
    assert set(standins.hub_corpora()) == {"wikitext-103", "lambada"}
    for key in KEYS:  # the budgets shrink; what the chapter runs on stays the paper's
        o = standins.overrides(key)
        assert not set(o) & set(standins.IDENTITY)
        profiles.validate(key, profile="paper", **o)


def test_hub_is_off_and_standins_load(paper_env):
    # a fresh process, as a chapter's kernel is (the hub libraries read their cache folder
    # from the environment when first imported)
    code = """
from nlbudget.assets import corpora, models
assert not models.hub_reachable()
m, tok = models.load("EleutherAI/pythia-160m")
assert m.config.model_type == "gpt_neox" and m.config.use_parallel_residual
assert models.load("gpt2-medium")[0].config.model_type == "gpt2"
wt = corpora.load("wikitext-103")
assert wt.paragraphs and not any(p.startswith("=") for p in wt.paragraphs)
assert corpora.load("lambada").paragraphs
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ))
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")


@pytest.mark.notebooks
@pytest.mark.parametrize("device", ["auto", pytest.param("cuda", marks=CUDA)])
@pytest.mark.parametrize("key", PAPER_KEYS)
def test_chapter_runs_at_the_paper_profile(paper_env, key, device):
    # `auto` is the CPU on a machine without CUDA (CI) and CUDA where there is one
    res, bld = paper_env / device / "results", paper_env / device / "build"
    runner.run(key, profile="paper", parameters={**standins.overrides(key), "device": device},
               results_dir=res, build_dir=bld, timeout=900)
    stem = profiles.chapter(key).stem
    doc = results.read(stem, "paper", res)
    paper = profiles.chapter(key).settings["paper"]
    assert doc["profile"] == "paper" and doc["claims"]
    assert doc["parameters"]["device"] == devices.resolve(device)
    # where every model it loaded or trained actually was (not only the recorded setting)
    want = "cuda:0" if devices.resolve(device).startswith("cuda") else "cpu"
    placed = doc["environment"]["models_on"]
    assert all(p["device"] == want for p in placed), placed
    if key in ("02", "03", "04", "06", "07"):  # the chapters that load or train a model
        assert placed, key
    for k in standins.IDENTITY:  # it ran on the paper's models and corpora, in its dtype
        if k in paper:
            assert doc["parameters"][k] == paper[k], k
    assert (bld / "paper" / "chapters" / f"{stem}.ipynb").is_file()
