"""Frozen BERT activations of every word, computed once and cached on disk (paper Table 7).

The encoder runs once over a file's windows (`bert_tasks.ner.features`: document context, first sub-token
of each word); the activations of every layer at each word's first sub-token are kept, so the
feature-based taggers of all six layer choices, over all their epochs, read them from disk.

Cache directory layout (one per data file):

    layer_00.npy ... layer_NN.npy   float16 [num_words, H]: 00 the embedding output, k the output
                                    of encoder layer k (1..num_hidden_layers)
    sentence_starts.npy             int64 [num_sentences + 1]: sentence i is rows
                                    sentence_starts[i]:sentence_starts[i+1]
    label_ids.npy                   int32 [num_words]: the gold IOB2 label of each word
    settings.json                   what the activations were computed from; written last

A directory whose settings.json equals the current settings is reused; otherwise it is computed
again. Every file is written to a temporary name, `<name>.tmp-<pid>-<random>`, and renamed when
complete. A run killed while computing (kill -9, out of memory) leaves those behind, gigabytes of
them; the next build of the cache removes the ones whose writer is gone
(`remove_stale_temporaries`, `bert_runner.stale_files`). float16 halves the disk and memory
(BERT's hidden states are LayerNorm outputs, well inside its range); BERT-Base on CoNLL-2003
train takes 13 x 204k x 768 x 2 bytes = 4.1 GB.

    cache = ActivationCache.build(directory, settings, bert, documents, tokenizer, label_list,
                                  max_seq_length, batch_size)
    cache.layers([11, 12])   # memory-mapped [num_words, H] arrays
"""
import contextlib
import json
import os
import re
import time
import uuid

import numpy as np
import tensorflow as tf
from absl import logging
from keras import ops

from bert_runner import stale_files
from bert_tasks.ner import conll, features

SETTINGS_FILE = "settings.json"
# `<name>.tmp-<pid>-<8 hex>` as written here; `<name>.tmp-<32 hex>`, without the writer's pid, as
# written by earlier versions (through bert_runner.results.atomic_output).
_TEMPORARY = re.compile(r".\.tmp-(?:(\d+)-[0-9a-f]{8}|[0-9a-f]{32})\Z")


@contextlib.contextmanager
def _atomic_output(path):
    """Yields `path`'s temporary name (with this process's pid); renames it to `path` if the
    block succeeds, removes it otherwise."""
    tmp_path = "%s.tmp-%d-%s" % (path, os.getpid(), uuid.uuid4().hex[:8])
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)


def _write_text(path, text):
    with _atomic_output(path) as tmp_path:
        with open(tmp_path, "w", encoding="utf-8") as f:
            f.write(text)


def remove_stale_temporaries(directory, started=None):
    """Removes the temporary files in the cache `directory` that a killed run left.

    Only files whose writer is gone: named with a pid that no longer runs
    (`bert_runner.stale_files.writer_is_gone`), or, for names without a pid, older than `started`
    (this run's start, seconds since the epoch; default now) and open in no process. Each removal
    is logged.

    Returns:
      list of the removed paths.
    """
    started = time.time() if started is None else started
    removed = []
    if not os.path.isdir(directory):
        return removed
    for name in sorted(os.listdir(directory)):
        match = _TEMPORARY.search(name)
        if not match:
            continue
        path = os.path.join(directory, name)
        try:
            if match.group(1) is not None:
                pid = int(match.group(1))
                if not stale_files.writer_is_gone(path, pid):
                    logging.info("Leaving %s: process %d, which writes it, is running", path, pid)
                    continue
                why = "process %d, its writer, is gone" % pid
            else:
                if os.stat(path).st_mtime >= started or stale_files.held_open(path):
                    logging.info("Leaving %s: it is new or open in a running process", path)
                    continue
                why = "older than this run and open in no process"
            size = os.stat(path).st_size
            os.remove(path)
        except FileNotFoundError:
            continue  # its writer renamed or removed it meanwhile
        removed.append(path)
        logging.info("Removed %s (%.1f MB), left by an interrupted run: %s", path, size / 1e6, why)
    return removed


