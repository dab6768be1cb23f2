"""The `device` parameter: validation, and the wrapper that moves a model's inputs and outputs.

No GPU here: moves are checked with PyTorch's `meta` device (tensors with shapes and no data),
which fails on any arithmetic that mixes it with CPU tensors, as CUDA would."""

import ast
import json

import pytest
import torch
from torch import nn
from transformers.modeling_outputs import CausalLMOutput

from nlbudget.assets import devices
from nlbudget import gating, paths, surrogates
from nlbudget.book import profiles


def test_auto_is_cuda_only_where_cuda_is(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert devices.resolve("auto") == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert devices.resolve("auto") == "cuda"


@pytest.mark.parametrize("bad", ["gpu", "CUDA", "cuda:x", "", None, 0])
def test_a_bad_device_names_the_valid_ones(bad):
    with pytest.raises(profiles.ParameterError, match="valid: auto, cpu, cuda, cuda:N"):
        devices.resolve(bad)


def test_cuda_where_there_is_none_fails_at_once(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(profiles.ParameterError, match="0 CUDA device"):
        devices.resolve("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert devices.resolve("cuda:0") == "cuda:0"
    with pytest.raises(profiles.ParameterError, match="1 CUDA device"):
        devices.resolve("cuda:1")


def test_validate_resolves_the_device_for_every_chapter():
    for key in profiles.CHAPTERS:
        assert profiles.validate(key, profile="smoke")["device"] in ("cpu", "cuda")
        assert profiles.validate(key, profile="smoke", device="cpu")["device"] == "cpu"
        with pytest.raises(profiles.ParameterError, match="device"):
            profiles.validate(key, profile="smoke", device="tpu")


def test_committed_results_stay_fresh_on_a_machine_with_cuda(monkeypatch):
    """The device is no input of a result: on a machine with a GPU (faked), `auto` resolves to
    `cuda`, and every committed `full` result used to read stale there (#66)."""
    from nlbudget.book import ledger

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert profiles.validate("01", profile="full")["device"] == "cuda"  # the fake holds
    assert {k: ledger.staleness(k, "full") for k in profiles.CHAPTERS} == {
        k: "" for k in profiles.CHAPTERS}


class Probe(nn.Module):
    """Reports where its inputs arrived, as text (which no move touches)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))

    def forward(self, x, mask=None):
        return {"x": str(x.device), "mask": str(mask.device), "w": str(self.w.device)}


def test_attach_moves_inputs_to_the_model():
    m = devices.attach(Probe(), "meta")
    out = m(torch.zeros(2, 3), mask=torch.ones(2))
    assert out == {"x": "meta", "mask": "meta", "w": "meta"}
    assert m._nlbudget_callers == []  # the record of the caller's device is popped
    devices.attach(m, "meta")  # attaching again: still one wrapper
    assert len(m._forward_pre_hooks) == 1 and len(m._forward_hooks) == 1


def test_attach_returns_outputs_to_the_callers_device():
    lin = devices.attach(nn.Linear(3, 2), "cpu")
    assert lin(torch.zeros(4, 3)).device.type == "cpu"
    out = CausalLMOutput(loss=torch.zeros(()), logits=torch.zeros(1, 2, 5))
    moved = devices._move(out, torch.device("meta"))
    assert type(moved) is CausalLMOutput and moved.logits.is_meta and moved.loss.is_meta
    nested = devices._move((torch.zeros(1), [torch.zeros(1), None], {"a": 1}), "meta")
    assert nested[0].is_meta and nested[1][0].is_meta and nested[1][1] is None
    assert nested[2] == {"a": 1}


def test_a_replacement_follows_the_model_it_enters():
    # a hybrid holds the model's MLP, a CPU-fitted surrogate and a CPU-fitted gate: all move
    d = 4
    old = nn.Linear(d, d).to("meta")
    sur = surrogates.LinearSurrogate(torch.eye(d), torch.zeros(d))
    gate = gating.Gate(torch.zeros(d), torch.ones(d), nn.Linear(d, 1), "linear", d + 1)
    hybrid = gating.HybridMLP(nn.Linear(d, d), sur, gate)
    devices.follow(hybrid, old)
    assert all(t.is_meta for t in [*hybrid.parameters(), *hybrid.buffers()])
    assert devices.device_of(nn.Module()).type == "cpu"


#: The calls that load or train a model: each must say where (`device=`).
PLACING = {("models", "load"), ("training", "train"), ("training", "train_or_load"),
           ("symmetry", "train_modular")}


def _placing_calls(source: str):
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and (node.func.value.id, node.func.attr) in PLACING):
            yield node.func.value.id + "." + node.func.attr, node.lineno, \
                any(k.arg == "device" for k in node.keywords)


def test_every_model_load_in_a_chapter_says_where():
    """`device` reaches every model a chapter loads or trains, from its notebook and from its
    study (the paper-path test checks, on a GPU, where the parameters then are)."""
    root = paths.repo_root()
    sources = {str(f): f.read_text(encoding="utf-8")
               for f in (root / "src" / "nlbudget" / "chapters").glob("ch*/*.py")}
    for nb in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        sources[nb.name] = "\n".join("".join(c["source"]) for c in cells
                                     if c["cell_type"] == "code")
    calls = [(where, name, line, ok) for where, src in sources.items()
             for name, line, ok in _placing_calls(src)]
    assert len(calls) >= 10  # the walk found the chapters' loads
    assert not [c for c in calls if not c[3]], [c[:3] for c in calls if not c[3]]
    # the checker itself
    assert [ok for *_, ok in _placing_calls("models.load('x')\nmodels.load('x', device=d)")] \
        == [False, True]


def test_attach_records_where_the_parameters_are():
    n = len(devices.placements())
    devices.attach(nn.Linear(2, 2), "meta")
    assert devices.placements()[n:] == [{"model": "Linear", "device": "meta"}]
