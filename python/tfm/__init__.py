"""tfm: the Transformer of "Attention Is All You Need", from Python.

Bindings of the C++ library (docs/PYTHON.md): translate and score with a Translator, corpus BLEU,
training from a recipe, and a model directory's configuration and weights as numpy arrays.

    import tfm
    translator = tfm.Translator("model")
    results = translator.translate_batch(["A man is riding a bike."])
    print(results[0].hypotheses[0])
"""

import json
import os
from typing import TYPE_CHECKING, Any, Dict, Mapping, Tuple, Union

if TYPE_CHECKING:  # numpy is imported when an array is first made, not by `import tfm`
    import numpy as np

# OpenMP threads spin 3,000 rounds before they sleep, not libgomp's 300,000, unless the user chose:
# libgomp reads this once, when it is loaded with the module below (src/tfm/core/openmp_wait.h).
if "OMP_WAIT_POLICY" not in os.environ:
    os.environ.setdefault("GOMP_SPINCOUNT", "3000")

from ._tfm import (  # noqa: F401,E402
    BleuResult,
    Error,
    ScoringResult,
    TrainingProgress,
    TrainingResult,
    TranslationResult,
    Translator,
    __version__,
    bleu,
    train,
)
from . import _tfm

__all__ = [
    "BleuResult",
    "Error",
    "ScoringResult",
    "TrainingProgress",
    "TrainingResult",
    "TranslationResult",
    "Translator",
    "bleu",
    "load_model",
    "save_model",
    "train",
]


def load_model(model_dir: Union[str, os.PathLike]) -> Tuple[Dict[str, Any], Dict[str, "np.ndarray"]]:
    """Reads a model directory's configuration and weights (docs/MODEL_FORMAT.md).

    Returns (config, weights): config is config.json as a dict (every key), weights a dict from
    parameter name to a read-only float32 numpy array, in the file's order. The arrays share the
    memory the file was read into (no copy); copy one to change it. The directory is checked as
    tfm.Translator checks it (shapes, checksums, finite values); its vocabulary is not needed.
    """
    config_json, weights = _tfm._read_model_weights(os.fspath(model_dir))
    return json.loads(config_json), dict(weights)


def save_model(model_dir: Union[str, os.PathLike], config: Mapping[str, Any],
               weights: Mapping[str, Any], vocab: Union[str, os.PathLike, bytes]) -> None:
    """Writes a model directory that tfm.Translator and `tfm translate` read.

    config: a dict of config.json keys (missing keys take the base model's values); weights: a
    dict from parameter name to an array (numpy, or anything numpy converts, such as a CPU
    torch.Tensor), converted to float32; vocab: the path of a SentencePiece model file, or its
    bytes, whose size and special ids fit the config. Everything is checked before anything is
    written; the directory is then written all or nothing (an existing model directory is replaced
    as a whole; one that holds other files is refused).
    """
    if isinstance(vocab, (bytes, bytearray, memoryview)):
        vocabulary = bytes(vocab)
    else:
        with open(os.fspath(vocab), "rb") as file:
            vocabulary = file.read()
    _tfm._write_model_weights(os.fspath(model_dir), json.dumps(config), list(weights.items()),
                              vocabulary)
