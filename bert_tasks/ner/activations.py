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
again. Every file is written to a temporary name and renamed. float16 halves the disk and memory
(BERT's hidden states are LayerNorm outputs, well inside its range); BERT-Base on CoNLL-2003
train takes 13 x 204k x 768 x 2 bytes = 4.1 GB.

    cache = ActivationCache.build(directory, settings, bert, documents, tokenizer, label_list,
                                  max_seq_length, batch_size)
    cache.layers([11, 12])   # memory-mapped [num_words, H] arrays
"""
import contextlib
import json
import os
import time

import numpy as np
import tensorflow as tf
from absl import logging
from keras import ops

from bert_tasks.ner import conll, features
from bert_runner.results import atomic_output, write_text_atomic

SETTINGS_FILE = "settings.json"


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

    @classmethod
    def build(cls, directory, settings, bert, documents, tokenizer, label_list, max_seq_length,
              batch_size, document_context=True):
        """The cache of `documents` in `directory`: reused if its settings.json equals `settings`
        (a JSON-able dict naming the checkpoint, data file and windowing), else computed now.

        Args:
          bert: a `modeling.BertModel` holding the frozen weights.
          label_list: list of str; every tag must be in it (`bert_tasks.ner.features.check_labels`).
        """
        if "://" in directory:
            raise ValueError("%s: the activation cache must be on a local disk (it is "
                             "memory-mapped)" % directory)
        settings = dict(settings, num_hidden_layers=bert.config.num_hidden_layers)
        settings_path = os.path.join(directory, SETTINGS_FILE)
        if os.path.exists(settings_path):
            with open(settings_path, encoding="utf-8") as f:
                if json.load(f) == settings:
                    logging.info("Reusing the activations in %s", directory)
                    return cls(directory)
            os.remove(settings_path)  # stale: mark incomplete before anything is overwritten
        _compute(directory, bert, documents, tokenizer, label_list, max_seq_length, batch_size,
                 document_context)
        write_text_atomic(settings_path, json.dumps(settings, indent=2, sort_keys=True) + "\n")
        return cls(directory)


def file_fingerprint(path):
    """{path, bytes, mtime_ns} of a file, so a cache made from another version is not reused."""
    stat = os.stat(path)
    return {"path": os.path.abspath(path), "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def load_frozen_encoder(config, init_checkpoint):
    """A `modeling.BertModel` with every weight from `init_checkpoint` (original layout or ours),
    not trainable. Raises ValueError naming the weights the checkpoint lacks."""
    from modeling import BertModel
    from modeling.tf1_checkpoint import resolve_checkpoint_prefix
    from bert_runner import checkpoints

    bert = BertModel(config)
    report = checkpoints.initialize_from_checkpoint(bert, init_checkpoint)
    if report.missing:
        raise ValueError("%s (--init_checkpoint) lacks encoder weights: %s"
                         % (resolve_checkpoint_prefix(init_checkpoint), ", ".join(report.missing)))
    bert.trainable = False
    return bert


def _forward_fn(bert):
    """A compiled forward pass: inputs -> float16 [B, S, L+1, H], every layer at every position."""

    @tf.function(reduce_retracing=True)
    def forward(input_ids, input_mask):
        outputs = bert({"input_ids": input_ids, "input_mask": input_mask}, training=False)
        layers = [outputs["embedding_output"]] + list(outputs["all_encoder_layers"])
        return ops.cast(ops.stack(layers, axis=2), "float16")

    return forward


def _compute(directory, bert, documents, tokenizer, label_list, max_seq_length, batch_size,
             document_context):
    sentences = conll.sentences_of(documents)
    windows = list(features.make_windows(documents, tokenizer, max_seq_length, document_context))
    num_words = sum(len(s.words) for s in sentences)
    num_layers = bert.config.num_hidden_layers + 1
    hidden = bert.config.hidden_size
    label_map = {label: i for i, label in enumerate(label_list)}
    label_ids = np.array([label_map[t] for s in sentences for t in s.tags], np.int32)
    sentence_starts = np.cumsum([0] + [len(s.words) for s in sentences], dtype=np.int64)
    forward = _forward_fn(bert)
    logging.info("Computing the activations of %d words (%d windows, %d layers) into %s",
                 num_words, len(windows), num_layers, directory)
    os.makedirs(directory, exist_ok=True)
    start_time = time.perf_counter()
    with contextlib.ExitStack() as stack:
        tmp_paths = [stack.enter_context(atomic_output(_layer_file(directory, i)))
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
            with atomic_output(os.path.join(directory, name + ".npy")) as tmp_path:
                with open(tmp_path, "wb") as f:
                    np.save(f, value)
    logging.info("Activations computed in %.1f s", time.perf_counter() - start_time)
