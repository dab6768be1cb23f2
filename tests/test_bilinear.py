import pytest
import torch
from hypothesis import given, settings, strategies as st
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaMLP

from nlbudget import bilinear

D, N = 6, 10


def _x(seed=0, n=32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, D, generator=g, dtype=torch.float64)


def _make(cls, act, seed=1, **kw):
    torch.manual_seed(seed)
    return cls(D, N, act=act, **kw).double()


def test_gated_mlp_equals_llama_mlp():
    llama = LlamaMLP(LlamaConfig(hidden_size=D, intermediate_size=N, hidden_act="silu",
                                 num_attention_heads=1, num_key_value_heads=1)).double()
    ours = _make(bilinear.GatedMLP, "silu")
    ours.q.weight.data.copy_(llama.gate_proj.weight)
    ours.k.weight.data.copy_(llama.up_proj.weight)
    ours.v.weight.data.copy_(llama.down_proj.weight)
    x = _x()
    torch.testing.assert_close(ours(x), llama(x), rtol=0, atol=1e-12)


def test_key_value_mlp_is_sum_over_units():
    m = _make(bilinear.KeyValueMLP, "gelu")
    x = _x()
    manual = sum(torch.nn.functional.gelu(x @ m.keys.weight[j])[:, None] * m.values.weight[:, j]
                 for j in range(N))
    torch.testing.assert_close(m(x), manual, rtol=0, atol=1e-12)


def test_rank1_equals_symmetric_form():
    r = _make(bilinear.RankRBilinearMLP, "silu", rank=1)
    s = _make(bilinear.SymmetricBilinearMLP, "silu", seed=7)
    s.load_state_dict(r.state_dict())
    x = _x()
    assert torch.equal(r(x), s(x))


@pytest.mark.parametrize("rank", [1, 2, 4])
def test_low_rank_equals_full_bilinear_attention(rank):
    r = _make(bilinear.RankRBilinearMLP, "gelu", rank=rank)
    full = bilinear.BilinearAttentionMLP.from_low_rank(r)
    x = _x()
    torch.testing.assert_close(r(x), full(x), rtol=0, atol=1e-10)


def test_rank2_differs_from_rank1():
    r = _make(bilinear.RankRBilinearMLP, "silu", rank=2)
    s = _make(bilinear.SymmetricBilinearMLP, "silu")
    assert bilinear.relative_error(r, s, _x()) > 1e-2


@settings(max_examples=30, deadline=None)
@given(act=st.sampled_from(list(bilinear.ACTIVATIONS)),
       alpha=st.floats(0.1, 10) | st.floats(-10, -0.1), seed=st.integers(0, 10_000))
def test_symmetric_form_is_invariant_for_every_sigma(act, alpha, seed):
    m = _make(bilinear.SymmetricBilinearMLP, act, seed=seed)
    x = _x(seed)
    assert bilinear.relative_error(m, bilinear.exchanged(m), x) < 1e-12
    assert bilinear.relative_error(m, bilinear.inverse_scaled(m, alpha), x) < 1e-12


@settings(max_examples=30, deadline=None)
@given(alpha=st.floats(0.1, 10), seed=st.integers(0, 10_000))
def test_gated_relu_keeps_positive_scaling(alpha, seed):
    m = _make(bilinear.GatedMLP, "relu", seed=seed)
    assert bilinear.relative_error(m, bilinear.inverse_scaled(m, alpha), _x(seed)) < 1e-12


@pytest.mark.parametrize("act", ["relu", "gelu", "silu"])
def test_gated_form_breaks_exchange(act):
    m = _make(bilinear.GatedMLP, act)
    assert bilinear.relative_error(m, bilinear.exchanged(m), _x()) > 1e-2


@pytest.mark.parametrize("act,alpha", [("gelu", 2.0), ("silu", 2.0), ("gelu", 0.5),
                                       ("silu", 0.5), ("relu", -1.0)])
def test_gated_form_breaks_inverse_scaling(act, alpha):
    m = _make(bilinear.GatedMLP, act)
    assert bilinear.relative_error(m, bilinear.inverse_scaled(m, alpha), _x()) > 1e-2


def test_linear_gate_keeps_exchange():
    m = _make(bilinear.GatedMLP, "linear")
    assert bilinear.relative_error(m, bilinear.exchanged(m), _x()) < 1e-12


def test_unknown_activation_is_rejected():
    with pytest.raises(ValueError, match="valid: relu, gelu, silu, linear"):
        bilinear.GatedMLP(D, N, act="tanh")
