import numpy as np
import pytest
import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaMLP

from nlbudget import bilinear, capture, symmetry
from nlbudget.assets import models


@pytest.mark.parametrize("d", [16, 64])
@pytest.mark.parametrize("variant", list(bilinear.VARIANTS))
def test_variants_have_the_reported_parameter_count(variant, d):
    budget = 8 * d * d
    m = bilinear.make_mlp(variant, d, budget)
    n = bilinear.hidden_width(variant, d, budget)
    per_unit = bilinear.VARIANTS[variant][3] * d
    assert bilinear.n_params(m) == n * per_unit  # what the chapter's table reports
    assert abs(bilinear.n_params(m) - budget) <= per_unit / 2  # matched to one unit


def test_variant_forms():
    assert isinstance(bilinear.make_mlp("bilinear", 8, 512), bilinear.GatedMLP)
    assert bilinear.make_mlp("bilinear", 8, 512).act == "linear"
    assert bilinear.make_mlp("rank4-silu", 8, 512).rank == 4
    with pytest.raises(ValueError, match="valid: standard-gelu"):
        bilinear.make_mlp("swiglu", 8, 512)


def test_install_mlps_is_a_drop_in_that_trains():
    model = models.build_tiny("neox-seq", seed=0, vocab_size=50, n_layer=2, d_model=16,
                              n_head=2, context=16)
    symmetry.install_mlps(model, "symmetric-silu", 8 * 16 * 16, seed=0)
    assert all(isinstance(m, bilinear.SymmetricBilinearMLP) for m in capture.mlps(model))
    ids = torch.randint(0, 50, (3, 16))
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    assert all(m.q.weight.grad is not None for m in capture.mlps(model))


def test_intervals():
    m, lo, hi = symmetry.mean_interval([1.0, 2.0, 3.0])
    assert m == 2.0 and lo < 2.0 < hi
    assert np.isclose(hi - m, 4.302652729911275 * 1.0 / np.sqrt(3))  # t(0.975, 2)
    d, lo, hi = symmetry.welch_interval([10, 11, 12], [1, 2, 3])
    assert d == 9.0 and lo > 0
    d, lo, hi = symmetry.welch_interval([1, 2, 3], [1.5, 2.5, 2.0])
    assert lo < 0 < hi


def test_gate_asymmetry_matches_definitions():
    torch.manual_seed(0)
    mlp = LlamaMLP(LlamaConfig(hidden_size=8, intermediate_size=16, hidden_act="silu",
                               num_attention_heads=1, num_key_value_heads=1))
    x = torch.randn(50, 8)
    res = symmetry.gate_asymmetry(mlp, x)
    swapped = LlamaMLP(mlp.config)
    swapped.load_state_dict(mlp.state_dict())
    swapped.gate_proj.weight.data, swapped.up_proj.weight.data = \
        mlp.up_proj.weight.data.clone(), mlp.gate_proj.weight.data.clone()
    with torch.no_grad():
        y, y2 = mlp(x), swapped(x)
    assert np.isclose(res["exchange"], float((y - y2).norm() / y.norm()), rtol=1e-5)
    assert res["exchange"] > 0.05 and res["scale 2"] > 0.01


def test_gate_asymmetry_is_zero_for_a_linear_gate():
    torch.manual_seed(0)
    mlp = LlamaMLP(LlamaConfig(hidden_size=8, intermediate_size=16, hidden_act="silu",
                               num_attention_heads=1, num_key_value_heads=1))
    mlp.act_fn = torch.nn.Identity()
    res = symmetry.gate_asymmetry(mlp, torch.randn(50, 8))
    assert res["exchange"] < 1e-12 and res["scale 0.5"] < 1e-12


def test_modular_addition_is_learnable_and_seeded():
    a = symmetry.train_modular("gated-silu", p=7, d=16, budget=8 * 16 * 16, steps=300, seed=0)
    b = symmetry.train_modular("gated-silu", p=7, d=16, budget=8 * 16 * 16, steps=300, seed=0)
    assert a == b
    assert a.train_acc == 1.0  # it fits the training pairs


def test_random_counterpart_keeps_shapes_and_scale():
    torch.manual_seed(0)
    mlp = LlamaMLP(LlamaConfig(hidden_size=8, intermediate_size=16, hidden_act="silu",
                               num_attention_heads=1, num_key_value_heads=1))
    with torch.no_grad():
        mlp.up_proj.weight.mul_(5.0)
    r = symmetry.random_counterpart(mlp, seed=1)
    for name in ("gate_proj", "up_proj", "down_proj"):
        a, b = getattr(mlp, name).weight, getattr(r, name).weight
        assert a.shape == b.shape and not torch.equal(a, b)
        assert float(b.pow(2).mean().sqrt()) == pytest.approx(float(a.pow(2).mean().sqrt()),
                                                               rel=0.3)
    assert torch.equal(symmetry.random_counterpart(mlp, seed=1).up_proj.weight, r.up_proj.weight)
