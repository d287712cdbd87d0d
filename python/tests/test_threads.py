"""Python threads decoding at once: the GIL is released while decoding, and one Translator called
from several threads gives each the results it gives alone."""

import threading
import time

import tfm
from conftest import SOURCES

OPTIONS = {"beam_size": 4, "n_best": 2, "max_length_offset": 12, "return_scores": True,
           "return_attention": True}


def summary(results):
    return [(r.hypotheses, r.scores, [a.tolist() for a in r.attention]) for r in results]


def test_four_threads_on_one_translator_give_the_sequential_results(translator):
    batches = [SOURCES[i:] + SOURCES[:i] for i in range(4)]
    expected = [summary(translator.translate_batch(batch, **OPTIONS)) for batch in batches]
    got = [None] * 4
    errors = []

    def work(index):
        try:
            for _ in range(3):
                got[index] = summary(translator.translate_batch(batches[index], **OPTIONS))
        except Exception as error:  # reported below; a thread's exception is otherwise lost
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert got == expected


def test_four_translators_over_one_model_directory_in_threads(model_dir):
    translators = [tfm.Translator(model_dir, threads=1) for _ in range(4)]
    expected = summary(translators[0].translate_batch(SOURCES, **OPTIONS))
    got = [None] * 4
    threads = [threading.Thread(target=lambda i=i: got.__setitem__(
        i, summary(translators[i].translate_batch(SOURCES, **OPTIONS)))) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got == [expected] * 4


def test_other_python_threads_run_while_one_decodes(translator):
    # A long call: many sentences, long outputs. With the GIL held, this thread could not count
    # while the call runs; with it released, it counts throughout.
    sources = SOURCES * 150
    started, done = threading.Event(), threading.Event()
    elapsed = []

    def decode():
        started.set()
        begin = time.perf_counter()
        translator.translate_batch(sources, beam_size=4, max_length_offset=40)
        elapsed.append(time.perf_counter() - begin)
        done.set()

    thread = threading.Thread(target=decode)
    thread.start()
    started.wait()
    counted_while_decoding = 0
    begin = time.perf_counter()
    while not done.is_set():
        counted_while_decoding += 1
    counting = time.perf_counter() - begin
    thread.join()
    assert elapsed[0] > 0.05, "the call was too short to tell"
    # Without the GIL released this loop would be frozen for the whole call, apart from what runs
    # before the call starts; with it, it runs about as long as the call.
    assert counting >= 0.5 * elapsed[0]
    assert counted_while_decoding > 1000
