"""Every failure a caller can cause is a Python exception: tfm.Error (a RuntimeError) with the C++
library's one-line message, TypeError for arguments of the wrong type, KeyboardInterrupt for
Ctrl-C during a long call; never a crash."""

import os
import signal
import threading
import time

import pytest

import tfm
from conftest import SOURCES, write_lines


def raises(match, call, *args, **kwargs):
    with pytest.raises(tfm.Error, match=match) as error:
        call(*args, **kwargs)
    assert "\n" not in str(error.value)
    return error.value


def test_error_is_a_runtime_error():
    assert issubclass(tfm.Error, RuntimeError)


def test_loading_errors(model_dir, tmp_path):
    raises("model directory '.*missing' does not exist", tfm.Translator, tmp_path / "missing")
    raises("fp16", tfm.Translator, model_dir, compute_type="fp16")
    raises("tpu", tfm.Translator, model_dir, device="tpu")
    no_vocab = tmp_path / "no-vocab"
    no_vocab.mkdir()
    for name in ("config.json", "model.safetensors"):
        (no_vocab / name).write_bytes((model_dir / name).read_bytes())
    raises("vocab.model: missing", tfm.Translator, no_vocab)


def test_cuda_loads_on_a_gpu_or_fails_cleanly(model_dir):
    try:
        translator = tfm.Translator(model_dir, device="cuda")
    except tfm.Error as error:  # a build without CUDA, or no GPU
        assert "cuda" in str(error).lower() or "gpu" in str(error).lower()
    else:
        assert translator.device == "cuda"


def test_bad_options(translator, tmp_path):
    raises("n_best 5 must be between 1 and the beam size 4", translator.translate_batch,
           SOURCES, n_best=5)
    raises("beam size 0", translator.translate_batch, SOURCES, beam_size=0)
    raises("batch size 0", translator.translate_batch, SOURCES, batch_size=0)
    raises("batch_tokens -1", translator.translate_batch, SOURCES, batch_tokens=-1)
    raises("attention_layer 3 out of range", translator.translate_batch, SOURCES,
           return_attention=True, attention_layer=3)
    raises("attention_head 2 out of range", translator.translate_batch, SOURCES,
           return_attention=True, attention_head=2)
    raises("source 1 has .* subword tokens, more than the maximum input length 64",
           translator.translate_batch, ["a dog.", "a dog " * 100])
    raises("2 sources but 1 targets", translator.score_batch, ["a dog.", "a man."], ["ein hund."])
    raises("missing.en", translator.translate_file, tmp_path / "missing.en", tmp_path / "out.de")


def test_wrong_types_are_type_errors(translator):
    with pytest.raises(TypeError, match="not a single string|not <class 'str'>"):
        translator.translate_batch("a dog.")
    with pytest.raises(TypeError, match="every source must be a str"):
        translator.translate_batch(["a dog.", ["a", "dog"]])
    with pytest.raises(TypeError, match="every source must be a list of str"):
        translator.translate_batch([["a", "dog"], "a dog."])
    with pytest.raises(TypeError):
        translator.translate_batch([1, 2])
    with pytest.raises(TypeError):
        translator.translate_batch(SOURCES, beam_size="four")
    with pytest.raises(TypeError):
        translator.translate_batch(SOURCES, 4)  # options are keywords


def interrupt_after_arming(seconds):
    """A thread that sends this process SIGINT `seconds` after the event it returns is set. Set
    inside `pytest.raises`: a timer started outside could fire while the main thread still waits in
    Thread.start() on a loaded machine (a fresh-machine check saw the KeyboardInterrupt there)."""
    armed = threading.Event()

    def run():
        armed.wait()
        time.sleep(seconds)
        os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, armed


def test_ctrl_c_stops_a_long_call(translator, tmp_path):
    # The interrupted call has 20 times the sources of a timed one, so that it would take about 20
    # times as long to finish; stopped after a batch, it takes a small part of the timed one. The
    # bound (a quarter of the whole) leaves room for a machine loaded differently in the two calls.
    part = SOURCES * 50
    begin = time.perf_counter()
    translator.translate_batch(part, batch_size=8, max_length_offset=30)
    whole = 20 * (time.perf_counter() - begin)
    assert whole > 0.5, "the call is too short to interrupt"
    sources = SOURCES * 1000

    interrupter, armed = interrupt_after_arming(0.02)
    begin = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        armed.set()
        translator.translate_batch(sources, batch_size=8, max_length_offset=30)
    interrupted = time.perf_counter() - begin
    interrupter.join()
    assert interrupted < 0.25 * whole, f"{interrupted:.2f} s of the whole {whole:.2f} s"

    source, output = tmp_path / "long.en", tmp_path / "long.de"
    write_lines(source, sources)
    interrupter, armed = interrupt_after_arming(0.02)
    with pytest.raises(KeyboardInterrupt):
        armed.set()
        translator.translate_file(source, output, batch_size=8, max_length_offset=30)
    interrupter.join()
    assert not output.exists()  # written atomically: nothing left behind

    # The translator is unharmed.
    assert translator.translate_batch(SOURCES[:1])[0].hypotheses


