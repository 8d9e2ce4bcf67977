"""build_vocab end to end: check the flags, stream the text into word counts, learn, write.

Memory is bounded by **streaming**: every line of the input is read once, in blocks of about
1 MB, and only word counts are kept, in a `WordTable` of at most `2 * max_input_words` words,
never the text. `max_input_lines` stops after the first lines of the input (a prefix, not a
random sample) for a quicker vocab from the head of a corpus whose files are in random order.
With `num_workers > 1` the blocks are split into words by that many processes while this one
reads and merges.
"""
import collections
import concurrent.futures
import dataclasses
import multiprocessing
import os
import time

from absl import logging

from bert_tasks.pretraining.data.pipeline import Progress
from bert_tasks.pretraining.data.processing import WorkerError, _exit_with_parent
from bert_tasks.pretraining.data.reading import (
    InputError, describe_files, expand_input_files, iter_line_blocks, total_bytes)
from bert_tasks.pretraining.data.writing import check_output_files, read_files
from bert_tasks.pretraining.vocab_building import layout, learner, words
from bert_tasks.pretraining.vocab_building.word_table import WordTable


@dataclasses.dataclass(frozen=True)
class Options(object):
    """The flags of `build_vocab.py` (see its definitions for their meaning)."""
    input_file: str
    output_file: str
    vocab_size: int = 30522
    do_lower_case: bool = True
    num_unused: int = layout.ORIGINAL_NUM_UNUSED
    reserved_tokens: str = ""
    max_input_lines: int = 0
    max_input_words: int = 1_000_000
    min_count: int = 10
    max_unique_chars: int = 1000
    num_workers: int = 1

    def extra_reserved(self):
        """`--reserved_tokens` as a list (comma-separated; empty entries ignored)."""
        return [t for t in self.reserved_tokens.split(",") if t]


@dataclasses.dataclass
class BuildStats(object):
    """What a run did (`run` returns it)."""
    num_lines: int = 0
    num_words: int = 0  # word occurrences counted
    num_distinct_words: int = 0  # in the table at the end
    vocab_size: int = 0  # lines written
    num_reserved: int = 0
    learn: learner.LearnResult = None
    seconds: float = 0.0


def check_options(opts):
    """Raises InputError naming the flag for values that cannot work, before any work."""
    num_reserved = len(layout.reserved_tokens(opts.num_unused, opts.extra_reserved()))
    checks = [
        (opts.num_unused >= 0, "--num_unused=%d must be >= 0" % opts.num_unused),
        (opts.vocab_size > num_reserved,
         "--vocab_size=%d leaves no room for learned tokens after the %d reserved ones ([PAD], "
         "%d [unused*], [UNK] [CLS] [SEP] [MASK] and %d --reserved_tokens)"
         % (opts.vocab_size, num_reserved, opts.num_unused, len(opts.extra_reserved()))),
        (opts.max_input_lines >= 0, "--max_input_lines=%d must be >= 0 (0: all lines)"
         % opts.max_input_lines),
        (opts.max_input_words >= 1, "--max_input_words=%d must be >= 1" % opts.max_input_words),
        (opts.min_count >= 1, "--min_count=%d must be >= 1" % opts.min_count),
        (opts.max_unique_chars >= 1, "--max_unique_chars=%d must be >= 1"
         % opts.max_unique_chars),
        (opts.num_workers >= 1, "--num_workers=%d must be >= 1" % opts.num_workers),
    ]
    problems = [message for ok, message in checks if not ok]
    problems += ["--reserved_tokens: " + p
                 for p in layout.check_extra_tokens(opts.extra_reserved(), opts.num_unused)]
    if problems:
        raise InputError("; ".join(problems))


def build_vocab(opts):
    """Builds the vocab file; returns BuildStats.

    Raises:
      InputError: bad flags, missing or unreadable input, input without words, an output that
        cannot be written; all before the output is touched (it is written only when complete).
      WorkerError: a worker process died.
    """
    start = time.monotonic()
    check_options(opts)
    input_files = expand_input_files(opts.input_file)
    check_output_files([opts.output_file],
                       read_files("--input_file", opts.input_file, input_files))
    stats = BuildStats()
    return learn_and_write(opts, input_files, _count_words(opts, input_files, stats), stats, start)


def learn_and_write(opts, input_files, table, stats, start):
    """The vocab learned from `table` (a `WordTable`), written to `opts.output_file`; returns
    `stats` completed (`start`: the run's `time.monotonic()`). `run`'s second half, shared with
    the Beam pipeline (`beam_pipelines`), which counts the words elsewhere."""
    reserved = layout.reserved_tokens(opts.num_unused, opts.extra_reserved())
    stats.num_reserved = len(reserved)
    stats.learn = _learn(opts, input_files, table, reserved)

    tokens = reserved + stats.learn.tokens
    stats.vocab_size = len(tokens)
    from modeling.checkpoint.files import write_text_atomic  # imports TensorFlow, which workers skip
    write_text_atomic(opts.output_file, "".join(t + "\n" for t in tokens))
    stats.seconds = time.monotonic() - start
    logging.info("Wrote %s: %d tokens (%d reserved, %d learned, among them %d characters alone "
                 "and after ##; count threshold %d, %d learner calls) in %.1fs", opts.output_file,
                 stats.vocab_size, len(reserved), len(stats.learn.tokens), stats.learn.num_chars,
                 stats.learn.threshold, stats.learn.calls, stats.seconds)
    return stats


