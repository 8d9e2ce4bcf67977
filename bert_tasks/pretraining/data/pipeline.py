"""create_pretraining_data end to end: check flags, read, make instances, write (optionally parallel).

Two orderings, both deterministic functions of the flags and the text:

* **Original** (`chunk_size_mb=0`, the default): the whole corpus is one chunk, processed with
  `random.Random(random_seed)` exactly as the original does: documents shuffled globally, random
  next sentences drawn from the whole corpus, all instances shuffled globally. Record for record
  the original's output. Needs the corpus in memory and runs in one process.
* **Chunked** (`chunk_size_mb>0`): the line stream is cut into chunks of about that many MB, at
  document boundaries (`reading.iter_chunks`). Chunk k is processed exactly like a whole corpus
  by the original algorithm, with its own generator
  `random.Random(processing.chunk_seed(random_seed, k))`:
  documents and instances are shuffled within the chunk, random next sentences come from the
  same chunk. Chunks are written in input order, records round-robin over the output files as one
  stream. Chunk boundaries and seeds depend only on the text and the flags, so the output is the
  same for any `num_workers` and any machine; a corpus smaller than one chunk gives exactly the
  original's output (chunk 0 uses `random_seed` itself). Memory is bounded by the
  `num_workers + 1` chunks in flight, not by the corpus size.
"""
import collections
import concurrent.futures
import dataclasses
import functools
import time

from absl import logging

from bert_runner import startup
from bert_tasks.pretraining.data import processing
from bert_tasks.pretraining.data.documents import TOKENIZERS, LineTokenizer, build_documents
from bert_tasks.pretraining.data.reading import (
    InputError, describe_files, expand_input_files, iter_chunks, iter_line_blocks, total_bytes)
from bert_tasks.pretraining.data.writing import (
    ShardedRecordWriter, check_output_files, read_files)

_SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[MASK]", "[UNK]")
# Building the fast tokenizer (TensorFlow graph) takes seconds: reuse it across runs in a process.
_line_tokenizer = functools.lru_cache(maxsize=4)(LineTokenizer)
_PROGRESS_SECONDS = 10.0


@dataclasses.dataclass(frozen=True)
class Options(object):
    """The script's flags (original names and defaults, then the new ones from num_workers on)."""
    input_file: str
    output_file: str
    vocab_file: str
    do_lower_case: bool = True
    do_whole_word_mask: bool = False
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    random_seed: int = 12345
    dupe_factor: int = 10
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    num_workers: int = 1
    chunk_size_mb: float = 0.0
    tokenizer: str = "auto"
    mask_token_prob: float = 0.8
    random_token_prob: float = 0.1
    next_sentence_prediction: bool = True
    pretraining_objective: str = "mlm"
    max_sequences_per_row: int = 1


def check_options(opts):
    """Raises InputError, naming the flag, for flag values the algorithm cannot honour."""
    o = opts
    checks = [
        (o.max_seq_length >= 5, "--max_seq_length=%d: must be >= 5 ([CLS] A [SEP] B [SEP] with at "
                                "least one token each in A and B)" % o.max_seq_length),
        (1 <= o.max_predictions_per_seq <= o.max_seq_length - 3,
         "--max_predictions_per_seq=%d: must be between 1 and max_seq_length - 3 = %d, the number "
         "of maskable positions" % (o.max_predictions_per_seq, o.max_seq_length - 3)),
        (0.0 <= o.masked_lm_prob <= 1.0,
         "--masked_lm_prob=%g: must be in [0, 1]" % o.masked_lm_prob),
        (0.0 <= o.short_seq_prob <= 1.0,
         "--short_seq_prob=%g: must be in [0, 1]" % o.short_seq_prob),
        (o.dupe_factor >= 1, "--dupe_factor=%d: must be >= 1" % o.dupe_factor),
        (o.num_workers >= 1, "--num_workers=%d: must be >= 1" % o.num_workers),
        (o.chunk_size_mb >= 0, "--chunk_size_mb=%g: must be >= 0" % o.chunk_size_mb),
        (o.num_workers == 1 or o.chunk_size_mb > 0,
         "--num_workers=%d needs --chunk_size_mb > 0: the original's ordering (one global shuffle, "
         "random next sentences from the whole corpus) is sequential" % o.num_workers),
        (o.tokenizer in TOKENIZERS, "--tokenizer=%s: must be one of %s"
         % (o.tokenizer, ", ".join(TOKENIZERS))),
        (0.0 <= o.mask_token_prob <= 1.0,
         "--mask_token_prob=%g: must be in [0, 1]" % o.mask_token_prob),
        (0.0 <= o.random_token_prob <= 1.0,
         "--random_token_prob=%g: must be in [0, 1]" % o.random_token_prob),
        (o.pretraining_objective in ("mlm", "ltr"),
         "--pretraining_objective=%s: must be mlm or ltr" % o.pretraining_objective),
        (o.max_sequences_per_row >= 1,
         "--max_sequences_per_row=%d: must be >= 1" % o.max_sequences_per_row),
        (o.max_sequences_per_row == 1 or o.pretraining_objective == "mlm",
         "--max_sequences_per_row=%d: the left-to-right model's records (--pretraining_objective"
         "=ltr) are not packed: leave the flag out" % o.max_sequences_per_row),
        (o.mask_token_prob + o.random_token_prob <= 1.0 + 1e-9,
         "--mask_token_prob=%g plus --random_token_prob=%g is more than 1 (the rest, kept "
         "unchanged, cannot be negative)" % (o.mask_token_prob, o.random_token_prob)),
    ]
    for ok, message in checks:
        if not ok:
            raise InputError(message)


