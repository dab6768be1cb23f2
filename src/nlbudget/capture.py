"""Where the MLPs are, and recording their inputs and outputs.

Five layouts of `transformers` models are known: GPT-2 (`transformer.h[i].mlp`, sequential
residual), GPT-NeoX/Pythia (`gpt_neox.layers[i].mlp`, parallel residual), Llama/SmolLM2 and
Qwen2 (`model.layers[i].mlp`, gated SiLU MLP) and Gemma 3 (`model.layers[i].mlp`, gated GELU
MLP read after `pre_feedforward_layernorm`; sliding-window and global layers, each with its
own mask and rotary embedding, so its blocks take per-layer arguments: `Layout.kwargs`). Activations are addressed by stable names,
`blocks.7.mlp.in` and `blocks.7.mlp.out` (the MLP's own input, after the pre-MLP norm), and
`blocks.7.mlp.resid`: the residual stream that norm reads (recorded with `resid=True`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from nlbudget.assets import devices


@dataclass(frozen=True)
class Layout:
    """How to drive one model family block by block (used for prefix reuse)."""

    family: str
    body: Callable  # model -> the module holding the blocks
    blocks_attr: str
    embed: Callable  # (model, ids) -> (hidden (B,T,d), block kwargs, or a list: one a layer)
    final_norm: Callable  # model -> the norm applied before the LM head
    mlp_norm: str  # attribute of a block: the norm whose output the MLP reads

    @staticmethod
    def kwargs(kw, layer: int) -> dict:
        """Block `layer`'s keyword arguments from what `embed` returned."""
        return kw[layer] if isinstance(kw, list) else kw

    def head(self, model, h):
        """Logits from the last block's hidden states: (B, T, vocab), soft-capped where the
        model caps them (`final_logit_softcapping`)."""
        logits = model.get_output_embeddings()(self.final_norm(model)(h))
        cap = getattr(model.config, "final_logit_softcapping", None)
        return torch.tanh(logits / cap) * cap if cap else logits


def _positions(ids):
    return torch.arange(ids.shape[1], device=ids.device)[None].expand(ids.shape[0], -1)


def _gpt2_embed(model, ids):
    t = model.transformer
    return t.wte(ids) + t.wpe(_positions(ids)), {"attention_mask": None}


def _rotary_embed(body, embed):
    def f(model, ids):
        b = body(model)
        h = getattr(b, embed)(ids)
        pos = _positions(ids)
        return h, {"attention_mask": None, "position_ids": pos,
                   "position_embeddings": b.rotary_emb(h, pos)}
    return f


def _gemma3_embed(model, ids):
    """Gemma 3: the scaled token embedding, and for each layer the mask and rotary embedding
    of its type (`config.layer_types`): causal for global layers, causal within
    `sliding_window` positions for the others."""
    b, cfg = model.model, model.config
    h = b.embed_tokens(ids)
    T, pos = ids.shape[1], _positions(ids)
    i = torch.arange(T, device=ids.device)
    allowed = {"full_attention": i[None, :] <= i[:, None]}
    allowed["sliding_attention"] = allowed["full_attention"] & (
        i[:, None] - i[None, :] < cfg.sliding_window)
    masks = {k: torch.zeros(T, T, dtype=h.dtype, device=h.device).masked_fill(
        ~a, torch.finfo(h.dtype).min)[None, None] for k, a in allowed.items()}
    rope = {k: b.rotary_emb(h, pos, k) for k in set(cfg.layer_types)}
    return h, [{"attention_mask": masks[k], "position_ids": pos, "position_embeddings": rope[k]}
               for k in cfg.layer_types]


LAYOUTS = {
    "gpt2": Layout("gpt2", lambda m: m.transformer, "h", _gpt2_embed,
                   lambda m: m.transformer.ln_f, "ln_2"),
    "gpt_neox": Layout("gpt_neox", lambda m: m.gpt_neox, "layers",
                       _rotary_embed(lambda m: m.gpt_neox, "embed_in"),
                       lambda m: m.gpt_neox.final_layer_norm, "post_attention_layernorm"),
    "llama": Layout("llama", lambda m: m.model, "layers",
                    _rotary_embed(lambda m: m.model, "embed_tokens"),
                    lambda m: m.model.norm, "post_attention_layernorm"),
    "qwen2": Layout("qwen2", lambda m: m.model, "layers",
                    _rotary_embed(lambda m: m.model, "embed_tokens"),
                    lambda m: m.model.norm, "post_attention_layernorm"),
    "gemma3_text": Layout("gemma3_text", lambda m: m.model, "layers", _gemma3_embed,
                          lambda m: m.model.norm, "pre_feedforward_layernorm"),
}


def layout(model) -> Layout:
    kind = model.config.model_type
    if kind not in LAYOUTS:
        raise ValueError(f"unsupported model type {kind!r}; known: {', '.join(LAYOUTS)}")
    return LAYOUTS[kind]


def blocks(model) -> nn.ModuleList:
    lay = layout(model)
    return getattr(lay.body(model), lay.blocks_attr)


def mlps(model) -> list[nn.Module]:
    """The MLP module of every layer, in order."""
    return [b.mlp for b in blocks(model)]


