"""Type stubs of tfm._tfm, the compiled part of the tfm package (python/translator.cc,
python/tfm_python.cc). docs/PYTHON.md describes the API with examples."""

import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

_Path = Union[str, os.PathLike]

__version__: str

class Error(RuntimeError):
    """Every failure the library reports (a missing file, a bad option, a malformed model), with
    its one-line message."""

class TranslationResult:
    """The translations of one source, best first (empty for an empty source)."""
    @property
    def hypotheses(self) -> Union[List[str], List[List[str]]]:
        """Text for a text source; a token list for a token-list source."""
    @property
    def scores(self) -> List[float]:
        """With return_scores: log p / ((5 + length) / 6) ** length_penalty of each hypothesis."""
    @property
    def attention(self) -> List[npt.NDArray[np.float32]]:
        """With return_attention: per hypothesis, float32 [target tokens (+1 for the end of
        sentence when produced), source tokens]; each row sums to 1."""
    @property
    def tokens(self) -> List[List[str]]:
        """Each hypothesis's subword tokens (without the end of sentence)."""

class ScoringResult:
    @property
    def tokens(self) -> List[str]:
        """The target's subword tokens, then "</s>"."""
    @property
    def log_probs(self) -> npt.NDArray[np.float32]:
        """The log-probability of each token, teacher-forced."""
    @property
    def log_prob(self) -> float:
        """Their sum."""