class Progress(object):
    """Logs `phase`: percent done, counts, instances/s and ETA, at most every `_PROGRESS_SECONDS`.

    Args:
      phase: what is being done (str).
      total: the amount of work, in `unit`s.
      unit: name of the unit (str).
    """

    def __init__(self, phase, total, unit):
        self.phase, self.total, self.unit = phase, total, unit
        self.start = self._last = time.monotonic()

    def __call__(self, done, **counts):
        """`done`: units done so far; `counts`: name -> int to log (`instances` gives the rate)."""
        now = time.monotonic()
        if now - self._last < _PROGRESS_SECONDS:
            return
        self._last = now
        elapsed = now - self.start
        fraction = min(1.0, done / self.total) if self.total else 1.0
        eta = elapsed * (1.0 / fraction - 1.0) if fraction > 0 else float("nan")
        fields = ["%s: %.1f%% of %s" % (self.phase, 100.0 * fraction, self.unit)]
        fields += ["%d %s" % (value, name) for name, value in counts.items()]
        if "instances" in counts:
            fields.append("%.0f instances/s" % (counts["instances"] / max(elapsed, 1e-9)))
        fields.append("elapsed %.0fs | ETA %.0fs" % (elapsed, eta))
        logging.info("%s", " | ".join(fields))


def write_records(opts, pool=None):
    """Runs create_pretraining_data; returns `processing.ChunkStats` (with `seconds` set).

    Args:
      opts: `Options`.
      pool: optional `processing.WorkerPool` of `opts.num_workers` processes, kept for later runs
        (by default a run with several workers starts and stops its own).

    Raises:
      InputError, VocabError: before any work, for bad flags, inputs, outputs or vocab.
    """
    check_options(opts)
    if pool is not None and pool.num_workers != opts.num_workers:
        raise ValueError("the pool has %d workers, --num_workers=%d"
                         % (pool.num_workers, opts.num_workers))
    input_files = expand_input_files(opts.input_file)
    output_files = opts.output_file.split(",")
    check_output_files(output_files, files_read(opts, input_files))
    if opts.num_workers > 1 and pool is None:
        # The workers start while this process builds the tokenizer.
        with processing.WorkerPool(opts.num_workers) as own_pool:
            return _run(opts, input_files, output_files, own_pool)
    return _run(opts, input_files, output_files, pool)


def files_read(opts, input_files):
    """The files a run reads, for `check_output_files`: the text and the vocabulary."""
    return (read_files("--input_file", opts.input_file, input_files)
            + read_files("--vocab_file", opts.vocab_file, [opts.vocab_file] if opts.vocab_file
                         else []))


