"""Regenerate `pydocs.json.xz`, the book's in-domain corpus, from Debian's package and check it.

The corpus is the prose of the Python 3.11 documentation: the reST sources in the Debian package
`python3.11-doc`, version 3.11.2-6+deb12u8 (the version the book's numbers were made with),
cleaned to paragraphs by `nlbudget.assets.corpora.clean_rest`. The build, the tests and CI read the
compressed file shipped next to this script; nothing there fetches the package. To check the
shipped file against its source:

    # on Debian 12, or from any Debian mirror's pool (pool/main/p/python3.11/):
    #   apt-get download python3.11-doc=3.11.2-6+deb12u8
    python data/corpora/make_pydocs.py python3.11-doc_3.11.2-6+deb12u8_all.deb [--write]

It reads the .deb with Python alone (no dpkg), cleans the `*.rst.txt` files in path order,
and compares the paragraphs' SHA-256 with the one the library pins
(`nlbudget.assets.corpora.SHIPPED`). `--write` rewrites the compressed file and its manifest (after a
deliberate change of the recipe or the version: then update the pins and say so, since every
number of chapters 02-04 and 06 changes with it). Exit status 0: the shipped corpus is
reproduced.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import lzma
import sys
import tarfile
from pathlib import Path, PurePosixPath

from nlbudget.assets import corpora

HERE = Path(__file__).resolve().parent
SOURCES = "usr/share/doc/python3.11/html/_sources/"
LICENCE = SOURCES + "license.rst.txt"


def ar_members(deb: bytes) -> dict[str, bytes]:
    """The members of a .deb (a Unix `ar` archive)."""
    if not deb.startswith(b"!<arch>\n"):
        raise SystemExit("not a .deb (ar) file")
    out, pos = {}, 8
    while pos + 60 <= len(deb):
        header = deb[pos:pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        out[name] = deb[pos + 60:pos + 60 + size]
        pos += 60 + size + (size % 2)
    return out


def sources(deb_path: Path) -> tuple[dict[str, str], str]:
    """{path: text} of the documentation's reST sources, and the licence page's text."""
    members = ar_members(deb_path.read_bytes())
    data = next(v for k, v in members.items() if k.startswith("data.tar"))
    texts, licence = {}, None
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for m in tar.getmembers():
            name = m.name.removeprefix("./")
            if m.isfile() and name.startswith(SOURCES) and name.endswith(".rst.txt"):
                text = tar.extractfile(m).read().decode("utf-8", errors="replace")
                texts[name[len(SOURCES):]] = text
                if name == LICENCE:
                    licence = text
    if not texts or licence is None:
        raise SystemExit(f"{deb_path} holds no {SOURCES}*.rst.txt")
    return texts, licence


def paragraphs(texts: dict[str, str]) -> list[str]:
    """The recipe: every source in path order (as pathlib sorts paths), cleaned to paragraphs."""
    out = []
    for name in sorted(texts, key=lambda n: PurePosixPath(n).parts):
        out.extend(corpora.clean_rest(texts[name]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("deb", type=Path, help="python3.11-doc_3.11.2-6+deb12u8_all.deb")
    ap.add_argument("--write", action="store_true", help="rewrite the shipped file and manifest")
    a = ap.parse_args(argv)
    texts, licence = sources(a.deb)
    raw = json.dumps(paragraphs(texts), ensure_ascii=False).encode("utf-8")
    digest = hashlib.sha256(raw).hexdigest()
    pinned = corpora.SHIPPED["pydocs"].sha256
    print(f"{len(texts)} source files, {len(json.loads(raw))} paragraphs, "
          f"{len(raw) / 1e6:.2f} MB, sha256 {digest}")
    if a.write:
        xz = lzma.compress(raw, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64,
                           preset=9 | lzma.PRESET_EXTREME)
        (HERE / "pydocs.json.xz").write_bytes(xz)
        (HERE / "pydocs-LICENSE.rst.txt").write_text(licence, encoding="utf-8")
        manifest = {"name": "pydocs", "origin": f"Debian package {a.deb.name}",
                    "deb_sha256": hashlib.sha256(a.deb.read_bytes()).hexdigest(),
                    "recipe": "data/corpora/make_pydocs.py (nlbudget.assets.corpora.clean_rest)",
                    "licence": corpora.SOURCES["pydocs"].licence,
                    "licence_file": "pydocs-LICENSE.rst.txt",
                    "paragraphs": len(json.loads(raw)), "sha256": digest,
                    "compressed_sha256": hashlib.sha256(xz).hexdigest()}
        (HERE / "pydocs.manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        print(f"wrote {HERE / 'pydocs.json.xz'} ({len(xz) / 1e6:.2f} MB)")
    if digest != pinned:
        print(f"MISMATCH: the library pins {pinned}", file=sys.stderr)
        return 1
    print("reproduced: equals the pinned corpus")
    return 0


if __name__ == "__main__":
    sys.exit(main())