class MLPCapture:
    """Record the input and output of chosen MLPs, all layers in one forward sweep.

    >>> with MLPCapture(model, max_tokens=10_000) as cap:
    ...     model(ids)
    >>> cap["blocks.3.mlp.in"].shape   # (n_tokens, d)

    Buffers are preallocated (`max_tokens` rows per layer, in the model's dtype unless
    `dtype` is given); tokens beyond that are not
    recorded. `keep` is an optional (B, T) boolean mask of positions to record for the next
    forward (e.g. to leave out position 0). Hooks are removed on exit, leaving the model as it
    was.
    """

    def __init__(self, model, layers=None, max_tokens: int = 10_000,
                 dtype: torch.dtype | None = None, resid: bool = False):
        self.model = model
        self.layers = list(range(len(mlps(model)))) if layers is None else list(layers)
        # default: the model's own dtype, so recording is a plain copy and loses nothing
        dtype = dtype or next(model.parameters()).dtype
        self.max_tokens, self.dtype = max_tokens, dtype
        d_in = model.config.hidden_size
        self.inputs = {l: torch.empty(max_tokens, d_in, dtype=dtype) for l in self.layers}
        self.outputs = {l: torch.empty(max_tokens, d_in, dtype=dtype) for l in self.layers}
        self.resids = ({l: torch.empty(max_tokens, d_in, dtype=dtype) for l in self.layers}
                       if resid else {})
        self.n = 0  # rows filled
        self.keep: torch.Tensor | None = None
        self._handles = []
        self._pending = {}

    def _hook(self, layer):
        def hook(module, args, output):
            self._pending[layer] = self._record(self.inputs[layer], args[0])
            self._record(self.outputs[layer], output)
        return hook

    def _resid_hook(self, layer):
        def hook(module, args):
            self._record(self.resids[layer], args[0])
        return hook

    def _record(self, buf: torch.Tensor, t: torch.Tensor) -> int:
        """Copy the kept positions of t (B, T, d) into buf from row n on; returns the count."""
        t = t.detach()
        if self.keep is not None:
            t = t[self.keep]
        t = t.reshape(-1, t.shape[-1])
        k = min(self.max_tokens - self.n, t.shape[0])
        buf[self.n:self.n + k] = t[:k].to(self.dtype)
        return k

    def __enter__(self):
        mods = mlps(self.model)
        norm = layout(self.model).mlp_norm
        for l in self.layers:
            self._handles.append(mods[l].register_forward_hook(self._hook(l)))
            if self.resids:
                block = blocks(self.model)[l]
                self._handles.append(
                    getattr(block, norm).register_forward_pre_hook(self._resid_hook(l)))
        # advance the row counter once per forward, after every layer has written
        self._handles.append(self.model.register_forward_hook(self._advance))
        return self

    def _advance(self, *_):
        if self._pending:
            self.n += min(self._pending.values())
            self._pending = {}

    def __exit__(self, *exc):
        for h in self._handles:
            h.remove()
        self._handles = []
        return False

    @property
    def full(self) -> bool:
        return self.n >= self.max_tokens

    def __getitem__(self, name: str) -> torch.Tensor:
        """`blocks.L.mlp.in` / `.out` / `.resid`: the recorded rows."""
        parts = name.split(".")
        kinds = {"in": self.inputs, "out": self.outputs, "resid": self.resids}
        if (len(parts) != 4 or parts[0] != "blocks" or parts[2] != "mlp"
                or parts[3] not in kinds or (parts[3] == "resid" and not self.resids)):
            raise KeyError(f"expected 'blocks.<L>.mlp.in', '.out' or (with resid=True) "
                           f"'.resid', got {name!r}")
        buf = kinds[parts[3]]
        return buf[int(parts[1])][: self.n]


@torch.no_grad()
def record(model, windows: torch.Tensor, batch_size: int = 8, keep: torch.Tensor | None = None,
           **kwargs) -> "MLPCapture":
    """The capture loop, once: run `windows` (N, T) through `model` in batches of `batch_size`
    under an `MLPCapture` (its `kwargs`: layers, dtype, resid), recording only the positions
    `keep` (N, T) marks where given. Returns the capture, its hooks removed; read its rows by
    name (`cap["blocks.3.mlp.in"]`)."""
    n = int(keep.sum()) if keep is not None else windows.numel()
    with MLPCapture(model, max_tokens=n, **kwargs) as cap:
        for i in range(0, windows.shape[0], batch_size):
            if keep is not None:
                cap.keep = keep[i:i + batch_size]
            model(input_ids=windows[i:i + batch_size])
    return cap


@torch.no_grad()
def activations(model, windows: torch.Tensor, batch_size: int = 8) -> dict:
    """Every layer's MLP input x and residual stream h (what the pre-MLP norm reads), and
    the token embeddings e, over `windows`, by the capture's names: {"blocks.L.mlp.in":
    (N, T, d), "blocks.L.mlp.resid": (N, T, d), …, "embed": (N, T, d)}."""
    N, T = windows.shape
    lay = layout(model)
    cap = record(model, windows, batch_size, resid=True)
    dev = devices.device_of(model)  # the embedding is called directly, not through the model
    e = torch.cat([lay.embed(model, windows[i:i + batch_size].to(dev))[0].cpu()
                   for i in range(0, N, batch_size)])
    return {**{f"blocks.{l}.mlp.{k}": cap[f"blocks.{l}.mlp.{k}"].view(N, T, -1)
               for l in cap.layers for k in ("in", "resid")}, "embed": e}
