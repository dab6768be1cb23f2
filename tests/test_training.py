"""Training from scratch (`nlbudget.training`): the learning curve a positive control reads is
recorded without changing what is trained."""

import torch

from nlbudget import training
from nlbudget.verdicts import controls

VOCAB = 64


class _Tok:  # what `train` asks of a tokenizer: its vocabulary size
    def __len__(self):
        return VOCAB


def _train(val=None, steps=40):
    cfg = training.TrainConfig("neox-seq", n_layer=1, d_model=16, n_head=2, context=8,
                               vocab_size=VOCAB, steps=steps, batch_size=4, warmup=2, seed=0)
    # a learnable stream: each token is the last plus one (mod VOCAB)
    stream = torch.arange(3000) % VOCAB
    return training.train(cfg, None, _Tok(), stream=stream, val=val)


def test_the_validation_curve_is_recorded_without_changing_the_training():
    val = (torch.arange(6 * 8) % VOCAB).view(6, 8)
    m0, log0 = _train()
    m1, log1 = _train(val)
    assert log0["val_curve"] is None
    assert log0["train_loss"] == log1["train_loss"]  # the same batches, the same steps
    assert all(torch.equal(a, b) for a, b in zip(m0.parameters(), m1.parameters()))
    curve = log1["val_curve"]
    assert len(curve) == training.CURVE_POINTS and curve[-1] < curve[0]
    # the curve is what the plateau control reads
    assert controls.plateau(curve, share=1.0).passed is True
    assert controls.plateau(curve[:8]).passed is False  # too short to show a plateau
