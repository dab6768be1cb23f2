import sympy as sp
import pytest

from nlbudget import symbolic


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


def test_symmetric_form_keeps_both_symmetries_for_any_sigma():
    sym = symbolic.symmetric_invariance()
    assert sym["exchange"].holds and sym["inverse-scaling"].holds


def test_proofs_have_negative_controls():
    for ident in (symbolic.kv_memory(2, 2), symbolic.static_query_absorbed(2, 1),
                  symbolic.rank1_bilinear(2, 2), *symbolic.symmetric_invariance().values()):
        assert ident.holds and symbolic.rejects_perturbation(ident), ident.name
    wrong = symbolic.Identity("wrong", symbolic.sigma(symbolic.a), symbolic.sigma(symbolic.a),
                              True)
    # a statement whose two sides are the same function of the same symbol: perturbing the
    # right side makes it false, which the checker must see
    assert symbolic.rejects_perturbation(wrong)