def _layer_file(directory, index):
    return os.path.join(directory, "layer_%02d.npy" % index)


def _batch_windows(windows, batch_size):
    for start in range(0, len(windows), batch_size):
        yield windows[start:start + batch_size]


class ActivationCache:
    """A complete cache directory (see the module docstring), memory-mapped read-only."""

    def __init__(self, directory):
        with open(os.path.join(directory, SETTINGS_FILE), encoding="utf-8") as f:
            self.settings = json.load(f)
        self.directory = directory
        self.sentence_starts = np.load(os.path.join(directory, "sentence_starts.npy"))
        self.label_ids = np.load(os.path.join(directory, "label_ids.npy"))
        self.num_layers = self.settings["num_hidden_layers"] + 1

    @property
    def num_sentences(self):
        return len(self.sentence_starts) - 1

    def layers(self, indexes):
        """Memory-mapped float16 `[num_words, H]` arrays of the given layers (0 = embeddings)."""
        return [np.load(_layer_file(self.directory, i), mmap_mode="r") for i in indexes]

    @staticmethod
    def reusable(directory, settings, num_hidden_layers):
        """Whether `directory` holds a complete cache made with `settings` for a model of
        `num_hidden_layers` layers."""
        settings_path = os.path.join(directory, SETTINGS_FILE)
        if not os.path.exists(settings_path):
            return False
        try:
            with open(settings_path, encoding="utf-8") as f:
                return json.load(f) == dict(settings, num_hidden_layers=num_hidden_layers)
        except ValueError:  # not JSON (edited by hand): computed again
            return False

    @classmethod
    def build(cls, directory, settings, bert, documents, tokenizer, label_list, max_seq_length,
              batch_size, document_context=True, windows=None, started=None, forward=None):
        """The cache of `documents` in `directory`: reused if its settings.json equals `settings`
        (a JSON-able dict naming the checkpoint, data file and windowing), else computed now.
        First removes the temporary files killed runs left in it (`remove_stale_temporaries`).

        Args:
          bert: a `modeling.BertModel` holding the frozen weights.
          label_list: list of str; every tag must be in it (`bert_tasks.ner.features.check_labels`).
          windows: the documents' windows (`bert_tasks.ner.features.make_windows` with these
            settings) when already made; made here otherwise.
          started: when this run started (seconds since the epoch), for
            `remove_stale_temporaries`.
          forward: `encoder_forward(bert)` when already made (another split's), made here
            otherwise.
        """
        check_cache_dir(directory)
        remove_stale_temporaries(directory, started)
        settings_path = os.path.join(directory, SETTINGS_FILE)
        if cls.reusable(directory, settings, bert.config.num_hidden_layers):
            logging.info("Reusing the activations in %s", directory)
            return cls(directory)
        settings = dict(settings, num_hidden_layers=bert.config.num_hidden_layers)
        if os.path.exists(settings_path):
            os.remove(settings_path)  # stale: mark incomplete before anything is overwritten
        if windows is None:
            windows = list(features.make_windows(documents, tokenizer, max_seq_length,
                                                 document_context))
        _compute(directory, bert, forward or encoder_forward(bert), documents, windows, tokenizer,
                 label_list, max_seq_length, batch_size)
        _write_text(settings_path, json.dumps(settings, indent=2, sort_keys=True) + "\n")
        return cls(directory)


def check_cache_dir(directory):
    """Raises ValueError unless `directory` can hold a cache: local (it is memory-mapped) and
    writable (made if missing)."""
    if "://" in directory:
        raise ValueError("%s: the activation cache must be on a local disk (it is memory-mapped): "
                         "pass a local --cache_dir" % directory)
    try:
        os.makedirs(directory, exist_ok=True)
        probe = "%s/.write-test.tmp-%d-%s" % (directory, os.getpid(), uuid.uuid4().hex[:8])
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as e:
        raise ValueError("activation cache %s is not writable (%s): pass another --cache_dir or "
                         "--output_dir" % (directory, e.strerror or e)) from None


