"""python3 -m tfm.convert (python/tfm/convert.py): fairseq and OpenNMT-py checkpoints into tfm model
directories.

The fixtures are tools/make_convert_fixtures.py's (tests/fixtures/convert/fairseq*, opennmt*): random
fairseq Transformers saved as fairseq's checkpoint_utils saves them, with dict.txt and a SentencePiece
model, and random OpenNMT-py v3 Transformers saved as its ModelSaver saves them, with their
SentencePiece models. The converted model must be the one that script staged from the same
checkpoint (which tests/test_convert.cc checks against each framework's computation: logits and
greedy outputs), translate, and bad inputs must be one-line errors naming the file.

Needs PyTorch to unpickle the checkpoints (python3-torch): without it these tests are reported as
skipped, with the reason.
"""

import json
import shutil

import numpy as np
import pytest

import tfm
from conftest import REPOSITORY

torch = pytest.importorskip(
    "torch", reason="PyTorch (python3-torch) is not installed: fairseq checkpoints are pickles")
from tfm import convert as tfm_convert  # noqa: E402

FIXTURES = REPOSITORY / "tests" / "fixtures" / "convert"


def run(cli, capsys, folder, out, *extra):
    code = tfm_convert.main(["--from", "fairseq", "-i", str(folder / "checkpoint.pt"), "--dict",
                             str(folder / "dict.txt"), "--spm",
                             str(folder / "sentencepiece.bpe.model"), "-o", str(out),
                             "--tfm", str(cli), *extra])
    return code, capsys.readouterr().err


def run_opennmt(cli, capsys, folder, out, *extra):
    spm = ["--spm", str(folder / "spm.model")] if (folder / "spm.model").exists() else \
        ["--spm", str(folder / "source.model"), "--target-spm", str(folder / "target.model")]
    code = tfm_convert.main(["--from", "opennmt", "-i", str(folder / "model_step_1000.pt"), *spm,
                             "-o", str(out), "--tfm", str(cli), *extra])
    return code, capsys.readouterr().err


# config.json leaves out the variant keys that hold their defaults.
DEFAULTS = {"activation": "relu", "tie_embeddings": "all", "output_bias": False,
            "scale_embeddings": True, "sinusoid": "interleaved", "position_offset": 0,
            "decoder_start_id": -1}


def expect_staged(model_dir, staged):
    """The model directory holds what the fixture's staging folder holds."""
    config, _ = tfm.load_model(model_dir)
    expected = json.loads((staged / "config.json").read_text())
    assert {k: config.get(k, DEFAULTS.get(k)) for k in expected} == expected
    for piece_file in ("source.spm", "target.spm"):
        assert (model_dir / piece_file).read_bytes() == (staged / piece_file).read_bytes()
    # vocab.json is written again by tfm (its own layout): the same table, read back.
    assert json.loads((model_dir / "vocab.json").read_text()) == \
        json.loads((staged / "vocab.json").read_text())
    return config


@pytest.mark.parametrize("name", ["fairseq", "fairseq_prenorm"])
def test_converts_to_the_staged_model(cli, capsys, tmp_path, name):
    code, err = run(cli, capsys, FIXTURES / name, tmp_path / "m")
    assert code == 0, err
    config = expect_staged(tmp_path / "m", FIXTURES / (name + "_staged"))
    # fairseq's decoder starts from </s> (eos), its positions from padding_idx + 1.
    assert config["decoder_start_id"] == config["eos_id"] == 2 and config["position_offset"] == 2
    translator = tfm.Translator(tmp_path / "m")
    result = translator.translate_batch(["the cat sat"], beam_size=1, max_length=8,
                                        return_scores=True)
    assert isinstance(result[0].hypotheses[0], str) and result[0].hypotheses[0]  # detokenised text
    assert np.isfinite(result[0].scores[0])


def test_token_lists_translate_as_the_text(cli, capsys, tmp_path):
    """fairseq's sources end with </s> (vocab.json's source_eos): a token list gets it too."""
    code, err = run(cli, capsys, FIXTURES / "fairseq", tmp_path / "m")
    assert code == 0, err
    translator = tfm.Translator(tmp_path / "m")
    texts = ["the cat sat on the mat", "a dog ran in the park"]
    tokens = [translator.tokenize(text) for text in texts]
    assert all("</s>" not in t for t in tokens)
    options = dict(beam_size=2, max_length=8, return_scores=True)
    from_text = translator.translate_batch(texts, **options)
    from_tokens = translator.translate_batch(tokens, **options)
    for a, b in zip(from_text, from_tokens):
        assert a.hypotheses == [translator.detokenize(h) for h in b.hypotheses]
        assert a.scores == b.scores