def _count_words(opts, input_files, stats):
    """The WordTable of the input; sets the counts in `stats`."""
    logging.info("*** Counting words (%s) in %d input files: %s ***",
                 "uncased" if opts.do_lower_case else "cased", len(input_files),
                 describe_files(input_files))
    table = WordTable(2 * opts.max_input_words)
    for counts, lines in _counted_blocks(opts, input_files):
        table.add(counts)
        stats.num_lines += lines
        stats.num_words += sum(counts.values())
    stats.num_distinct_words = len(table)
    if not table.counts:
        raise InputError("input file(s) %s: no words in %d lines"
                         % (describe_files(input_files), stats.num_lines))
    logging.info("%d lines, %d words, %d distinct%s", stats.num_lines, stats.num_words,
                 stats.num_distinct_words,
                 "" if not table.max_dropped_count else
                 "; the table was cut %d times, counts up to %d may be low by that much"
                 % (table.num_pruned, table.max_dropped_count))
    return table


def _learn(opts, input_files, table, reserved):
    """The learner's LearnResult for the slots after `reserved`; errors name the input."""
    size = opts.vocab_size - len(reserved)
    logging.info("*** Learning %d tokens (tensorflow-text's learner) ***", size)
    try:
        result = learner.learn_vocab(
            table.counts.items(), size, exclude=reserved, min_count=opts.min_count,
            max_input_words=opts.max_input_words, max_unique_chars=opts.max_unique_chars)
    except learner.TooManyCharacters as e:
        raise InputError(
            "input file(s) %s: --vocab_size=%d cannot hold the %d reserved tokens and the %d "
            "tokens of the %d characters of the words (each alone and after ##): raise it to at "
            "least %d, or lower --max_unique_chars"
            % (describe_files(input_files), opts.vocab_size, len(reserved), e.needed,
               e.num_chars, len(reserved) + e.needed)) from e
    except learner.LearnerError as e:
        raise InputError("input file(s) %s: %s" % (describe_files(input_files), e)) from e
    if result.short_by:
        logging.warning(
            "the text gives only %d tokens at --min_count=%d: %s has %d lines, not "
            "--vocab_size=%d (more text or a lower --min_count gives more)",
            len(result.tokens), opts.min_count, opts.output_file,
            opts.vocab_size - result.short_by, opts.vocab_size)
    return result


def _text_blocks(opts, input_files):
    """Yields (text of about 1 MB of lines, number of lines, UTF-8 bytes) to `max_input_lines`."""
    left = opts.max_input_lines or float("inf")
    for lines in iter_line_blocks(input_files):
        if len(lines) > left:
            lines = lines[:int(left)]
        text = "\n".join(lines)
        yield text, len(lines), len(text.encode("utf-8")) + 1
        left -= len(lines)
        if left <= 0:
            return


def _counted_blocks(opts, input_files):
    """Yields (Counter of words, number of lines) per block of text, logging progress."""
    if opts.max_input_lines:
        progress = Progress("counting words", opts.max_input_lines, "--max_input_lines")
    else:
        progress = Progress("counting words", total_bytes(input_files), "input bytes")
    done_lines = done_bytes = 0
    for counts, lines, size in _count(opts, _text_blocks(opts, input_files)):
        done_lines += lines
        done_bytes += size
        elapsed = max(time.monotonic() - progress.start, 1e-9)
        progress(done_lines if opts.max_input_lines else done_bytes, lines=done_lines,
                 **{"lines/s": done_lines / elapsed})
        yield counts, lines


def _count(opts, blocks):
    """Yields (Counter of words, lines, bytes) per block, in this process or in workers."""
    if opts.num_workers == 1:
        for text, lines, size in blocks:
            yield words.count_words(text, opts.do_lower_case), lines, size
        return
    # Workers are spawned: this process may have imported TensorFlow, which is not fork-safe.
    executor = concurrent.futures.ProcessPoolExecutor(
        opts.num_workers, mp_context=multiprocessing.get_context("spawn"),
        initializer=_exit_with_parent, initargs=(os.getpid(),))
    pending = collections.deque()  # at most 2 blocks per worker in flight: bounded memory
    try:
        for text, lines, size in blocks:
            pending.append((executor.submit(words.count_words, text, opts.do_lower_case),
                            lines, size))
            if len(pending) >= 2 * opts.num_workers:
                future, lines, size = pending.popleft()
                yield future.result(), lines, size
        while pending:
            future, lines, size = pending.popleft()
            yield future.result(), lines, size
    except concurrent.futures.process.BrokenProcessPool as e:
        raise WorkerError("a word-counting worker process died (killed, or out of memory): "
                          "%s" % e) from e
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
