"""Chunked / parallel mode: same output for any number of workers, the original's statistics."""
import multiprocessing
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tasks.pretraining.data import pipeline
from bert_tasks.pretraining.data import processing
from bert_tasks.pretraining.data.corpus import gutenberg_to_corpus
from bert_tasks.pretraining.data.features import name_to_features
import vocab

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB_FILE = vocab.bundled_vocab_file()
MASK_ID = 103


@pytest.fixture(scope="module")
def austen_corpus(tmp_path_factory):
    """Persuasion (470 KB) in the one-sentence-per-line format: 24 chapters."""
    path = tmp_path_factory.mktemp("corpus") / "persuasion.txt"
    with open(os.path.join(ROOT, "data", "austen", "persuasion.txt"), encoding="utf-8") as f:
        path.write_text(gutenberg_to_corpus(f.read()), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def pool():
    """A WorkerPool of 2 processes for the tests' runs that bring their own pool: started once
    (it spawns two interpreters), as a program making several data sets would."""
    with processing.WorkerPool(2) as workers:
        yield workers


def _run(corpus, output, pool=None, **overrides):
    flags = dict(input_file=str(corpus), output_file=str(output), vocab_file=VOCAB_FILE,
                 dupe_factor=2)
    flags.update(overrides)
    return pipeline.write_records(pipeline.Options(**flags), pool=pool)


def _read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def statistics(path):
    """The fixture's summary.json statistics of a pretraining TFRecord file."""
    dataset = tf.data.TFRecordDataset(str(path)).batch(100000)
    f = {k: v.numpy() for k, v in tf.io.parse_example(
        next(iter(dataset)), name_to_features(128, 20)).items()}
    weights = f["masked_lm_weights"] > 0
    num_masked = weights.sum(axis=1)
    real_length = f["input_mask"].sum(axis=1)
    at_positions = np.take_along_axis(f["input_ids"], f["masked_lm_positions"], axis=1)[weights]
    labels = f["masked_lm_ids"][weights]
    return {
        "mean_masked_fraction": float(np.mean(num_masked / real_length)),
        "is_next": float(np.mean(f["next_sentence_labels"] == 0)),
        "mask": float(np.mean(at_positions == MASK_ID)),
        "kept": float(np.mean(at_positions == labels)),
        "random": float(np.mean((at_positions != MASK_ID) & (at_positions != labels))),
        "mean_length": float(real_length.mean()),
        "num_masked_is_round": bool(np.all(num_masked == np.minimum(
            20, np.maximum(1, np.round(real_length * 0.15))))),
    }


def test_same_output_for_any_workers_and_original_statistics(tmp_path, austen_corpus, pool):
    """0.1 MB chunks: 1 worker, 2 workers tokenizing in the parent (fast tokenizer when available;
    the run's own pool) and 2 workers tokenizing themselves (the module's pool) give
    byte-identical files, with the statistics of the original ordering on the same text."""
    one = _run(austen_corpus, tmp_path / "one.tfrecord", chunk_size_mb=0.1)
    assert one.num_chunks >= 4
    _run(austen_corpus, tmp_path / "two.tfrecord", chunk_size_mb=0.1, num_workers=2)
    _run(austen_corpus, tmp_path / "two_faithful.tfrecord", pool=pool, chunk_size_mb=0.1,
         num_workers=2, tokenizer="faithful")
    reference = _read_bytes(tmp_path / "one.tfrecord")
    assert _read_bytes(tmp_path / "two.tfrecord") == reference
    assert _read_bytes(tmp_path / "two_faithful.tfrecord") == reference

    original = _run(austen_corpus, tmp_path / "original.tfrecord")
    assert original.num_chunks == 1
    # Instance counts and lengths vary a lot between seeds on 25 documents (a document drawing a
    # short target, p=0.1, makes all its instances short), so they get loose bounds.
    assert abs(one.num_instances - original.num_instances) <= 0.15 * original.num_instances
    chunked = statistics(tmp_path / "one.tfrecord")
    whole = statistics(tmp_path / "original.tfrecord")
    assert chunked["num_masked_is_round"] and whole["num_masked_is_round"]
    for key, tolerance in [("mean_masked_fraction", 0.002), ("is_next", 0.04), ("mask", 0.03),
                           ("kept", 0.02), ("random", 0.02), ("mean_length", 12.0)]:
        assert abs(chunked[key] - whole[key]) <= tolerance, (key, chunked, whole)
    # And the original algorithm's own expectations (1 - is_next: random next 0.5 + one-sentence
    # chunks; 80/10/10 per masked word-piece).
    assert 0.145 <= chunked["mean_masked_fraction"] <= 0.155
    assert 0.40 <= chunked["is_next"] <= 0.50
    assert abs(chunked["mask"] - 0.8) < 0.03
    assert abs(chunked["kept"] - 0.1) < 0.02 and abs(chunked["random"] - 0.1) < 0.02


def test_a_worker_pool_serves_several_runs(tmp_path, austen_corpus, pool):
    """One `WorkerPool` (that of the runs before), runs with different flags: each writes what
    one process writes."""
    runs = [dict(chunk_size_mb=0.1, dupe_factor=1),
            dict(chunk_size_mb=0.2, dupe_factor=1, do_whole_word_mask=True, random_seed=7)]
    for k, flags in enumerate(runs):
        _run(austen_corpus, tmp_path / ("pool%d.tfrecord" % k), pool=pool, num_workers=2, **flags)
        _run(austen_corpus, tmp_path / ("one%d.tfrecord" % k), **flags)
        assert (_read_bytes(tmp_path / ("pool%d.tfrecord" % k))
                == _read_bytes(tmp_path / ("one%d.tfrecord" % k)))
    with pytest.raises(ValueError, match="the pool has 2 workers, --num_workers=3"):
        _run(austen_corpus, tmp_path / "three.tfrecord", pool=pool, num_workers=3,
             chunk_size_mb=0.1)
    assert not (tmp_path / "three.tfrecord").exists()


def test_workers_import_no_tensorflow(monkeypatch):
    """A `spawn`ed worker imports the script (as `__mp_main__`) and the modules of what it is
    sent (`processing.process_in_worker`, `pipeline.Options`): none of them imports TensorFlow,
    which would cost each worker seconds and hundreds of MB before its first chunk."""
    monkeypatch.setenv("BERT_TESTS_FORK", "0")  # a fresh interpreter, not a fork of one that has it
    code = ("import sys, create_pretraining_data; from bert_tasks.pretraining.data import "
            "pipeline, processing; print(sorted({'tensorflow', 'keras'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == "[]\n"


def test_a_dead_worker_stops_the_run_with_a_clear_error(tmp_path, austen_corpus):
    """A worker killed (as by the OOM killer): WorkerError, and no output file."""
    others = set(multiprocessing.active_children())  # the module's pool's workers
    with processing.WorkerPool(2) as pool:
        victim = next(p for p in multiprocessing.active_children() if p not in others)
        os.kill(victim.pid, signal.SIGKILL)
        victim.join()
        with pytest.raises(processing.WorkerError, match="a worker process died"):
            _run(austen_corpus, tmp_path / "out.tfrecord", pool=pool, num_workers=2,
                 chunk_size_mb=0.1, dupe_factor=1)
    assert os.listdir(tmp_path) == []


def test_corpus_smaller_than_a_chunk_is_the_original(tmp_path, fixtures_dir):
    data = fixtures_dir / "pretraining_data"
    _run(data / "corpus.txt", tmp_path / "out.tfrecord", chunk_size_mb=1.0, dupe_factor=2)
    original = tf.data.TFRecordDataset(str(data / "pretrain_default.tfrecord"))
    ours = tf.data.TFRecordDataset(str(tmp_path / "out.tfrecord"))
    parse = [lambda r: tf.io.parse_single_example(r, name_to_features(128, 20))] * 2
    for a, b in zip(original.map(parse[0]), ours.map(parse[1]), strict=True):
        for name in a:
            np.testing.assert_array_equal(a[name].numpy(), b[name].numpy())