@pytest.mark.parametrize("name", ["opennmt", "opennmt_separate"])
def test_opennmt_converts_to_the_staged_model(cli, capsys, tmp_path, name):
    code, err = run_opennmt(cli, capsys, FIXTURES / name, tmp_path / "m")
    assert code == 0, err
    config = expect_staged(tmp_path / "m", FIXTURES / (name + "_staged"))
    assert config["norm"] == "pre" and config["pad_id"] == 1 and config["bos_id"] == 2
    assert not json.loads((tmp_path / "m" / "vocab.json").read_text())["source_eos"]
    translator = tfm.Translator(tmp_path / "m")
    result = translator.translate_batch(["the cat sat"], beam_size=1, max_length=8,
                                        return_scores=True)
    assert isinstance(result[0].hypotheses[0], str)
    assert np.isfinite(result[0].scores[0])


def onmt_error(cli, capsys, tmp_path, edit):
    """The one-line error of converting opennmt/ after `edit` changed its checkpoint."""
    folder = tmp_path / "in"
    shutil.copytree(FIXTURES / "opennmt", folder)
    checkpoint = torch.load(folder / "model_step_1000.pt")
    edit(checkpoint)
    torch.save(checkpoint, folder / "model_step_1000.pt")
    code, err = run_opennmt(cli, capsys, folder, tmp_path / "m")
    assert code == 1 and err.count("\n") == 1, err
    assert not (tmp_path / "m").exists()
    return err[len("tfm.convert: "):].rstrip("\n").replace(str(folder / "model_step_1000.pt"),
                                                          "CKPT")


def test_opennmt_missing_tensor_names_file_and_tensor(cli, capsys, tmp_path):
    name = "decoder.transformer_layers.1.context_attn.linear_keys.weight"
    assert onmt_error(cli, capsys, tmp_path, lambda c: c["model"].pop(name)) == \
        f"CKPT: tensor '{name}' is missing"


def test_opennmt_wrong_shape_names_file_and_tensor(cli, capsys, tmp_path):
    name = "encoder.transformer.0.feed_forward.w_2.weight"

    def edit(checkpoint):
        checkpoint["model"][name] = torch.zeros(8, 15)
    assert onmt_error(cli, capsys, tmp_path, edit) == \
        f"CKPT: tensor '{name}' has shape [8, 15], expected [8, 16]"


def test_opennmt_generator_tensor_is_named(cli, capsys, tmp_path):
    def edit(checkpoint):
        checkpoint["generator"]["extra"] = torch.zeros(1)
    assert onmt_error(cli, capsys, tmp_path, edit) == \
        "CKPT (generator): tensor 'extra' is not read by tfm (an unsupported variant)"


@pytest.mark.parametrize("option, value, message", [
    ("max_relative_positions", 20, "--max_relative_positions 20 (relative positions)"),
    ("max_relative_positions", -1, "--max_relative_positions -1 (rotary embeddings)"),
    ("max_relative_positions", -2, "--max_relative_positions -2 (ALiBi)"),
    ("num_kv", 1, "--num_kv 1 with --heads 2 (grouped-query attention)"),
    ("multiquery", True, "--multiquery (multi-query attention)"),
    ("pos_ffn_activation_fn", "silu", "--pos_ffn_activation_fn silu (relu, gelu; silu and "
                                      "gated-gelu are gated FFNs)"),
    ("layer_norm", "rms", "--layer_norm rms"),
    ("self_attn_type", "average", "--self_attn_type average (only scaled-dot)"),
    ("transforms", ["onmt_tokenize"], "--transforms onmt_tokenize (OpenNMT Tokenizer's pieces: "
                                      "tfm tokenises with SentencePiece's own)"),
    ("transforms", ["sentencepiece", "bpe"], "--transforms bpe (subword-nmt codes: tfm tokenises "
                                             "with SentencePiece)"),
])
def test_opennmt_unsupported_option_is_named(cli, capsys, tmp_path, option, value, message):
    assert onmt_error(cli, capsys, tmp_path, lambda c: setattr(c["opt"], option, value)) == \
        f"CKPT: option {message} is not supported"


def test_opennmt_wrong_position_table_is_an_error(cli, capsys, tmp_path):
    def edit(checkpoint):
        checkpoint["opt"].position_encoding_type = "SinusoidalConcat"
    assert onmt_error(cli, capsys, tmp_path, edit).startswith(
        "CKPT: tensor 'encoder.embeddings.make_embedding.pe.pe' is not the SinusoidalConcat "
        "table of --position_encoding_type")


def test_opennmt_half_precision_weights_convert(cli, capsys, tmp_path):
    """A model_dtype fp16 checkpoint: its float16 tensors are widened (exactly) to float32."""
    folder = tmp_path / "in"
    shutil.copytree(FIXTURES / "opennmt", folder)
    checkpoint = torch.load(folder / "model_step_1000.pt")
    for part in ("model", "generator"):
        checkpoint[part] = {k: v.half() for k, v in checkpoint[part].items()}
    torch.save(checkpoint, folder / "model_step_1000.pt")
    code, err = run_opennmt(cli, capsys, folder, tmp_path / "m")
    assert code == 0, err
    _, weights = tfm.load_model(tmp_path / "m")
    name = "encoder.layers.0.ffn.fc1.weight"
    assert np.array_equal(weights[name],
                          checkpoint["model"]["encoder.transformer.0.feed_forward.w_1.weight"]
                          .float().numpy())


