"""tfm.Translator against `tfm translate`: the same model, sentences and options give the same
translations, scores, attention and files."""

import json

import numpy as np
import pytest

import tfm
from conftest import SOURCES, write_lines

OPTIONS = {"beam_size": 3, "max_length_offset": 12}
CLI_OPTIONS = ["-b", "3", "--max-length-offset", "12", "--threads", "1"]


@pytest.fixture(scope="module")
def source_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("translate") / "source.en"
    write_lines(path, SOURCES)
    return path


def cli_nbest(run_cli, model_dir, source_file, *options):
    """`tfm translate --n-best-output`: per line, its (translation, score) pairs."""
    out = run_cli("translate", "-m", model_dir, "-i", source_file, "--n-best-output", *options)
    nbest = [[] for _ in SOURCES]
    for line in out.splitlines():
        number, text, score = line.split(" ||| ")
        nbest[int(number)].append((text, score))
    return nbest


@pytest.mark.parametrize("beam_size,n_best", [(1, 1), (3, 1), (4, 3)])
def test_translations_and_scores_equal_the_clis(translator, run_cli, model_dir, source_file,
                                                beam_size, n_best):
    options = ["-b", str(beam_size), "--n-best", str(n_best), "--max-length-offset", "12",
               "--threads", "1"]
    expected = cli_nbest(run_cli, model_dir, source_file, *options)
    results = translator.translate_batch(SOURCES, beam_size=beam_size, n_best=n_best,
                                         max_length_offset=12, return_scores=True)
    assert len(results) == len(SOURCES)
    for result, cli in zip(results, expected):
        assert len(result.hypotheses) == n_best
        assert result.hypotheses == [text for text, _ in cli]
        # The CLI prints a score as C++ streams print a double: 6 significant digits.
        assert ["%g" % score for score in result.scores] == [score for _, score in cli]
        assert result.scores == sorted(result.scores, reverse=True)
        assert all(score <= 0 for score in result.scores)
    # The best translations alone (no --n-best-output) are the first hypotheses.
    best = run_cli("translate", "-m", model_dir, "-i", source_file, *options).splitlines()
    assert best == [result.hypotheses[0] for result in results]


def test_scores_only_when_asked_and_hypotheses_agree_with_tokens(translator):
    results = translator.translate_batch(SOURCES, **OPTIONS)
    assert all(result.scores == [] and result.attention == [] for result in results)
    for result in results:
        for text, tokens in zip(result.hypotheses, result.tokens):
            assert translator.detokenize(tokens) == text


def test_token_lists_in_give_token_lists_out(translator):
    tokens = [translator.tokenize(source) for source in SOURCES]
    assert all(isinstance(token, str) for sentence in tokens for token in sentence)
    from_tokens = translator.translate_batch(tokens, n_best=2, **OPTIONS)
    from_text = translator.translate_batch(SOURCES, n_best=2, **OPTIONS)
    for a, b in zip(from_tokens, from_text):
        assert a.hypotheses == b.tokens
        assert [translator.detokenize(h) for h in a.hypotheses] == b.hypotheses


def test_empty_inputs(translator):
    assert translator.translate_batch([]) == []
    results = translator.translate_batch(["", SOURCES[0], ""], **OPTIONS)
    assert results[0].hypotheses == [] and results[2].hypotheses == []
    assert results[1].hypotheses == translator.translate_batch([SOURCES[0]], **OPTIONS)[0].hypotheses
    assert translator.translate_batch([[]], **OPTIONS)[0].hypotheses == []


@pytest.mark.parametrize("layer,head", [(0, None), (0, 1)])
def test_attention_equals_the_clis_attention_output(translator, run_cli, model_dir, source_file,
                                                     tmp_path, layer, head):
    path = tmp_path / "attention.jsonl"
    options = ["--attention-output", path, "--attention-layer", str(layer)]
    if head is not None:
        options += ["--attention-head", str(head)]
    run_cli("translate", "-m", model_dir, "-i", source_file, *CLI_OPTIONS, *options)
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    results = translator.translate_batch(SOURCES, return_attention=True, attention_layer=layer,
                                         attention_head=-1 if head is None else head, **OPTIONS)
    assert len(records) == len(SOURCES)
    for source, result, record in zip(SOURCES, results, records):
        assert len(result.attention) == len(result.hypotheses)
        attention = result.attention[0]
        assert attention.dtype == np.float32
        # A row per target token, the end of sentence included when produced; a column per
        # source token.
        assert attention.shape[0] in (len(result.tokens[0]), len(result.tokens[0]) + 1)
        assert attention.shape == (len(record["target_pieces"]), len(record["source_pieces"]))
        assert record["source_pieces"] == translator.tokenize(source)
        np.testing.assert_allclose(attention.sum(axis=1), 1.0, atol=1e-5)
        np.testing.assert_array_equal(attention, np.array(record["weights"], dtype=np.float32))


def test_attention_layer_counts_from_the_end(translator):
    last = translator.translate_batch(SOURCES, return_attention=True, **OPTIONS)
    first = translator.translate_batch(SOURCES, return_attention=True, attention_layer=0,
                                       **OPTIONS)
    for a, b in zip(last, first):  # a 1-layer model: -1 is layer 0
        np.testing.assert_array_equal(a.attention[0], b.attention[0])