def load_frozen_encoder(config, init_checkpoint):
    """The encoder of `config`'s family with every weight from `init_checkpoint` (any layout),
    not trainable. Raises ValueError naming the checkpoint when it does not fit `config`, cannot
    be read to the end (truncated, corrupt) or lacks some of the weights."""
    from bert_runner.runs import checkpoints
    from modeling import families

    bert = families.build_model("encoder", config)
    found = checkpoints.open_checkpoint(init_checkpoint)
    found.check_fits(bert)
    # Refuses a checkpoint without every encoder weight (the loader's rule for every script).
    found.load_into(bert, strict=False)
    bert.trainable = False
    return bert


def encoder_forward(bert):
    """A compiled forward pass of `bert`: inputs -> float16 [B, S, L+1, H], every layer at every
    position. The caches of a run's splits share one, and with it its traces."""

    @tf.function(reduce_retracing=True)
    def forward(input_ids, input_mask):
        outputs = bert({"input_ids": input_ids, "input_mask": input_mask}, training=False)
        layers = [outputs["embedding_output"]] + list(outputs["all_encoder_layers"])
        return ops.cast(ops.stack(layers, axis=2), "float16")

    return forward


def _compute(directory, bert, forward, documents, windows, tokenizer, label_list, max_seq_length,
             batch_size):
    sentences = conll.sentences_of(documents)
    num_words = sum(len(s.words) for s in sentences)
    num_layers = bert.config.num_hidden_layers + 1
    hidden = bert.config.hidden_size
    label_map = {label: i for i, label in enumerate(label_list)}
    label_ids = np.array([label_map[t] for s in sentences for t in s.tags], np.int32)
    sentence_starts = np.cumsum([0] + [len(s.words) for s in sentences], dtype=np.int64)
    logging.info("Computing the activations of %d words (%d windows, %d layers) into %s",
                 num_words, len(windows), num_layers, directory)
    os.makedirs(directory, exist_ok=True)
    start_time = time.perf_counter()
    with contextlib.ExitStack() as stack:
        tmp_paths = [stack.enter_context(_atomic_output(_layer_file(directory, i)))
                     for i in range(num_layers)]
        arrays = [np.lib.format.open_memmap(p, mode="w+", dtype=np.float16,
                                            shape=(num_words, hidden)) for p in tmp_paths]
        row = 0
        for batch_number, batch in enumerate(_batch_windows(windows, batch_size)):
            input_ids = np.zeros((len(batch), max_seq_length), np.int32)
            input_mask = np.zeros((len(batch), max_seq_length), np.int32)
            for i, window in enumerate(batch):
                input_ids[i, :len(window.tokens)] = tokenizer.convert_tokens_to_ids(window.tokens)
                input_mask[i, :len(window.tokens)] = 1
            values = np.asarray(forward(input_ids, input_mask))
            for i, window in enumerate(batch):
                rows = values[i, window.label_positions]  # [words, layers, H]
                for layer, array in enumerate(arrays):
                    array[row:row + len(rows)] = rows[:, layer]
                row += len(rows)
            if batch_number % 100 == 0:
                seconds = time.perf_counter() - start_time
                logging.info("  %d of %d words (%.0f words/s)", row, num_words,
                             row / max(seconds, 1e-9))
        for array in arrays:
            array.flush()
        del arrays
        for name, value in (("sentence_starts", sentence_starts), ("label_ids", label_ids)):
            with _atomic_output(os.path.join(directory, name + ".npy")) as tmp_path:
                with open(tmp_path, "wb") as f:
                    np.save(f, value)
    logging.info("Activations computed in %.1f s", time.perf_counter() - start_time)
