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


def test_the_pair_trains_on_one_thread_and_restores_the_callers(monkeypatch):
    seen = []
    monkeypatch.setattr(training, "pair_val", lambda *a: None)
    monkeypatch.setattr(training, "train_or_load",
                        lambda *a, **k: seen.append(torch.get_num_threads()) or ("m", {}))
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        S = {**training.PAIR["smoke"], "seed": 0}
        assert training.train_pair("neox-seq", S, None, None) == ("m", {})
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(saved)


def test_the_pair_trained_side_by_side_is_the_pair_trained_in_turn(tmp_path, monkeypatch):
    from nlbudget.assets import corpora

    text = corpora.load("pydocs")  # before the cache moves: the corpus ships with the repository
    monkeypatch.setenv("NLBUDGET_CACHE", str(tmp_path / "side"))
    S = {**training.PAIR["smoke"], "pair_steps": 4, "seed": 0, "device": "cpu"}
    jobs = [(k, s) for k in ("neox-seq", "neox-par") for s in (0, 1)]
    training.train_pairs(("neox-seq", "neox-par"), (0, 1), S, text, workers=2)  # 2 processes
    assert all((training.checkpoint(training.pair_config(k, {**S, "seed": s}), text)
                / "train_log.json").is_file() for k, s in jobs)
    tok = training.train_tokenizer(text, S["pair_vocab"])
    side = [training.train_pair(k, {**S, "seed": s}, text, tok) for k, s in jobs]  # from the cache
    assert all(log.get("config") for _, log in side)
    monkeypatch.setenv("NLBUDGET_CACHE", str(tmp_path / "turn"))
    for (m0, log0), (k, s) in zip(side, jobs):
        m1, log1 = training.train_pair(k, {**S, "seed": s}, text, tok)  # trained here
        assert log0["val_curve"] == log1["val_curve"]
        assert all(torch.equal(a, b) for a, b in zip(m0.parameters(), m1.parameters()))


def test_a_checkpoint_is_keyed_by_its_training_code_and_versions(monkeypatch):
    """A changed training loop, model definition or torch / transformers version misses the
    cache: the checkpoint trained before is never read as if it were the new one."""
    import transformers

    from nlbudget.assets import models

    cfg = training.TrainConfig("neox-seq", n_layer=1, d_model=16)
    base = cfg.key("corpus-sha")
    assert base == cfg.key("corpus-sha") and base != cfg.key("other-corpus")
    assert training.TrainConfig("neox-seq", n_layer=2, d_model=16).key("corpus-sha") != base
    for module, attr, value in ((torch, "__version__", "0.0.1"),
                                (transformers, "__version__", "0.0.1"),
                                (models, "TINY_KINDS", ("gpt2-seq",))):
        with monkeypatch.context() as m:
            m.setattr(module, attr, value)
            assert cfg.key("corpus-sha") != base, (module.__name__, attr)
    real = training.inspect.getsource
    for changed in (training.__name__, "nlbudget.evaluation", models.build_tiny,
                    models.tiny_config):
        with monkeypatch.context() as m:  # one module's or function's source edited
            m.setattr(training.inspect, "getsource",
                      lambda o, c=changed: real(o) + ("# edited" if o is c or getattr(
                          o, "__name__", None) == c else ""))
            assert cfg.key("corpus-sha") != base, changed
    assert cfg.key("corpus-sha") == base
