"""The PyTorch reference model (tools/reference_model.py) against tfm through the Python API: the
reference loads tfm's weights through tfm.load_model, and tfm loads the reference's through
tfm.save_model, and both give the same log-probabilities of the same targets.

Needs PyTorch (Debian's python3-torch, which scripts/setup.sh --with-torch installs): without it
these tests are reported as skipped, with the reason, and CTest lists them as not run.
"""

import sys

import numpy as np
import pytest

import tfm
from conftest import REPOSITORY, SOURCES

torch = pytest.importorskip(
    "torch", reason="PyTorch (python3-torch) is not installed: the PyTorch reference comparison "
                    "needs it (scripts/setup.sh --with-torch)")
sys.path.insert(0, str(REPOSITORY / "tools"))
from reference_model import Transformer  # noqa: E402

TARGETS = [
    "ein mann läuft im park.",
    "der hund.",
    "zwei mädchen spielen mit einem roten ball im park.",
    "ein roter hund läuft.",
    "die mädchen spielen im park.",
]


def reference_log_probs(config, weights, batch):
    """log_softmax of the reference's logits (float64) at each target token, per sentence.

    batch: (source ids, target ids with </s>) pairs, run as one right-padded batch.
    """
    model = Transformer(config, init=False).double().eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            parameter.copy_(torch.tensor(np.asarray(weights[name]), dtype=torch.float64))
    pad, bos = config["pad_id"], config["bos_id"]
    width_s = max(len(s) for s, _ in batch)
    width_t = max(len(t) for _, t in batch)
    src = torch.tensor([s + [pad] * (width_s - len(s)) for s, _ in batch])
    tgt_in = torch.tensor([[bos] + t[:-1] + [pad] * (width_t - len(t)) for _, t in batch])
    with torch.no_grad():
        log_probs = torch.log_softmax(model(src, tgt_in), dim=-1)
    return [log_probs[i, torch.arange(len(t)), torch.tensor(t)].numpy()
            for i, (_, t) in enumerate(batch)]


def compare(translator, config, weights):
    scores = translator.score_batch(SOURCES, TARGETS)
    batch = [(translator.token_ids(translator.tokenize(source)), translator.token_ids(s.tokens))
             for source, s in zip(SOURCES, scores)]
    expected = reference_log_probs(config, weights, batch)
    for score, reference in zip(scores, expected):
        assert score.tokens[-1] == "</s>"
        assert score.log_probs.shape == reference.shape
        # tfm computes in float32, the reference in float64; they differ by about 1e-6 here.
        np.testing.assert_allclose(score.log_probs, reference, rtol=0, atol=1e-5)


def test_the_reference_reads_tfms_weights_and_agrees(model_dir):
    config, weights = tfm.load_model(model_dir)
    compare(tfm.Translator(model_dir, threads=1), config, weights)


def test_tfm_reads_the_references_weights_and_agrees(model_dir, tmp_path):
    # A model made in PyTorch with the options the trained model lacks: 2 layers, 4 heads,
    # pre-norm, attention biases, learned positions; every parameter away from its initial value.
    config = {"layers": 2, "d_model": 32, "d_ff": 48, "heads": 4, "d_k": 8, "d_v": 8,
              "dropout": 0.1, "positional": "learned", "max_positions": 64, "vocab_size": 60,
              "norm": "pre", "attention_bias": True}
    torch.manual_seed(11)
    model = Transformer(config)
    weights = {}
    for name, parameter in model.named_parameters():
        weights[name] = (parameter.detach() + 0.05 * torch.randn_like(parameter)).numpy()
    out = tmp_path / "from-torch"
    tfm.save_model(out, config, weights, vocab=model_dir / "vocab.model")
    saved_config, saved = tfm.load_model(out)
    assert list(saved) == [name for name, _ in model.named_parameters()]
    compare(tfm.Translator(out, threads=1), saved_config, weights)
