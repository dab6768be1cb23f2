"""A content-addressed disk cache for the expensive, deterministic measurements that chapters
share: the same ridge fits and the same per-token linearization losses of a pretrained model
(chapter 03 measures them; chapter 04 trains its gates on them).

A result is filed under the SHA-256 of everything it depends on: the model's weights, the
input token ids, the settings, the replacement module's weights, and the source of the code
that computes it (`CODE`). A hit is therefore the very tensor a fresh computation would give;
sharing only saves time and never changes a number. `NLBUDGET_MEMO=0` switches it off.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch

from nlbudget.assets import devices
from nlbudget import paths

#: The modules whose source decides what a cached result holds (paths in the package).
CODE = ("surrogates.py", "capture.py", "evaluation.py", "assets/memo.py")


def enabled() -> bool:
    return os.environ.get("NLBUDGET_MEMO", "1") not in ("0", "false", "no")


def _code() -> bytes:
    package = Path(__file__).resolve().parent.parent
    return b"".join((package / f).read_bytes() for f in CODE)


def _update(h, obj) -> None:
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    elif isinstance(obj, torch.nn.Module):
        h.update(type(obj).__qualname__.encode())
        for k, v in obj.state_dict().items():
            h.update(k.encode())
            _update(h, v)
        for k in sorted(vars(obj)):  # plain settings of the module (e.g. KeepFirst.k)
            v = vars(obj)[k]
            if isinstance(v, (int, float, str, bool)) and not k.startswith("_"):
                h.update(f"{k}={v!r}".encode())
    elif isinstance(obj, dict):
        for k in sorted(obj, key=str):
            h.update(repr(k).encode())
            _update(h, obj[k])
    elif isinstance(obj, (list, tuple)):
        h.update(b"[")
        for v in obj:
            _update(h, v)
        h.update(b"]")
    else:
        h.update(repr(obj).encode())


def key(*parts) -> str:
    h = hashlib.sha256(_code())
    for p in parts:
        _update(h, p)
    return h.hexdigest()


def model_key(model) -> str:
    """The digest of a model's class, device and weights."""
    return key(type(model).__qualname__, str(devices.device_of(model)),
               [(n, p) for n, p in model.state_dict().items()])


def _path(kind: str, k: str) -> Path:
    return paths.cache_dir() / "memo" / kind / f"{k}.pt"


def get(kind: str, k: str):
    """The cached object, or None."""
    p = _path(kind, k)
    if not enabled() or not p.is_file():
        return None
    try:
        return torch.load(p, weights_only=True)
    except Exception:  # a damaged file is a miss
        return None


def put(kind: str, k: str, obj) -> None:
    if not enabled():
        return
    p = _path(kind, k)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    torch.save(obj, tmp)
    os.replace(tmp, p)