def _set_option(options, name, value):
    if isinstance(options, dict):
        options[name] = value
    else:
        setattr(options, name, value)


def _expect_one_decoder_layer(model_dir, state, layer_name):
    """The converted model has 2 encoder layers and 1 decoder layer, whose weights are the
    checkpoint's (layer_name: the checkpoint's name of decoder layer 0's fc1 weight), and
    translates."""
    config, weights = tfm.load_model(model_dir)
    assert config["layers"] == 2 and config["decoder_layers"] == 1
    assert "encoder.layers.1.ffn.fc1.weight" in weights
    assert not any(name.startswith("decoder.layers.1.") for name in weights)
    assert np.array_equal(weights["decoder.layers.0.ffn.fc1.weight"], state[layer_name].numpy())
    translator = tfm.Translator(model_dir)
    assert (translator.layers, translator.decoder_layers) == (2, 1)
    result = translator.translate_batch(["the cat sat"], beam_size=2, max_length=8,
                                        return_scores=True)
    assert isinstance(result[0].hypotheses[0], str)
    assert np.isfinite(result[0].scores[0])


def _second_decoder_layer_removed(tmp_path, fixture, file, layer_prefix, set_depth):
    """A copy of a fixture's checkpoint without its second decoder layer (tensors named
    layer_prefix + "1."), its options told by set_depth(checkpoint): (folder, state)."""
    folder = tmp_path / "in"
    shutil.copytree(FIXTURES / fixture, folder)
    checkpoint = torch.load(folder / file)
    state = checkpoint["model"]
    for name in [n for n in state if n.startswith(layer_prefix + "1.")]:
        del state[name]
    set_depth(checkpoint)
    torch.save(checkpoint, folder / file)
    return folder, state


def test_fairseq_shallower_decoder_converts(cli, capsys, tmp_path):
    """--decoder-layers other than --encoder-layers (Kasai et al.'s deep encoder, shallow
    decoder)."""
    def set_depth(checkpoint):
        options = checkpoint["cfg"]["model"] if checkpoint.get("cfg") is not None else \
            checkpoint["args"]
        _set_option(options, "decoder_layers", 1)
    folder, state = _second_decoder_layer_removed(tmp_path, "fairseq", "checkpoint.pt",
                                                  "decoder.layers.", set_depth)
    code, err = run(cli, capsys, folder, tmp_path / "m")
    assert code == 0, err
    _expect_one_decoder_layer(tmp_path / "m", state, "decoder.layers.0.fc1.weight")


def test_opennmt_shallower_decoder_converts(cli, capsys, tmp_path):
    """--dec_layers other than --enc_layers."""
    folder, state = _second_decoder_layer_removed(
        tmp_path, "opennmt", "model_step_1000.pt", "decoder.transformer_layers.",
        lambda checkpoint: setattr(checkpoint["opt"], "dec_layers", 1))
    code, err = run_opennmt(cli, capsys, folder, tmp_path / "m")
    assert code == 0, err
    _expect_one_decoder_layer(tmp_path / "m", state,
                              "decoder.transformer_layers.0.feed_forward.w_1.weight")


def test_subword_nmt_is_refused(cli, capsys, tmp_path):
    code, err = run(cli, capsys, FIXTURES / "fairseq", tmp_path / "m", "--bpe", "subword_nmt")
    assert code == 1
    assert err.count("\n") == 1 and "subword-nmt codes are not supported" in err


def test_missing_tensor_names_file_and_tensor(cli, capsys, tmp_path):
    folder = tmp_path / "in"
    shutil.copytree(FIXTURES / "fairseq", folder)
    checkpoint = torch.load(folder / "checkpoint.pt")
    del checkpoint["model"]["decoder.layers.1.encoder_attn.k_proj.weight"]
    torch.save(checkpoint, folder / "checkpoint.pt")
    code, err = run(cli, capsys, folder, tmp_path / "m")
    assert code == 1
    assert err == (f"tfm.convert: {folder / 'checkpoint.pt'}: tensor "
                   f"'decoder.layers.1.encoder_attn.k_proj.weight' is missing\n")
    assert not (tmp_path / "m").exists()


def test_wrong_dictionary_size_names_both_files(cli, capsys, tmp_path):
    folder = tmp_path / "in"
    shutil.copytree(FIXTURES / "fairseq", folder)
    with open(folder / "dict.txt", "a", encoding="utf-8") as f:
        f.write("extra 1\n")
    code, err = run(cli, capsys, folder, tmp_path / "m")
    assert code == 1
    assert err.startswith(f"tfm.convert: {folder / 'dict.txt'}: 41 ids") and err.count("\n") == 1