def _run(opts, input_files, output_files, pool):
    """`run` after the checks that need no tokenizer."""
    line_tokenizer = _line_tokenizer(opts.vocab_file, opts.do_lower_case, opts.tokenizer)
    missing = [t for t in _SPECIAL_TOKENS if t not in line_tokenizer.vocab]
    if missing:
        raise InputError("vocab file %s lacks %s" % (opts.vocab_file, ", ".join(missing)))
    startup.warn_if_case_mismatch(line_tokenizer.vocab, opts.vocab_file, opts.do_lower_case)
    logging.info("*** Reading from %d input files (%s tokenizer) ***",
                 len(input_files), line_tokenizer.kind)
    for path in input_files:
        logging.info("  %s", path)
    logging.info("*** Writing to output files ***")
    for path in output_files:
        logging.info("  %s", path)
    if opts.pretraining_objective == "ltr":
        logging.info("Left-to-right language model records: unmasked, one segment, no "
                     "next_sentence_labels")
    else:
        logging.info("Chosen word-pieces: %.0f%% [MASK], %.0f%% random, %.0f%% kept; next "
                     "sentence prediction %s", 100 * opts.mask_token_prob,
                     100 * opts.random_token_prob,
                     100 * (1 - opts.mask_token_prob - opts.random_token_prob),
                     "on" if opts.next_sentence_prediction else
                     "off (B continues A; no next_sentence_labels)")

    start = time.monotonic()
    stats = processing.ChunkStats()
    line_blocks = iter_line_blocks(input_files)
    with ShardedRecordWriter(output_files) as writer:
        if opts.chunk_size_mb == 0:
            reading = Progress("reading and tokenizing", total_bytes(input_files), "input bytes")
            documents, num_lines = build_documents(_counted(line_blocks, reading), line_tokenizer)
            processor = processing.ChunkProcessor(opts, line_tokenizer.vocab)
            records, stats = processor(0, documents, num_lines, report=_original_progress(opts))
            writer.write(records)
        else:
            progress = Progress("chunks written", total_bytes(input_files), "input bytes")
            chunks = iter_chunks(line_blocks, int(opts.chunk_size_mb * 1e6))
            done_chars = 0
            for (records, chunk_stats), chunk_chars in _process_chunks(
                    opts, line_tokenizer, chunks, pool):
                writer.write(records)
                done_chars += chunk_chars
                stats.add(chunk_stats)
                progress(done_chars, chunks=stats.num_chunks, documents=stats.num_documents,
                         instances=stats.num_instances)
        if not stats.num_instances:  # Raised inside the writer: no output file appears.
            raise InputError(
                "no instances: input file(s) %s: none of the %d lines read has word-pieces (all "
                "blank or control characters); no output file was written"
                % (describe_files(input_files), stats.num_lines))
    stats.seconds = time.monotonic() - start
    logging.info("Wrote %d total instances from %d documents (%d lines, %d chunks) in %.1fs",
                 stats.num_instances, stats.num_documents, stats.num_lines, stats.num_chunks,
                 stats.seconds)
    if opts.max_sequences_per_row > 1:
        pairs, rows, slots = stats.num_instances, stats.num_rows, opts.max_seq_length
        logging.info("Packed %d pairs into %d rows of up to %d (%.2f a row): padding %.1f%% of "
                     "the tokens, %.1f%% unpacked", pairs, rows, opts.max_sequences_per_row,
                     pairs / max(rows, 1), 100 * (1 - stats.num_tokens / max(rows * slots, 1)),
                     100 * (1 - stats.num_tokens / max(pairs * slots, 1)))
    if opts.num_workers > 1:
        # Well below 100%: this process (reading, tokenizing, writing) is the bottleneck.
        busy = stats.worker_cpu_seconds / (opts.num_workers * max(stats.seconds, 1e-9))
        logging.info("Workers were busy %.0f%% of the time (%.1f CPU s)",
                     100.0 * busy, stats.worker_cpu_seconds)
    return stats


def _counted(line_blocks, progress):
    """Passes `line_blocks` through, reporting the characters read to `progress`."""
    done = lines = 0
    for block in line_blocks:
        yield block
        done += sum(map(len, block)) + len(block)
        lines += len(block)
        progress(done, lines=lines)


def _original_progress(opts):
    """Progress callback for the single-chunk run: counts documents over all passes."""
    progress = None

    def report(done, total, instances):
        nonlocal progress
        if progress is None:
            progress = Progress("making instances", total, "documents x dupe_factor")
        progress(done, documents=total // opts.dupe_factor, instances=instances)
    return report


def _process_chunks(opts, line_tokenizer, chunks, pool):
    """Yields ((records, ChunkStats), chunk chars) per chunk, in chunk order.

    One worker runs in this process. More use `pool`, processes that import no TensorFlow; with
    the fast tokenizer this process tokenizes each chunk (one TensorFlow graph, overlapping the
    workers' instance building), else the workers tokenize. At most num_workers + 1 chunks are
    submitted and not yet written, which bounds memory and still keeps every worker busy.
    """
    if opts.num_workers == 1:
        processor = processing.ChunkProcessor(opts, line_tokenizer.vocab)
        for index, (lines, chars) in enumerate(chunks):
            yield processor.process_lines(index, line_tokenizer.tokenize_lines(lines)), chars
        return
    parent_tokenizes = line_tokenizer.kind == "fast"
    pending = collections.deque()
    try:
        for index, (lines, chars) in enumerate(chunks):
            payload = line_tokenizer.tokenize_lines(lines) if parent_tokenizes else lines
            pending.append((pool.submit(opts, index, payload), chars))
            if len(pending) > opts.num_workers:
                future, chars = pending.popleft()
                yield future.result(), chars
        while pending:
            future, chars = pending.popleft()
            yield future.result(), chars
    except concurrent.futures.process.BrokenProcessPool as e:
        raise processing.WorkerError(
            "a worker process died (killed, or out of memory: lower --chunk_size_mb or "
            "--num_workers); no output file was written") from e
    finally:
        for future, _ in pending:
            future.cancel()