def test_translate_file_equals_the_clis_output_file(translator, run_cli, model_dir, tmp_path):
    source = tmp_path / "source.en"
    write_lines(source, [SOURCES[0], "", SOURCES[1], SOURCES[2]])
    for n_best_output in (False, True):
        flag = ["--n-best-output", "--n-best", "2"] if n_best_output else []
        expected, got = tmp_path / "cli.de", tmp_path / "python.de"
        run_cli("translate", "-m", model_dir, "-i", source, "-o", expected, *CLI_OPTIONS, *flag)
        lines = translator.translate_file(source, got, n_best=2 if n_best_output else 1,
                                          n_best_output=n_best_output, **OPTIONS)
        assert lines == 4
        assert got.read_bytes() == expected.read_bytes()


def test_batch_tokens_and_bf16_as_the_cli(run_cli, model_dir, source_file):
    translator = tfm.Translator(model_dir, compute_type="bf16", threads=1)
    assert translator.compute_type == "bf16"
    expected = run_cli("translate", "-m", model_dir, "-i", source_file, *CLI_OPTIONS,
                       "--precision", "bf16", "--batch-tokens", "20").splitlines()
    results = translator.translate_batch(SOURCES, batch_tokens=20, **OPTIONS)
    assert [result.hypotheses[0] for result in results] == expected


def test_no_repeat_ngram_size_as_the_cli(translator, run_cli, model_dir, source_file):
    expected = run_cli("translate", "-m", model_dir, "-i", source_file, *CLI_OPTIONS,
                       "--no-repeat-ngram-size", "1").splitlines()
    results = translator.translate_batch(SOURCES, no_repeat_ngram_size=1, **OPTIONS)
    assert [result.hypotheses[0] for result in results] == expected
    for result in results:  # n = 1: no subword token twice
        assert len(set(result.tokens[0])) == len(result.tokens[0])


def test_mbr_as_the_cli(translator, run_cli, model_dir, source_file):
    expected = run_cli("translate", "-m", model_dir, "-i", source_file, *CLI_OPTIONS,
                       "--n-best", "3", "--mbr").splitlines()
    results = translator.translate_batch(SOURCES, n_best=3, mbr=True, return_scores=True,
                                         **OPTIONS)
    assert [result.hypotheses[0] for result in results] == expected
    # The search's list, its minimum Bayes risk choice first.
    plain = translator.translate_batch(SOURCES, n_best=3, return_scores=True, **OPTIONS)
    for chosen, searched in zip(results, plain):
        assert sorted(zip(chosen.hypotheses, chosen.scores)) == \
            sorted(zip(searched.hypotheses, searched.scores))
    # The tiny model's best is often the empty translation, which agrees with nothing.
    assert any(chosen.hypotheses[0] != searched.hypotheses[0]
               for chosen, searched in zip(results, plain))


def test_sampling_as_the_cli(translator, run_cli, model_dir, source_file):
    cli_options = ["--max-length-offset", "12", "--threads", "1"]  # --sampling excludes -b
    lines = run_cli("translate", "-m", model_dir, "-i", source_file, *cli_options,
                    "--sampling", "4", "--seed", "3", "--n-best-output").splitlines()
    expected = {}
    for line in lines:  # "index ||| translation ||| score"
        index, text, _ = line.split(" ||| ")
        expected.setdefault(int(index), []).append(text)
    results = translator.translate_batch(SOURCES, sampling=4, seed=3, return_scores=True,
                                         **OPTIONS)
    assert {i: r.hypotheses for i, r in enumerate(results) if r.hypotheses} == expected
    for result in results:
        assert len(result.hypotheses) in (0, 4)
        assert result.scores == sorted(result.scores, reverse=True)
    # Another seed draws other samples; MBR chooses among them as the command line does.
    other = translator.translate_batch(SOURCES, sampling=4, seed=4, **OPTIONS)
    assert [r.hypotheses for r in other] != [r.hypotheses for r in results]
    chosen = run_cli("translate", "-m", model_dir, "-i", source_file, *cli_options,
                     "--sampling", "4", "--seed", "3", "--mbr").splitlines()
    mbr = translator.translate_batch(SOURCES, sampling=4, seed=3, mbr=True, **OPTIONS)
    assert [r.hypotheses[0] if r.hypotheses else "" for r in mbr] == chosen


def test_int8_as_the_cli(run_cli, model_dir, source_file):
    translator = tfm.Translator(model_dir, compute_type="int8", threads=1)
    assert translator.compute_type == "int8"
    expected = run_cli("translate", "-m", model_dir, "-i", source_file, *CLI_OPTIONS,
                       "--precision", "int8").splitlines()
    results = translator.translate_batch(SOURCES, **OPTIONS)
    assert [result.hypotheses[0] for result in results] == expected


def test_score_batch_scores_each_target_token(translator):
    targets = ["ein mann läuft im park.", "der hund."]
    scores = translator.score_batch(SOURCES[:2], targets)
    for target, score in zip(targets, scores):
        assert score.tokens == translator.tokenize(target) + ["</s>"]
        assert score.log_probs.dtype == np.float32
        assert score.log_probs.shape == (len(score.tokens),)
        assert np.all(score.log_probs <= 0)
        assert score.log_prob == pytest.approx(float(score.log_probs.sum()), abs=1e-4)


def test_the_translators_model(translator, model_dir):
    assert translator.model_dir == str(model_dir)
    assert (translator.device, translator.compute_type, translator.threads) == ("cpu", "f32", 1)
    assert (translator.layers, translator.d_model, translator.vocab_size) == (1, 16, 60)
    assert translator.decoder_layers == 1
    assert translator.parameter_count > 60 * 16
    assert translator.token_ids(["<s>", "</s>", "no-such-piece"]) == [2, 3, 1]
    assert "tfm.Translator" in repr(translator)
