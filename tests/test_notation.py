"""One notation (book/notation.md): the symbols that used to mean two things are used one way
in every chapter and exercise page."""

import re

import nbformat
import pytest

from nlbudget import paths

ROOT = paths.repo_root()
PAGES = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted(
    (ROOT / "notebooks" / "exercises").glob("*.ipynb"))

#: (pattern in a page's math, what it would wrongly mean, the book's symbol)
BANNED = [
    (r"\\sigma\s*\(\s*a_", "σ as the logistic gate", r"\operatorname{sigmoid}(a_\ell)"),
    (r"(?<![A-Za-z\\_])UV|U\s*=\s*0|(?<![A-Za-z\\])U\s*V\s*f", "U as the skip's up-projection",
     r"S_\uparrow"),
    (r"USV\^", "U as an SVD factor", r"U_X"),
    (r"\(\\alpha\s*,\s*\\sigma\)|V_\{\\sigma", "σ as pending factors", r"\tau"),
    (r"(?<![A-Za-z\\])r_i|c\s*=\s*r\s*-\s*e|\\mathrm\{Norm\}\(r", "r as the residual stream", "h"),
    (r"[AQKV]\^t_h|h\^\{t-1\}|\\sum_h\b", "t as a layer and h as a head (Part III)",
     r"A^\ell_\eta"),
    (r"(?<![A-Za-z\\])L\s*\(\s*\\theta|loss \$L\$", "L as a loss", r"\mathcal L"),
    (r"(?<![A-Za-z\\])W(_\{?\w+\}?)?\s*x(_t)?\s*\+", "column vectors (W x + b)", r"xW^\top"),
    (r"\)\s*(\\,)?\s*(V|W_2)(?![\^_\w])", "an output map untransposed (V, W_2 are d×n)",
     r"V^\top"),
    (r"(?<!\\hat )(?<!\\hat)W_\\ell", "the surrogate as W_ℓ (read as W_1, W_2)", r"\hat W_\ell"),
    (r"(?<!\\mathcal )(?<![\\\w])L_\\text\{(lin|full)\}", "L_lin as a loss",
     r"\mathcal L_\text{lin}"),
    (r"\\alpha\s*/\s*r", "α as LoRA's scale (α is Part I's scaling factor)",
     r"\alpha_\text{LoRA}"),
    (r"\\cdots\s*T(?![\w])", "T as a matrix (T is a sequence length)", r"$Z$"),
    (r"\\sum_k|\\binom\{[^{}]*\}\{k\}|H\^k", "k as a summation index", r"$u$"),
    (r"(?<![A-Za-wyz\\])W\s*\+\s*b(?![_\w])", "a fitted map unhatted (xW + b)",
     r"\hat W_\ell"),
]

#: The same rules for the comments of a page's code cells, written in Unicode: (pattern, what
#: it would wrongly mean, the book's form).
CODE_BANNED = [
    (r"σ\(\s*(w\s*·\s*x|x\s*·\s*w)", "σ as the gate's logistic", "sigmoid(x·w + b)"),
    (r"\bW\s*x\s*\+", "column vectors (W x + b)", "x Wᵀ + b"),
    (r"(?<![\w^ᵀ̂])x\s*W\s*\+\s*b\b", "a fitted map unhatted (xW + b)", "x Ŵ + b̂"),
    (r"\)\s*V(?![ᵀ\w.^])", "an output map untransposed (V is d×n)", "Vᵀ"),
    (r"\bU\s*V\s*f\b|σ\(a_", "U as the skip's up-projection, σ as its gate", "S↑, sigmoid(a)"),
]

#: Symbols that mean one thing in some parts and must not appear elsewhere: (pattern, what it
#: would mean out of place, the chapters where the symbol has its meaning).
SCOPED = [
    (r"(?<![A-Za-z\\_{])k(?![A-Za-z_])", "a bare k outside Part I (a key), Part III (k-hop) "
     "and Part IV (a probe's width)", {"01", "02", "05", "06"}),
    (r"(?<![A-Za-z\\_{])P(?![A-Za-z_])", "a bare P outside Part III (the position table)",
     {"05"}),
    (r"(?<![A-Za-z\\_{])m(?![A-Za-z_])", "a bare m outside Part III (a universal transformer's "
     "width) and Part V (random features)", {"05", "07"}),
]