class Translator:
    """A model directory (config.json, model.safetensors, vocab.model) loaded once.

    Any number of Python threads may call one Translator at once: each call releases the GIL and
    decodes in its own thread with `threads` OpenMP threads.
    """
    def __init__(self, model_dir: _Path, device: str = "cpu", compute_type: str = "f32",
                 threads: int = 0) -> None:
        """device: "cpu" or "cuda"; compute_type: the matrix products' operands, "f32", "bf16"
        (f32 accumulation) or "auto" (bf16 where the CPU multiplies it natively); threads: OpenMP
        threads of each call (0: all cores)."""
    def translate_batch(self, source: Union[Sequence[str], Sequence[Sequence[str]]], *,
                        beam_size: int = 4, length_penalty: float = 0.6, n_best: int = 1,
                        max_length_offset: int = 50, max_length: int = 0, min_length: int = 0,
                        batch_size: int = 32, batch_tokens: int = 0,
                        no_repeat_ngram_size: int = 0, mbr: bool = False,
                        mbr_temperature: float = 1.0, sampling: int = 0,
                        sampling_epsilon: float = 0.02, sampling_temperature: float = 1.0,
                        seed: int = 0,
                        return_scores: bool = False, return_attention: bool = False,
                        attention_layer: int = -1,
                        attention_head: int = -1) -> List[TranslationResult]:
        """Translates sentences (str) or token lists, one result per source, in order.

        beam_size 1 is greedy search; a hypothesis has at most max_length tokens (> 0) or the
        source's tokens + max_length_offset; batches hold at most batch_size sentences and, with
        batch_tokens > 0, at most that many padded source tokens; no_repeat_ngram_size > 0: no
        output repeats an n-gram of that many subword tokens; mbr: the minimum Bayes risk choice of
        the n_best list (n_best >= 2) first, the hypothesis with the highest expected sentence
        BLEU against the list weighted by softmax(score / mbr_temperature), the others in the
        search's order (`tfm translate --mbr`). sampling > 0: that many translations drawn by
        epsilon sampling instead of a search, best score first (tokens of probability below
        sampling_epsilon, after softmax(log p / sampling_temperature), never drawn; the same seed,
        the same samples; beam_size and n_best unused; with mbr each sample weighs the same:
        `tfm translate --sampling`). attention_layer: the decoder
        layer whose encoder-decoder attention return_attention returns (negative: from the last);
        attention_head: one head, or -1 for the mean of the heads.
        """
    def translate_file(self, input_path: _Path, output_path: _Path, *, beam_size: int = 4,
                       length_penalty: float = 0.6, n_best: int = 1, max_length_offset: int = 50,
                       max_length: int = 0, min_length: int = 0, batch_size: int = 32,
                       batch_tokens: int = 0, no_repeat_ngram_size: int = 0, mbr: bool = False,
                       mbr_temperature: float = 1.0, sampling: int = 0,
                       sampling_epsilon: float = 0.02, sampling_temperature: float = 1.0,
                       seed: int = 0, n_best_output: bool = False) -> int:
        """Translates a text file (plain or gzip) line by line into output_path, as `tfm translate
        -i INPUT -o OUTPUT` does (with n_best_output: "line ||| translation ||| score" for each
        of the n best, or of the samples). The output is written atomically. Returns the number
        of lines."""
    def score_batch(self, source: Sequence[str], target: Sequence[str], *,
                    batch_size: int = 32) -> List[ScoringResult]:
        """The log-probability of each target token given its source and the tokens before it."""
    def tokenize(self, text: str) -> List[str]:
        """A sentence's subword tokens in the model's vocabulary."""
    def detokenize(self, tokens: Sequence[str]) -> str:
        """The sentence of a token list."""
    def token_ids(self, tokens: Sequence[str]) -> List[int]:
        """The vocabulary ids of tokens (1, <unk>'s, for a token the vocabulary lacks)."""
    @property
    def model_dir(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def compute_type(self) -> str:
        """"f32" or "bf16" ("auto" resolved)."""
    @property
    def threads(self) -> int: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def layers(self) -> int:
        """The encoder's layers."""
    @property
    def decoder_layers(self) -> int:
        """The decoder's layers (layers, unless the model was made with model.decoder_layers)."""
    @property
    def d_model(self) -> int: ...
    @property
    def parameter_count(self) -> int: ...

class BleuResult:
    """Corpus BLEU as `tfm bleu` computes it (docs/BLEU.md); str() is its output line."""
    @property
    def score(self) -> float: ...
    @property
    def precisions(self) -> List[float]:
        """n-gram precisions in percent, orders 1 to 4."""
    @property
    def brevity_penalty(self) -> float: ...
    @property
    def hypothesis_length(self) -> int: ...
    @property
    def reference_length(self) -> int: ...
    @property
    def signature(self) -> str: ...
    @property
    def line(self) -> str:
        """`tfm bleu --signature`'s output line."""

def bleu(hypotheses: Sequence[str], references: Union[Sequence[str], Sequence[Sequence[str]]],
         *, tokenize: str = "13a", lowercase: bool = False, smooth: str = "exp",
         language: str = "en", split_compounds: bool = False) -> BleuResult:
    """Corpus BLEU against one reference per hypothesis (a list of str) or several sets (a list
    of such lists). tokenize: "13a", "intl", "none", or "moses" (the paper's tokenized BLEU, with
    smooth="none", language "en", "de" or "fr"); smooth: "exp", "floor", "add-k" or "none"."""

class TrainingProgress:
    """A report of the training loop: every training.log_every updates ("train") and after each
    validation ("valid")."""
    @property
    def kind(self) -> str: ...
    @property
    def step(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def loss(self) -> float: ...
    @property
    def perplexity(self) -> float: ...
    @property
    def learning_rate(self) -> float: ...
    @property
    def tokens_per_second(self) -> float: ...
    @property
    def bleu(self) -> float:
        """Validation BLEU (a parsing model's F1) with validation.bleu; else -1."""
    @property
    def elapsed_seconds(self) -> float: ...

class TrainingResult:
    @property
    def steps(self) -> int: ...
    @property
    def elapsed_seconds(self) -> float: ...
    @property
    def last_valid_loss(self) -> float: ...
    @property
    def last_valid_bleu(self) -> float:
        """-1 when not computed."""
    @property
    def interrupted(self) -> bool:
        """Stopped by Ctrl-C or SIGTERM, after saving a checkpoint; resume=True continues."""
    @property
    def last_checkpoint(self) -> str:
        """A model directory, which tfm.Translator reads."""

def train(recipe: Optional[_Path] = None,
          overrides: Union[None, Dict[str, object], Sequence[str]] = None, *,
          run_dir: Optional[_Path] = None, max_steps: int = -1, max_minutes: float = -1.0,
          threads: int = -1, resume: bool = False, device: Optional[str] = None,
          progress: Optional[Callable[[TrainingProgress], None]] = None) -> TrainingResult:
    """Trains from a YAML recipe into a run directory as `tfm train` does (docs/TRAINING.md).

    overrides: {"section.key": value} or ["section.key=value", ...], as `tfm train --set`;
    progress: called with each report (an exception it raises ends the run and propagates).
    """

def _read_model_weights(model_dir: _Path) -> Tuple[str, List[Tuple[str, npt.NDArray[np.float32]]]]: ...
def _write_model_weights(model_dir: _Path, config_json: str,
                         weights: List[Tuple[str, object]], vocabulary: bytes) -> None: ...
