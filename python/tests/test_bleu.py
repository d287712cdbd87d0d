"""tfm.bleu against `tfm bleu`: the same score, statistics, signature and line (as `tfm bleu
--signature` prints it)."""

import json

import pytest

import tfm
from conftest import write_lines

HYPOTHESES = [
    "The cat sat on the mat.",
    "A man is riding a BIKE down the street!",
    "Zwei Hunde spielen im Schnee, 1.5 Meter tief.",
    "Hello world",
]
REFERENCES = [
    "The cat is sitting on the mat.",
    "A man rides a bike down the street.",
    "Zwei Hunde spielen im tiefen Schnee.",
    "hello, World!",
]
SECOND_REFERENCES = [
    "There is a cat on the mat.",
    "A man is riding a bike on the street!",
    "Two dogs play in the snow.",
    "Hello world",
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("bleu")
    paths = {"hyp": directory / "hyp.txt", "ref": directory / "ref.txt",
             "ref2": directory / "ref2.txt"}
    write_lines(paths["hyp"], HYPOTHESES)
    write_lines(paths["ref"], REFERENCES)
    write_lines(paths["ref2"], SECOND_REFERENCES)
    return paths


@pytest.mark.parametrize("tokenize,lowercase,two_references", [
    ("13a", False, False),
    ("13a", True, False),
    ("intl", False, True),
    ("none", True, True),
])
def test_bleu_equals_tfm_bleu(run_cli, files, tokenize, lowercase, two_references):
    references = [REFERENCES, SECOND_REFERENCES] if two_references else REFERENCES
    result = tfm.bleu(HYPOTHESES, references, tokenize=tokenize, lowercase=lowercase)
    args = ["bleu", "-i", files["hyp"], "-r", files["ref"], "--tokenize", tokenize]
    if two_references:
        args += ["-r", files["ref2"]]
    if lowercase:
        args.append("--lowercase")
    expected = json.loads(run_cli(*args, "--json"))
    assert result.score == expected["score_exact"]
    assert result.precisions == expected["precisions"]
    assert result.brevity_penalty == expected["bp"]
    assert result.hypothesis_length == expected["hyp_len"]
    assert result.reference_length == expected["ref_len"]
    assert result.signature == expected["signature"]
    assert result.line == run_cli(*args, "--signature").strip()
    assert str(result) == result.line
    assert 0 < result.score < 100


def test_the_papers_tokenized_bleu_equals_tfm_bleu(run_cli, files):
    result = tfm.bleu(HYPOTHESES, REFERENCES, tokenize="moses", smooth="none", language="de",
                      split_compounds=True)
    expected = run_cli("bleu", "-i", files["hyp"], "-r", files["ref"], "--tokenize", "moses",
                       "--lang", "de", "--split-compounds", "--signature")
    assert result.line == expected.strip()


def test_bleu_errors():
    with pytest.raises(tfm.Error, match="2 .*1|1 .*2|lines|equal|number"):
        tfm.bleu(["a b", "c d"], ["a b"])
    with pytest.raises(tfm.Error, match="14b"):
        tfm.bleu(["a"], ["a"], tokenize="14b")
    with pytest.raises(TypeError):
        tfm.bleu(["a"], "a")
