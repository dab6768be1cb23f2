"""Where a chapter's models run: the `device` parameter.

Every notebook takes `device` (`auto`, `cpu`, `cuda` or `cuda:N`; `auto` is CUDA when present).
`attach(model, device)` moves a model there and wraps its forward so that callers keep their
tensors on the CPU: inputs go to the device, outputs come back to the device the inputs came
from. Data, fits, statistics and plots therefore stay CPU code; only the model's own arithmetic
(the forward and backward passes, which is nearly all of the time at the `paper` scale) moves.
Modules put into a running model (surrogates, gates, probes) follow it with `follow`.
"""

from __future__ import annotations

import re

import torch
from torch import nn

from nlbudget.errors import ParameterError

CHOICES = ("auto", "cpu", "cuda", "cuda:N")


def resolve(name: str) -> str:
    """The device a `device` parameter names: `auto` → `cuda` when CUDA is available, else
    `cpu`. Raises `ParameterError` for anything else, or for CUDA where there is none."""
    if not isinstance(name, str) or not (name in ("auto", "cpu", "cuda")
                                         or re.fullmatch(r"cuda:\d+", name)):
        raise ParameterError(f"device={name!r} is not valid; valid: {', '.join(CHOICES)}")
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda"):
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(name.partition(":")[2] or 0)
        if index >= n:
            raise ParameterError(f"device={name!r}: this machine has {n} CUDA device(s); "
                                 f"valid here: auto, cpu" + (", cuda" if n else ""))
    return name


def _move(obj, device):
    """Tensors in `obj` (nested tuples, lists and dicts, transformers' ModelOutput included)
    moved to `device`; anything else (a KV cache object, None, numbers) as it is."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):  # ModelOutput is a dict: change it in place, keep its class
        for k in list(obj.keys()):
            obj[k] = _move(obj[k], device)
        return obj
    if isinstance(obj, (list, tuple)):
        moved = [_move(x, device) for x in obj]
        return type(obj)(moved) if not hasattr(obj, "_fields") else type(obj)(*moved)
    return obj


def _first_device(args, kwargs):
    for x in [*args, *kwargs.values()]:
        if isinstance(x, torch.Tensor):
            return x.device
    return None


def _to_device(module, args, kwargs):
    module._nlbudget_callers.append(_first_device(args, kwargs))
    dev = module._nlbudget_device
    return _move(tuple(args), dev), _move(dict(kwargs), dev)


def _back(module, args, kwargs, output):
    caller = module._nlbudget_callers.pop()
    return output if caller is None else _move(output, caller)


#: Where this process attached its models (`attach`): {"model": its class, "device": where its
#: parameters are after the move}; a chapter's results file records it (`placements`).
_PLACED: list[dict] = []


def placements() -> list[dict]:
    """Every model this process attached, with where its parameters actually are."""
    return list(_PLACED)


def attach(model: nn.Module, device: str) -> nn.Module:
    """Move `model` to `device` (a resolved name) and wrap its forward: inputs are moved to the
    device, outputs back to where the inputs were. Returns the model. Attaching twice moves
    the model again but adds no second wrapper."""
    dev = torch.device(device)
    model.to(dev)
    _PLACED.append({"model": type(model).__name__, "device": str(device_of(model))})
    model._nlbudget_device = dev
    if not hasattr(model, "_nlbudget_callers"):
        model._nlbudget_callers = []
        model.register_forward_pre_hook(_to_device, with_kwargs=True)
        model.register_forward_hook(_back, with_kwargs=True)
    return model


def device_of(module: nn.Module) -> torch.device:
    """Where `module`'s first parameter or buffer lives (the CPU for an empty module)."""
    for t in [*module.parameters(), *module.buffers()]:
        return t.device
    return torch.device("cpu")


def follow(new: nn.Module, old: nn.Module) -> nn.Module:
    """Put `new`, about to replace or wrap `old` inside a model, on `old`'s device."""
    return new.to(device_of(old))  # every part of it: a hybrid holds the model's own MLP
