import pytest

from nlbudget import profiles
from nlbudget.profiles import ParameterError


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
    with pytest.raises(ParameterError, match="valid profiles: smoke, ci, paper"):
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
        profiles.validate("02", profile="ci", dtype="float16")
    assert profiles.validate("02", profile="ci", corpus="shakespeare")["corpus"] == "shakespeare"


@pytest.mark.parametrize("value", ["linear,bogus", "pca-2", "linear,linear", ""])
def test_gate_list_is_checked(value):
    with pytest.raises(ParameterError, match="pca-2, pca-6, pca-12, mlp-16"):
        profiles.validate("03", profile="ci", gates=value)


def test_gate_list_and_shared_pair_settings():
    s = profiles.validate("03", profile="ci", gates="linear,mlp-16")
    assert s["gates"] == "linear,mlp-16"
    for p in profiles.PROFILES:  # Part II.a and II.b train the same (cached) pair
        a, b = profiles.CHAPTERS["02"].settings[p], profiles.CHAPTERS["03"].settings[p]
        assert {k: v for k, v in a.items() if k.startswith("pair_")} == \
            {k: v for k, v in b.items() if k.startswith("pair_")}
