"""One chunk of documents -> serialized records; the worker processes that do it in parallel.

This module imports no TensorFlow, so `spawn`ed workers start in a fraction of a second. Workers
either get lines already tokenized by the parent (`TokenizedLines`; fast tokenizer: one
TensorFlow graph in the parent process) or raw lines that they tokenize with the pure-Python
tokenizer. Both directions carry a few large buffers rather than many small objects (token ids
as flat arrays, a chunk's records as one bytes object), so sending costs little next to the work.
"""
import concurrent.futures
import dataclasses
import functools
import hashlib
import multiprocessing
import os
import random
import threading
import time

import numpy as np

from bert_tasks.pretraining.data.documents import LineTokenizer, TokenizedLines
from bert_tasks.pretraining.data.features import ExampleEncoder
from bert_tasks.pretraining.data.instances import InstanceBuilder, MaskingRates
from bert_tasks.pretraining.data.ltr import LtrInstanceBuilder
from bert_tasks.pretraining.data.packing import pack_instances


@dataclasses.dataclass
class ChunkStats(object):
    """Counts for one chunk or, summed, a run."""
    num_lines: int = 0
    num_documents: int = 0  # non-empty documents
    num_instances: int = 0
    num_chunks: int = 0
    worker_cpu_seconds: float = 0.0  # CPU time of worker processes (none for one worker)
    seconds: float = 0.0  # wall time of the whole run (set by `pipeline.write_records`)
    # Packed runs (--max_sequences_per_row > 1): the rows written, the instances' tokens.
    num_rows: int = 0
    num_tokens: int = 0

    def add(self, other):
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


def chunk_seed(random_seed, chunk_index):
    """The seed of chunk `chunk_index`: `random_seed` for chunk 0, else a hash of both."""
    if chunk_index == 0:
        return random_seed
    digest = hashlib.sha256(b"%d/%d" % (random_seed, chunk_index)).digest()
    return int.from_bytes(digest[:8], "little")


class ChunkProcessor(object):
    """Documents of one chunk -> serialized records, in the original's order for that chunk.

    Args:
      opts: `pipeline.Options`.
      vocab: token -> id mapping in file order (`FullTokenizer.vocab`).
    """

    def __init__(self, opts, vocab):
        self.opts = opts
        # The left-to-right model's records: unmasked, one segment, no label (`data.ltr`).
        ltr = opts.pretraining_objective == "ltr"
        next_sentence = opts.next_sentence_prediction and not ltr
        self.builder = (LtrInstanceBuilder if ltr else InstanceBuilder)(
            vocab, opts.max_seq_length, opts.short_seq_prob, opts.masked_lm_prob,
            opts.max_predictions_per_seq, opts.do_whole_word_mask,
            MaskingRates(opts.mask_token_prob, opts.random_token_prob), next_sentence)
        self.encoder = ExampleEncoder(
            opts.max_seq_length, opts.max_predictions_per_seq, max(vocab.values()),
            next_sentence, masked_lm=not ltr)

    def __call__(self, chunk_index, documents, num_lines, report=None):
        """Returns (records: list[bytes], ChunkStats).

        Args:
          chunk_index: selects the generator seed (`chunk_seed`).
          documents: from `build_documents`; consumed (shuffled, emptied of empty documents).
          num_lines: for the stats.
          report: optional progress callable, see `InstanceBuilder.create_training_instances`.
        """
        rng = random.Random(chunk_seed(self.opts.random_seed, chunk_index))
        per_row = self.opts.max_sequences_per_row
        instances = self.builder.create_training_instances(
            documents, self.opts.dupe_factor, rng, report=report,
            convert=None if per_row > 1 else self.encoder.encode)
        stats = ChunkStats(num_lines, len(documents), len(instances), 1)
        if per_row == 1:
            return instances, stats
        # Packed: the chunk's pairs, in their shuffled order, into rows (`packing`).
        rows, fit = pack_instances(instances, self.opts.max_seq_length,
                                   self.opts.max_predictions_per_seq, per_row)
        stats.num_rows, stats.num_tokens = len(rows), fit.num_tokens
        return [self.encoder.encode_packed(row, per_row) for row in rows], stats

    def process_lines(self, chunk_index, tokenized):
        """`TokenizedLines` of one chunk -> (records: list[bytes], ChunkStats)."""
        documents = [[]]
        tokenized.append_to(documents)
        return self(chunk_index, documents, tokenized.num_lines)


class RecordBatch(object):
    """A chunk's serialized records as one bytes object (pickled in one copy); iterates them.

    Args:
      records: list of bytes.
    """

    def __init__(self, records):
        self.data = b"".join(records)
        self.lengths = np.fromiter(map(len, records), np.int64, len(records))

    def __iter__(self):
        data, start = self.data, 0
        for length in self.lengths.tolist():
            yield data[start:start + length]
            start += length


class WorkerError(RuntimeError):
    """A worker process died (killed, out of memory); the run stops without output."""


class WorkerPool(object):
    """Processes that turn chunks into records; a context manager.

    One pool serves any number of `pipeline.write_records` calls, with any flags: a program that
    makes several data sets starts the workers (in parallel) once. Workers are
    `spawn`ed: the parent has imported TensorFlow, which is not fork-safe.

    Args:
      num_workers: number of processes.
    """

    def __init__(self, num_workers):
        self.num_workers = num_workers
        self._executor = concurrent.futures.ProcessPoolExecutor(
            num_workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=_exit_with_parent, initargs=(os.getpid(),))
        # The executor starts a process per submission that finds none idle: start them all now,
        # so that they import while the parent reads and tokenizes.
        for _ in range(num_workers):
            self._executor.submit(int)

    def submit(self, opts, chunk_index, payload):
        """Future of (RecordBatch, ChunkStats) for a chunk; `payload` as `process_in_worker`."""
        return self._executor.submit(process_in_worker, opts, chunk_index, payload)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._executor.shutdown(wait=True, cancel_futures=True)
        return False


def _exit_with_parent(parent_pid):
    """Worker initializer: exit when the parent dies.

    A parent killed outright (SIGKILL, the OOM killer) cannot stop its workers, which would wait
    for work forever; each checks every second that its parent is still there.
    """
    def watch():
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(1)
    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


@functools.lru_cache(maxsize=1)
def _worker_state(opts):
    """(ChunkProcessor, faithful LineTokenizer) of a worker, made once per set of flags."""
    line_tokenizer = LineTokenizer(opts.vocab_file, opts.do_lower_case, "faithful")
    return ChunkProcessor(opts, line_tokenizer.vocab), line_tokenizer


def process_in_worker(opts, chunk_index, payload):
    """Runs in a worker: one chunk -> (RecordBatch, ChunkStats).

    Args:
      opts: `pipeline.Options`.
      chunk_index: as `ChunkProcessor`.
      payload: `TokenizedLines`, or a list of raw lines that the worker tokenizes (faithful).
    """
    start = time.process_time()
    processor, line_tokenizer = _worker_state(opts)
    if not isinstance(payload, TokenizedLines):
        payload = line_tokenizer.tokenize_lines(payload)
    records, stats = processor.process_lines(chunk_index, payload)
    batch = RecordBatch(records)
    stats.worker_cpu_seconds = time.process_time() - start
    return batch, stats
