"""python3 -m tfm.convert (python/tfm/convert.py): fairseq checkpoints into tfm model directories.

The fixtures are tools/make_convert_fixtures.py's (tests/fixtures/convert/fairseq*): random fairseq
Transformers saved as fairseq's checkpoint_utils saves them, with dict.txt and a SentencePiece model.
The converted model must be the one that script staged from the same checkpoint (which
tests/test_convert.cc checks against fairseq's computation: logits and greedy outputs), translate,
and bad inputs must be one-line errors naming the file.

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


@pytest.mark.parametrize("name", ["fairseq", "fairseq_prenorm"])
def test_converts_to_the_staged_model(cli, capsys, tmp_path, name):
    code, err = run(cli, capsys, FIXTURES / name, tmp_path / "m")
    assert code == 0, err
    config, weights = tfm.load_model(tmp_path / "m")
    staged = json.loads((FIXTURES / (name + "_staged") / "config.json").read_text())
    # config.json leaves out the variant keys that hold their defaults.
    defaults = {"activation": "relu", "tie_embeddings": "all", "output_bias": False,
                "scale_embeddings": True, "sinusoid": "interleaved", "position_offset": 0,
                "decoder_start_id": -1}
    assert {k: config.get(k, defaults.get(k)) for k in staged} == staged
    assert config["decoder_start_id"] == 40 and config["position_offset"] == 2  # "<start>"
    for piece_file in ("source.spm", "target.spm"):
        assert (tmp_path / "m" / piece_file).read_bytes() == \
            (FIXTURES / (name + "_staged") / piece_file).read_bytes()
    # vocab.json is written again by tfm (its own layout): the same table, read back.
    assert json.loads((tmp_path / "m" / "vocab.json").read_text()) == \
        json.loads((FIXTURES / (name + "_staged") / "vocab.json").read_text())
    translator = tfm.Translator(tmp_path / "m")
    result = translator.translate_batch(["the cat sat"], beam_size=1, max_length=8,
                                        return_scores=True)
    assert isinstance(result[0].hypotheses[0], str) and result[0].hypotheses[0]  # detokenised text
    assert np.isfinite(result[0].scores[0])


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