def _math(path) -> str:
    nb = nbformat.read(path, as_version=4)
    md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return "\n".join(re.findall(r"\$\$.*?\$\$|\$[^$\n]+\$", md, re.S))


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.parent.name + "/" + p.stem)
def test_pages_use_the_books_notation(path):
    math = _math(path)
    for pattern, wrong, right in BANNED:
        hit = re.search(pattern, math)
        assert hit is None, f"{path.name}: {hit.group(0)!r} uses {wrong}; the book writes {right}"
    for pattern, wrong, where in SCOPED:
        hit = re.search(pattern, math)
        assert path.stem[:2] in where or hit is None, f"{path.name}: {hit.group(0)!r} is {wrong}"


def _comments(path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    return [line[line.index("#"):] for c in nb.cells if c.cell_type == "code"
            for line in c.source.splitlines() if "#" in line]


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.parent.name + "/" + p.stem)
def test_code_comments_use_the_books_notation(path):
    for comment in _comments(path):
        for pattern, wrong, right in CODE_BANNED:
            hit = re.search(pattern, comment)
            assert hit is None, (f"{path.name}: {comment!r} uses {wrong}; the book writes "
                                 f"{right}")


def test_the_comment_rules_catch_the_old_notation():
    old = ["# g(x) = σ(w·x + b)", "# W x + b", "# the surrogate xW + b", "# (σ(xQᵀ) ⊙ xKᵀ) V",
           "# s = σ(a_l) U V f"]
    caught = {w for p, w, _ in CODE_BANNED if any(re.search(p, c) for c in old)}
    assert caught == {w for _, w, _ in CODE_BANNED}
    new = ["# g(x) = sigmoid(x·w + b)", "# x Wᵀ + b", "# the surrogate x Ŵ + b̂",
           "# (σ(xQᵀ) ⊙ xKᵀ) Vᵀ", "# σ(a)b = σ(b)a", "# s = sigmoid(a) f S↓ᵀ S↑ᵀ"]
    assert not [(p, c) for p, _, _ in CODE_BANNED for c in new if re.search(p, c)]


def test_the_rules_catch_the_old_notation():
    old = ("$\\sigma(a_\\ell)\\, U V f_t$ $U=0$ $(\\alpha,\\sigma)$ $c=r-e$ $r_i$ "
           "$h^t = h^{t-1} + \\sum_h A^t_h$ $X_c = USV^\\top$ $W_1 x_t + b_1$ $Wx+b$ "
           "$(\\sigma(xQ^\\top)\\odot xK^\\top)V$ $\\sigma(xW_1^\\top)W_2$ $xW_\\ell + b$ "
           "$\\delta = L_\\text{lin} - L_\\text{full}$ $\\alpha/r=2$ $EV\\cdots T$ "
           "$\\hat f(x)=xW+b$")
    old += " $\\sum_k \\binom{\\ell}{k}H^k$"
    caught = {wrong for pattern, wrong, _ in BANNED if re.search(pattern, old)}
    assert caught == {w for _, w, _ in BANNED} - {"L as a loss"}
    new = ("$(\\sigma(xQ^\\top)\\odot xK^\\top)\\,V^\\top$ $\\sigma(xW_1^\\top)W_2^\\top$ "
           "$x\\hat W_\\ell + \\hat b_\\ell$ $\\mathcal L_\\text{lin}$ $\\alpha_\\text{LoRA}/r$ "
           "$\\cdots Z$ $(B, T, d)$")
    assert not [wrong for pattern, wrong, _ in BANNED if re.search(pattern, new)]
    # a PCA gate's k, a probability P(·): caught outside the parts that own k and P
    stray = "$k=2,6,12$ $k<d$ $P(x)$ $hi < m$"
    assert all(re.search(pattern, stray) for pattern, _, _ in SCOPED)
    assert not [w for pattern, w, _ in SCOPED if re.search(pattern, "$n_\\text{pc}<d$ $\\Pr(x)$ "
                                                                 "$k_\\text{pre}$ $P_\\alpha$")]


def test_notation_page_defines_every_symbol_it_replaces():
    page = (ROOT / "book" / "notation.md").read_text()
    for _, _, right in BANNED:
        assert right in page, right
    for sym in ("$d$", "$n$", "$m$", "$L$", "$H$", "$r$", "$h$", "$\\sigma$", "$E$", "$U$"):
        assert sym in page, sym