def test_openmp_spins_briefly_unless_the_user_chose():
    """`import tfm` sets GOMP_SPINCOUNT=3000 before libgomp loads (src/tfm/core/openmp_wait.h),
    as libgomp's own report of its settings shows; a choice of the user's is kept."""
    import os
    import subprocess
    import sys

    def settings(**extra):
        env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
        env.update(OMP_DISPLAY_ENV="verbose", **extra)
        done = subprocess.run([sys.executable, "-c", "import tfm"], env=env, capture_output=True,
                              encoding="utf-8", check=True)
        return done.stderr

    assert "GOMP_SPINCOUNT = '3000'" in settings()
    assert "GOMP_SPINCOUNT = '12345'" in settings(GOMP_SPINCOUNT="12345")
    active = settings(OMP_WAIT_POLICY="active")
    assert "OMP_WAIT_POLICY = 'ACTIVE'" in active and "GOMP_SPINCOUNT = '3000'" not in active


def test_search_options_and_threads_outside_the_cli_ranges_are_errors(translator, model_dir):
    # Before these checks: MemoryError, an allocation of 137 GB, or silently accepted.
    raises(r"beam size 2147483648 must be in \[1, 1024\]", translator.translate_batch, SOURCES,
           beam_size=2**31)
    raises(r"max_length 1000000000 must be in \[0, 1024\]", translator.translate_batch, SOURCES,
           max_length=10**9)
    raises(r"max_length -1 must be in \[0, 1024\]", translator.translate_batch, SOURCES,
           max_length=-1)
    raises(r"max_length_offset -100 must be in \[1, 1024\]", translator.translate_batch, SOURCES,
           max_length_offset=-100)
    raises(r"min_length -1 must be in \[0, 1024\]", translator.translate_batch, SOURCES,
           min_length=-1)
    raises(r"no_repeat_ngram_size -1 must be in \[0, 1024\] \(0: off\)", translator.translate_batch,
           SOURCES, no_repeat_ngram_size=-1)
    raises("length_penalty nan is not finite", translator.translate_batch, SOURCES,
           length_penalty=float("nan"))
    raises("mbr chooses from the n_best list: give it at least 2 hypotheses",
           translator.translate_batch, SOURCES, mbr=True)
    raises("mbr_temperature -1 must be a positive finite number", translator.translate_batch,
           SOURCES, n_best=2, mbr=True, mbr_temperature=-1)
    raises(r"sampling -1 must be in \[0, 1024\] \(0: a search\)", translator.translate_batch,
           SOURCES, sampling=-1)
    raises(r"sampling: epsilon 1 must be in \[0, 1\)", translator.translate_batch, SOURCES,
           sampling=2, sampling_epsilon=1.0)
    raises("sampling: temperature 0 must be a positive finite number",
           translator.translate_batch, SOURCES, sampling=2, sampling_temperature=0.0)
    raises("mbr chooses among the samples: draw at least 2, not 1", translator.translate_batch,
           SOURCES, sampling=1, mbr=True)
    raises("sampling returns no attention", translator.translate_batch, SOURCES, sampling=2,
           return_attention=True)
    # 100000 OpenMP threads ended the interpreter.
    raises("Translator: threads 100000 is more than the maximum of 4096", tfm.Translator,
           model_dir, threads=100000)


def test_a_beam_larger_than_half_the_vocabulary_translates(translator):
    # 60 pieces: a beam of 40 asks for 80 candidates a row, more than there are.
    assert translator.vocab_size == 60
    wide = translator.translate_batch(SOURCES[:2], beam_size=40, max_length_offset=4)
    assert [len(r.hypotheses) for r in wide] == [1, 1]


def test_an_overflowing_model_is_an_error_not_empty_output(model_dir, tmp_path):
    config, weights = tfm.load_model(model_dir)
    scaled = {name: (w * 1e19 if "embedding" in name else w) for name, w in weights.items()}
    assert scaled.keys() == weights.keys() and any("embedding" in name for name in weights)
    tfm.save_model(tmp_path / "overflow", config, scaled, vocab=model_dir / "vocab.model")
    translator = tfm.Translator(tmp_path / "overflow", threads=1)
    for beam in (1, 4):
        raises("decoding step 1: the model's log-probabilities are not finite",
               translator.translate_batch, SOURCES, beam_size=beam)
    raises("score: sentence 0, target token 1: the model.s log-probability is not finite",
           translator.score_batch, SOURCES[:1], SOURCES[:1])


def test_wrong_override_types_of_train_are_type_errors(tmp_path):
    for overrides in (5, [1, 2], "training.log_every=2"):
        with pytest.raises(TypeError, match="overrides must be a dict or a list"):
            tfm.train(None, overrides, run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()
