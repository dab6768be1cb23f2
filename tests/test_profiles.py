import pytest

from nlbudget.book import profiles
from nlbudget import training
from nlbudget.errors import ParameterError


def test_profiles_resolve_for_every_chapter():
    for key, ch in profiles.CHAPTERS.items():
        for p in profiles.PROFILES:
            s = profiles.validate(key, profile=p, seed=3)
            assert s["profile"] == p and s["seed"] == 3 and s["chapter"] == ch.stem
            assert set(ch.settings[p]) <= set(s)


def test_every_profile_defines_the_same_settings():
    for ch in profiles.CHAPTERS.values():
        names = {p: set(ch.settings[p]) for p in profiles.PROFILES}
        assert names["smoke"] == names["ci"] == names["paper"], ch.stem


def test_unknown_profile_names_valid_ones():
    with pytest.raises(ParameterError, match="valid profiles: smoke, ci, full, paper"):
        profiles.validate("01", profile="nonsense")


@pytest.mark.parametrize("seed", ["1", 1.5, -1, True, None])
def test_bad_seed(seed):
    with pytest.raises(ParameterError, match="non-negative integer"):
        profiles.validate("01", profile="ci", seed=seed)


def test_unknown_parameter_names_valid_ones():
    with pytest.raises(ParameterError, match=r"unknown parameter\(s\) bogus.*valid: profile, seed"):
        profiles.validate("01", profile="ci", bogus=3)


def test_wrong_type_override():
    with pytest.raises(ParameterError, match="n_inputs.*int"):
        profiles.validate("01", profile="ci", n_inputs="many")
    with pytest.raises(ParameterError, match="positive"):
        profiles.validate("01", profile="ci", n_inputs=0)


def test_override_and_none():
    s = profiles.validate("01", profile="smoke", n_inputs=7, rank=None)
    assert s["n_inputs"] == 7
    assert s["rank"] == profiles.CHAPTERS["01"].settings["smoke"]["rank"]


def test_unknown_chapter():
    with pytest.raises(ParameterError, match="valid chapters: 01 .*02"):
        profiles.chapter("99")


def test_parse_seed():
    assert profiles.parse_seed("12") == 12
    with pytest.raises(ParameterError):
        profiles.parse_seed("twelve")


def test_string_choices():
    with pytest.raises(ParameterError, match="valid: bfloat16, float32"):
        profiles.validate("03", profile="ci", dtype="float16")
    assert profiles.validate("03", profile="ci", corpus="shakespeare")["corpus"] == "shakespeare"


@pytest.mark.parametrize("value", ["linear,bogus", "pca-2", "linear,linear", ""])
def test_gate_list_is_checked(value):
    with pytest.raises(ParameterError, match="pca-2, pca-6, pca-12, mlp-16"):
        profiles.validate("04", profile="ci", gates=value)


def test_gate_list_and_shared_pair_settings():
    s = profiles.validate("04", profile="ci", gates="linear,mlp-16")
    assert s["gates"] == "linear,mlp-16"
    for p in profiles.PROFILES:  # Parts II.a, II.b and IV train the same (cached) pair
        pair = [{k: v for k, v in profiles.CHAPTERS[c].settings[p].items() if k.startswith("pair_")
                 and k in training.PAIR[p]} for c in ("03", "04", "06")]
        assert pair[0] == pair[1] == pair[2] == training.PAIR[p]


def test_chapters_in_reading_order():
    stems = [c.stem for c in profiles.CHAPTERS.values()]
    assert stems == ["01_gated_mlp_symmetry", "02_does_symmetry_matter", "03_linear_surrogates",
                     "04_adaptive_gating", "05_fixed_universal", "06_preprojection_probes",
                     "07_budget_atlas"]
    for key, c in profiles.CHAPTERS.items():
        assert c.stem.startswith(key) and c.load().STEM == c.stem


def test_no_profile_computes_in_bfloat16_on_the_cpu():
    """bfloat16 is fast only on CPUs with native bf16 units; every profile's settings, resolved
    for the CPU, ask for float32 (or for no dtype at all)."""
    for key, ch in profiles.CHAPTERS.items():
        for p in profiles.PROFILES:
            s = profiles.validate(key, profile=p, device="cpu")
            assert s.get("dtype", "float32") not in profiles.CPU_SLOW_DTYPES, (ch.stem, p)


def test_bfloat16_is_refused_on_the_cpu():
    with pytest.raises(ParameterError, match="float32"):
        profiles.validate("03", profile="ci", dtype="bfloat16", device="cpu")


def test_no_chapter_module_asks_for_bfloat16_itself():
    """A chapter's models get their dtype from the `dtype` setting, never from a literal."""
    import inspect

    for ch in profiles.CHAPTERS.values():
        src = inspect.getsource(ch.load())
        assert "dtype=torch.bfloat16" not in src, ch.stem


def test_full_cells_get_longer_than_an_hour(monkeypatch, tmp_path):
    """A `full` cell may run past an hour on a slow CPU (chapter 07's sweep: 45 min on a fast
    one): the default per-cell timeout is the profile's; an explicit one (or
    $NLBUDGET_CELL_TIMEOUT, how `nlbudget run --timeout` reaches the plan's runs) wins."""
    from nlbudget.book import runner

    seen = []
    monkeypatch.setattr(runner, "_execute", lambda src, out, params, timeout, progress:
                        seen.append(timeout))
    monkeypatch.delenv("NLBUDGET_CELL_TIMEOUT", raising=False)
    for profile in ("ci", "full"):
        runner.run("01", profile=profile, results_dir=tmp_path, build_dir=tmp_path)
    runner.run("01", profile="full", results_dir=tmp_path, build_dir=tmp_path, timeout=60)
    monkeypatch.setenv("NLBUDGET_CELL_TIMEOUT", "90")
    runner.run("01", profile="ci", results_dir=tmp_path, build_dir=tmp_path)
    assert seen == [3600, 4 * 3600, 60, 90]


def test_zero_is_valid_where_the_chapters_own_profiles_use_it():
    """Chapter 07's documented sentinel rf_width=0 (the MLP's own width, its full
    default) is accepted as an override; a negative width, or 0 where no profile uses it, is
    not."""
    from nlbudget.book import profiles
    from nlbudget.errors import ParameterError

    assert profiles.validate("07", "smoke", rf_width=0)["rf_width"] == 0
    with pytest.raises(ParameterError, match="rf_width=-1 must be ≥ 0"):
        profiles.validate("07", "smoke", rf_width=-1)
    with pytest.raises(ParameterError, match="rf_seeds=0 must be positive"):
        profiles.validate("07", "smoke", rf_seeds=0)
