"""tfm.load_model and tfm.save_model: a model directory as a config dict and numpy arrays, and
back; a model written from numpy weights translates as `tfm translate` does with it."""

import json

import numpy as np
import pytest

import tfm
from conftest import SOURCES, write_lines

CLI_OPTIONS = ["-b", "3", "--max-length-offset", "12", "--threads", "1"]


def test_load_model_gives_the_config_and_read_only_arrays_over_the_file(model_dir):
    config, weights = tfm.load_model(model_dir)
    assert config == {**json.loads((model_dir / "config.json").read_text()), **config}
    assert (config["layers"], config["d_model"], config["vocab_size"]) == (1, 16, 60)
    assert next(iter(weights)) == "embedding.weight"
    embedding = weights["embedding.weight"]
    assert embedding.dtype == np.float32 and embedding.shape == (60, 16)
    assert embedding.flags.c_contiguous
    # No copy: the array is a view of the memory the file was read into, and read-only.
    assert not embedding.flags.owndata and embedding.base is not None
    assert not embedding.flags.writeable
    with pytest.raises(ValueError):
        embedding[0, 0] = 1.0
    assert sum(w.size for w in weights.values()) == tfm.Translator(model_dir).parameter_count


def test_a_round_trip_is_bit_exact(model_dir, tmp_path):
    config, weights = tfm.load_model(model_dir)
    copy = tmp_path / "copy"
    tfm.save_model(copy, config, weights, vocab=model_dir / "vocab.model")
    for name in ("config.json", "model.safetensors", "vocab.model"):
        assert (copy / name).read_bytes() == (model_dir / name).read_bytes(), name
    config2, weights2 = tfm.load_model(copy)
    assert config2 == config and list(weights2) == list(weights)
    for name in weights:
        np.testing.assert_array_equal(weights2[name], weights[name])
    # The vocabulary as bytes does the same.
    tfm.save_model(tmp_path / "bytes", config, weights,
                   vocab=(model_dir / "vocab.model").read_bytes())
    assert (tmp_path / "bytes" / "vocab.model").read_bytes() == (copy / "vocab.model").read_bytes()


def test_a_model_written_from_numpy_translates_as_the_cli_does(model_dir, run_cli, tmp_path):
    config, weights = tfm.load_model(model_dir)
    rng = np.random.default_rng(5)
    changed = {name: (w + rng.normal(0, 0.05, w.shape)).astype(np.float32)
               for name, w in weights.items()}
    changed["encoder.layers.0.ffn.fc1.weight"] = (
        changed["encoder.layers.0.ffn.fc1.weight"].astype(np.float64))  # converted to float32
    out = tmp_path / "perturbed"
    tfm.save_model(out, config, changed, vocab=model_dir / "vocab.model")
    _, saved = tfm.load_model(out)
    for name in changed:
        np.testing.assert_array_equal(saved[name], changed[name].astype(np.float32))
    source = tmp_path / "source.en"
    write_lines(source, SOURCES)
    expected = run_cli("translate", "-m", out, "-i", source, *CLI_OPTIONS).splitlines()
    results = tfm.Translator(out, threads=1).translate_batch(SOURCES, beam_size=3,
                                                              max_length_offset=12)
    assert [r.hypotheses[0] for r in results] == expected
    original = tfm.Translator(model_dir, threads=1).translate_batch(SOURCES, beam_size=3,
                                                                    max_length_offset=12)
    assert [r.hypotheses[0] for r in original] != expected  # the weights did change


def test_save_model_refuses_an_inconsistent_model_and_writes_nothing(model_dir, tmp_path):
    config, weights = tfm.load_model(model_dir)
    vocab = model_dir / "vocab.model"
    out = tmp_path / "refused"

    def refused(match, config=config, weights=weights, vocab=vocab, error=tfm.Error):
        with pytest.raises(error, match=match):
            tfm.save_model(out, config, weights, vocab=vocab)
        assert not out.exists()

    refused("is missing", weights={k: v for k, v in weights.items() if k != "embedding.weight"})
    refused(r"has shape \[16, 60\], expected \[60, 16\]",
            weights={**weights, "embedding.weight": weights["embedding.weight"].T.copy()})
    refused("unexpected tensor 'extra'", weights={**weights, "extra": np.zeros(3)})
    nan = weights["embedding.weight"].copy()
    nan[3, 4] = np.nan
    refused("non-finite", weights={**weights, "embedding.weight": nan})
    refused("colour", config={**config, "colour": "red"})
    refused("vocab_size 61 but .*vocab.model has 60 pieces", config={**config, "vocab_size": 61},
            weights={**weights, "embedding.weight": np.zeros((61, 16))})
    refused("not a SentencePiece model", vocab=b"not a model")
    refused("not an array of numbers", weights={**weights, "embedding.weight": "text"},
            error=TypeError)
    with pytest.raises(FileNotFoundError):
        tfm.save_model(out, config, weights, vocab=tmp_path / "no-such.model")


def test_load_model_errors_name_the_problem(model_dir, tmp_path):
    with pytest.raises(tfm.Error, match="does not exist"):
        tfm.load_model(tmp_path / "missing")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_bytes((model_dir / "config.json").read_bytes())
    data = (model_dir / "model.safetensors").read_bytes()
    (broken / "model.safetensors").write_bytes(data[: len(data) // 2])  # truncated
    with pytest.raises(tfm.Error, match="model.safetensors"):
        tfm.load_model(broken)
    damaged = bytearray(data)
    damaged[-5] ^= 0xFF  # a flipped bit in the last tensor: its checksum fails
    (broken / "model.safetensors").write_bytes(bytes(damaged))
    with pytest.raises(tfm.Error, match="checksum"):
        tfm.load_model(broken)
