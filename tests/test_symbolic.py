import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nlbudget import bilinear, symbolic


@pytest.mark.parametrize("fn", [symbolic.kv_memory, symbolic.static_query_absorbed,
                                symbolic.rank1_bilinear])
@pytest.mark.parametrize("d,n", [(2, 1), (3, 2)])
def test_chain_identities_hold(fn, d, n):
    assert fn(d=d, n=n).holds


def test_a_wrong_identity_is_not_proved():
    # the checker itself must be able to say no: σ(x Q Kᵀ) ≠ σ(x K Qᵀ ...) in general
    x = symbolic._row("x", 2)
    Q, K = symbolic._sym_matrix("Q", 2, 2), symbolic._sym_matrix("K", 1, 2)
    assert not symbolic._is_zero(symbolic._apply(symbolic.sigma, x * Q * K.T)
                                 - symbolic._apply(symbolic.sigma, x * (Q * K.T)[::-1, :]))


def test_exchange_iff_linear_proof():
    ident = symbolic.exchange_iff_linear()
    assert ident.holds
    # the proof's key step: b = 1 gives σ(a) = σ(1)·a
    assert ident.rhs == symbolic.a * symbolic.sigma(1)
    assert r"\sigma{\left(a \right)} = a \sigma{\left(1 \right)}" in ident.steps[1][1]


@pytest.mark.parametrize("name", ["relu", "gelu", "silu"])
def test_exchange_counterexamples_are_exact_and_nonzero(name):
    ce = symbolic.exchange_counterexample(name)
    assert ce is not None
    f = symbolic.ACTIVATIONS[name]
    a, b = ce.point["a"], ce.point["b"]
    value = f.subs(symbolic.z, a) * b - f.subs(symbolic.z, b) * a
    assert abs(sp.N(value - ce.value, 60)) < 1e-50  # same exact value (to 50 digits)
    assert abs(float(value)) > 1e-3


def test_relu_counterexample_value():
    ce = symbolic.exchange_counterexample("relu")
    a, b = ce.point["a"], ce.point["b"]
    assert ce.value == max(0, a) * b - max(0, b) * a


def test_linear_has_no_exchange_counterexample():
    assert symbolic.exchange_counterexample("linear") is None


@pytest.mark.parametrize("name,pos,neg", [("relu", True, False), ("gelu", False, False),
                                          ("silu", False, False), ("linear", True, True)])
def test_inverse_scaling(name, pos, neg):
    assert symbolic.inverse_scaling_holds(name, "positive") is pos
    assert symbolic.inverse_scaling_holds(name, "negative") is neg


@pytest.mark.parametrize("name,alpha", [("relu", -1), ("gelu", 2), ("silu", 2), ("gelu", -1)])
def test_inverse_scaling_counterexamples(name, alpha):
    ce = symbolic.inverse_scaling_counterexample(name, alpha)
    f = symbolic.ACTIVATIONS[name]
    al, a = ce.point["alpha"], ce.point["a"]
    assert abs(float(f.subs(symbolic.z, al * a) / al - f.subs(symbolic.z, a))) > 1e-3


def test_relu_has_no_positive_alpha_counterexample():
    assert symbolic.inverse_scaling_counterexample("relu", 2) is None


@settings(max_examples=25, deadline=None)
@given(d=st.integers(1, 6), n=st.integers(1, 5), seed=st.integers(0, 10_000),
       alpha=st.floats(0.2, 5.0), sign=st.sampled_from([-1.0, 1.0]),
       act=st.sampled_from(list(bilinear.ACTIVATIONS)))
def test_symmetric_form_keeps_both_symmetries_for_every_d(d, n, seed, alpha, sign, act):
    # the sympy statements are about scalars; on modules of any width d the symmetric form is
    # exchange- and inverse-scaling-invariant for every σ (to float64 rounding)
    torch.manual_seed(seed)
    m = bilinear.SymmetricBilinearMLP(d, n, act=act).double()
    x = torch.randn(32, d, dtype=torch.float64)
    with torch.no_grad():
        y = m(x)
        for other in (bilinear.exchanged(m), bilinear.inverse_scaled(m, sign * alpha)):
            assert float((other(x) - y).abs().max()) <= 1e-12 * (1 + float(y.abs().max()))


@pytest.mark.parametrize("act", ["relu", "gelu", "silu"])
def test_module_exchange_reduces_to_the_scalar_condition_only_for_independent_q_k(act):
    # module-level exchange invariance for all x asks σ(a)b = σ(b)a only at the pairs
    # (a, b) = (x·q_j, x·k_j) that x can reach: all of R² when q_j and k_j are independent
    # (d ≥ 2), only a line when they are parallel (always when d = 1)
    torch.manual_seed(0)
    m = bilinear.GatedMLP(3, 4, act=act).double()
    x = torch.randn(64, 3, dtype=torch.float64)
    assert bilinear.relative_error(m, bilinear.exchanged(m), x) > 1e-3  # independent: broken
    with torch.no_grad():
        m.k.weight.copy_(m.q.weight)  # q_j = k_j: the reachable pairs have a = b
    assert bilinear.relative_error(m, bilinear.exchanged(m), x) < 1e-12
    m1 = bilinear.GatedMLP(1, 4, act=act).double()
    x1 = torch.randn(64, 1, dtype=torch.float64)
    with torch.no_grad():  # d = 1, k_j = c q_j: σ(a)·c a = σ(c a)·a, false for c = −2
        m1.k.weight.copy_(-2.0 * m1.q.weight)
    assert bilinear.relative_error(m1, bilinear.exchanged(m1), x1) > 1e-3


def test_proofs_have_negative_controls():
    for ident in (symbolic.kv_memory(2, 2), symbolic.static_query_absorbed(2, 1),
                  symbolic.rank1_bilinear(2, 2), *symbolic.symmetric_invariance().values()):
        assert ident.holds and symbolic.rejects_perturbation(ident), ident.name
    wrong = symbolic.Identity("wrong", symbolic.sigma(symbolic.a), symbolic.sigma(symbolic.a),
                              True)
    # a statement whose two sides are the same function of the same symbol: perturbing the
    # right side makes it false, which the checker must see
    assert symbolic.rejects_perturbation(wrong)
