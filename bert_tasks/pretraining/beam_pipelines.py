"""create_pretraining_data and build_vocab as Apache Beam pipelines (`--runner`), sharded by file.

    python create_pretraining_data.py --runner=DirectRunner --input_file='text/*.txt' \\
      --output_file=out/wiki.tfrecord --vocab_file=vocab.txt        # out/wiki.tfrecord-0000k-of-N
    python build_vocab.py --runner=DataflowRunner --input_file='gs://b/text/*.txt' \\
      --output_file=gs://b/vocab.txt --beam_pipeline_options="--project=P --region=R ..."

**create_pretraining_data.** One shard per input file: the k-th file of the expanded
`--input_file` (each pattern's matches sorted, as the local path reads them) becomes
`<output_file>-<k:05d>-of-<N:05d>`, and that file holds exactly the bytes that the local path
writes for that one input file with the same flags and `--random_seed` (the original ordering,
or `--chunk_size_mb` chunks of that file): each shard runs `pipeline`'s own code in a Beam
worker. Shards are independent (random next sentences come from the same file), so a corpus
split into many files spreads over any number of workers; each worker holds one file (or one
chunk of it) at a time.

**build_vocab.** Each file's words are counted by a worker (`words.WordCounter`, as the local
path), the counts summed per word by the runner, and each word keeps the place of its first
occurrence (file, then rank within the file). The driver reads the summed counts back in that
order, which is the local path's table order, so the learner sees the same (word, count) list
and learns the same vocab. The counts are exact: when the distinct words exceed the local
table's `2 * --max_input_words`, the pipeline keeps those above the local table's cut-off rule
(chosen on the exact counts), where the local path's counts of the words near the cut-off are
lower bounds (`WordTable`).

Apache Beam is optional (`requirements-beam.txt`); without it a run with `--runner` is refused in
one line naming that file. This module imports neither Beam nor TensorFlow at import time.
"""
import collections
import dataclasses
import os
import shlex
import time
import uuid

from absl import flags
from absl import logging

from bert_runner.flag_ranges import CrossRule, ModeRule, cross, mode

from bert_tasks.pretraining.data.reading import (
    InputError, describe_files, expand_input_files, iter_line_blocks)
from bert_tasks.pretraining.data.writing import check_output_files, read_files

REQUIREMENTS_FILE = "requirements-beam.txt"
_METRICS_NAMESPACE = "bert"


def define_flags():
    """`--runner` and `--beam_pipeline_options` (create_pretraining_data.py, build_vocab.py:
    after their --num_workers, whose local processes a Beam run does not use)."""
    flags.DEFINE_string(
        "runner", "",
        "Empty (default): run here, in this process and --num_workers processes. A Beam runner "
        "(DirectRunner, DataflowRunner, FlinkRunner, SparkRunner, PortableRunner): run as an "
        "Apache Beam pipeline, one shard per input file (pip install -r %s)." % REQUIREMENTS_FILE)
    flags.DEFINE_string(
        "beam_pipeline_options", "",
        "Beam pipeline options for --runner, as on a command line, e.g. \"--project=P "
        "--region=R --temp_location=gs://b/tmp\" (Dataflow), \"--flink_master=host:8081 "
        "--parallelism=16\" (Flink), \"--direct_num_workers=2 --direct_running_mode="
        "multi_processing\" (DirectRunner on 2 cores).")
    cross(CrossRule(
        ("runner", "num_workers"),
        lambda runner, workers: not runner or workers == 1,
        lambda runner, workers: (f"--num_workers={workers} is for runs here; --runner={runner} "
                                 "runs on the runner's workers: set them in "
                                 "--beam_pipeline_options"),
        "with --runner, set the runner's workers in --beam_pipeline_options"))
    mode(ModeRule(("beam_pipeline_options",), ("runner",), bool, "with --runner",
                  "a run here takes no Beam options"))


class BeamMissing(ValueError):
    """`--runner` without Apache Beam installed (a refusal: one line, exit code 2)."""


def _beam(runner):
    try:
        import apache_beam
    except ImportError as e:
        raise BeamMissing("--runner=%s needs Apache Beam, which is not installed: pip install -r "
                          "%s" % (runner, REQUIREMENTS_FILE)) from e
    return apache_beam


def pipeline_options(runner, beam_pipeline_options=""):
    """`PipelineOptions` of `--runner` and the pass-through `--beam_pipeline_options`."""
    from apache_beam.options.pipeline_options import PipelineOptions
    args = shlex.split(beam_pipeline_options)
    options = PipelineOptions(["--runner=%s" % runner] + args)
    unknown = [a for a in args if a.startswith("--") and not _known(options, a)]
    if unknown:
        logging.warning("Beam does not know %s (passed on to the runner as they are)",
                        " ".join(unknown))
    return options


def _known(options, arg):
    name = arg[2:].split("=", 1)[0].replace("-", "_")
    return name in options.get_all_options(retain_unknown_options=False)


def _counter(name):
    from apache_beam.metrics import Metrics
    return Metrics.counter(_METRICS_NAMESPACE, name)


def _metric_totals(result):
    """{counter name: committed (or, where the runner has none, attempted) total}."""
    from apache_beam.metrics.metric import MetricsFilter
    totals = {}
    for counter in result.metrics().query(
            MetricsFilter().with_namespace(_METRICS_NAMESPACE))["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        totals[counter.key.metric.name] = totals.get(counter.key.metric.name, 0) + value
    return totals


# create_pretraining_data.


def shard_output_files(output_file, num_shards):
    """The output of each input file: `<output_file>-<k:05d>-of-<N:05d>` (Beam's shard names)."""
    return ["%s-%05d-of-%05d" % (output_file, k, num_shards) for k in range(num_shards)]


@dataclasses.dataclass
class ShardStats(object):
    """What a Beam run of create_pretraining_data did (summed over shards)."""
    num_shards: int = 0
    num_lines: int = 0
    num_documents: int = 0
    num_instances: int = 0
    seconds: float = 0.0


def make_pretraining_data(opts, runner, beam_pipeline_options=""):
    """create_pretraining_data on Beam: one output per input file (see the module docstring).

    Args:
      opts: `pipeline.Options`; `num_workers` must be 1 (the runner's workers do the work).
      runner, beam_pipeline_options: the flags.
    Returns:
      `ShardStats`.
    Raises:
      BeamMissing, InputError (flags, inputs, outputs, vocab: before the pipeline starts).
    """
    from bert_tasks.pretraining.data import pipeline
    pipeline.check_options(opts)  # the flags first: refused as they are, with or without Beam
    if opts.num_workers != 1:
        raise InputError("--num_workers=%d with --runner=%s: the runner's workers do the work; "
                         "set them in --beam_pipeline_options" % (opts.num_workers, runner))
    if "," in opts.output_file:
        raise InputError("--output_file=%s with --runner: one name, to which each input file's "
                         "shard number is appended (-00000-of-0000N)" % opts.output_file)
    beam = _beam(runner)
    input_files = expand_input_files(opts.input_file)
    output_files = shard_output_files(opts.output_file, len(input_files))
    check_output_files(output_files, pipeline.files_read(opts, input_files))
    _check_vocab(opts.vocab_file)
    logging.info("*** Beam (%s): %d input files -> %s-*-of-%05d ***", runner, len(input_files),
                 opts.output_file, len(input_files))
    start = time.monotonic()
    with beam.Pipeline(options=pipeline_options(runner, beam_pipeline_options)) as p:
        _ = (p
             | "Shards" >> beam.Create(list(zip(input_files, output_files)))
             | "Spread" >> beam.Reshuffle()
             | "MakeShard" >> beam.Map(make_shard, opts))
    stats = ShardStats(len(input_files), seconds=time.monotonic() - start)
    for name, value in _metric_totals(p.result).items():
        if hasattr(stats, "num_" + name):
            setattr(stats, "num_" + name, value)
    logging.info("Wrote %d instances from %d documents (%d lines) to %d shards in %.1fs "
                 "(%.0f instances/s)", stats.num_instances, stats.num_documents, stats.num_lines,
                 stats.num_shards, stats.seconds, stats.num_instances / max(stats.seconds, 1e-9))
    return stats


def _check_vocab(vocab_file):
    """The vocab's special tokens, checked here rather than in each worker."""
    from vocab import tokenization
    from bert_tasks.pretraining.data.pipeline import _SPECIAL_TOKENS
    try:
        vocab = tokenization.load_vocab(vocab_file)
    except OSError as e:
        raise InputError("--vocab_file %s: %s" % (vocab_file, e.strerror or e)) from e
    missing = [t for t in _SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise InputError("vocab file %s lacks %s" % (vocab_file, ", ".join(missing)))


def make_shard(shard, opts):
    """In a Beam worker: the local path on one (input file, output file) (the same code, flags
    and seed)."""
    from bert_tasks.pretraining.data import pipeline
    input_file, output_file = shard
    stats = pipeline._run(opts, [input_file], [output_file], None)
    for name in ("lines", "documents", "instances"):
        _counter(name).inc(getattr(stats, "num_" + name))
    return output_file


# build_vocab.


def count_words(opts, runner, beam_pipeline_options=""):
    """The word counts of the input, as the local path's `WordTable.counts` (same order).

    Args:
      opts: `building.Options` (`max_input_lines` must be 0, `num_workers` 1).
    Returns:
      (collections.Counter in the local table's order, {"lines": n, "words": n, "cutoff": c}):
      `cutoff` > 0 when words at or below that count were left out (more distinct words than
      `2 * max_input_words`).
    """
    if opts.max_input_lines:  # the flags first: refused as they are, with or without Beam
        raise InputError("--max_input_lines=%d with --runner=%s: a prefix of the input is "
                         "sequential; take it with head before the run" %
                         (opts.max_input_lines, runner))
    if opts.num_workers != 1:
        raise InputError("--num_workers=%d with --runner=%s: the runner's workers do the work; "
                         "set them in --beam_pipeline_options" % (opts.num_workers, runner))
    beam = _beam(runner)
    input_files = expand_input_files(opts.input_file)
    check_output_files([opts.output_file],
                       read_files("--input_file", opts.input_file, input_files))
    capacity = 2 * opts.max_input_words
    counts_prefix = _join(os.path.dirname(opts.output_file) or ".",
                          ".%s.%s.word_counts" % (os.path.basename(opts.output_file),
                                                  uuid.uuid4().hex[:8]))
    logging.info("*** Beam (%s): counting words (%s) in %d input files: %s ***", runner,
                 "uncased" if opts.do_lower_case else "cased", len(input_files),
                 describe_files(input_files))
    try:
        with beam.Pipeline(options=pipeline_options(runner, beam_pipeline_options)) as p:
            counts = (p
                      | "Files" >> beam.Create(list(enumerate(input_files)))
                      | "Spread" >> beam.Reshuffle()
                      | "Count" >> beam.FlatMap(file_word_counts, opts.do_lower_case)
                      | "Sum" >> beam.CombinePerKey(sum_counts))
            cutoff = (counts
                      | "CountOfCounts" >> beam.Map(lambda kv: (kv[1][0], 1))
                      | "SumCountOfCounts" >> beam.CombinePerKey(sum)
                      | "Histogram" >> beam.combiners.ToList()
                      | "Cutoff" >> beam.Map(table_cutoff, capacity))
            _ = (counts
                 | "Keep" >> beam.Filter(lambda kv, c: kv[1][0] > c, beam.pvalue.AsSingleton(cutoff))
                 | "Format" >> beam.MapTuple(
                     lambda word, v: "%d\t%d\t%d\t%s" % (v[1][0], v[1][1], v[0], word))
                 | "Write" >> beam.io.WriteToText(counts_prefix)
                 )
            _ = cutoff | "WriteCutoff" >> beam.io.WriteToText(counts_prefix + "-cutoff")
        totals = _metric_totals(p.result)
        table, cut = _read_counts(counts_prefix)
    finally:
        _remove_matches(counts_prefix + "*")
    info = {"lines": totals.get("lines", 0), "words": totals.get("words", 0), "cutoff": cut}
    return table, info


def _join(directory, name):
    from apache_beam.io.filesystems import FileSystems
    return FileSystems.join(directory, name)


def file_word_counts(indexed_file, do_lower_case):
    """In a Beam worker: (word, (count, (file_index, rank of first occurrence))) for one
    (file_index, path).

    Blocks of lines joined by newlines, as the local path (`building._text_blocks`); the
    Counter keeps first occurrences in order, so its rank orders words as the local table.
    """
    from bert_tasks.pretraining.vocab_building import words
    file_index, path = indexed_file
    counts, lines = collections.Counter(), 0
    for block in iter_line_blocks([path]):
        counts.update(words.count_words("\n".join(block), do_lower_case))
        lines += len(block)
    _counter("lines").inc(lines)
    _counter("words").inc(sum(counts.values()))
    for rank, (word, count) in enumerate(counts.items()):
        yield word, (count, (file_index, rank))


def sum_counts(values):
    """Combines (count, first place) values: counts summed, the earliest place kept."""
    total, first = 0, None
    for count, place in values:
        total += count
        first = place if first is None or place < first else first
    return total, first


def table_cutoff(histogram, capacity):
    """The count at or below which words are left out: 0 when the distinct words fit in
    `capacity`, else `WordTable`'s rule on exact counts (the lowest cut-off that leaves at
    most capacity // 2 words).

    Args:
      histogram: list of (count, number of distinct words with that count).
    """
    distinct = sum(n for _, n in histogram)
    if distinct <= capacity:
        return 0
    num_drop, dropped = distinct - capacity // 2, 0
    for count, n in sorted(histogram):
        dropped += n
        if dropped >= num_drop:
            return count
    return max(count for count, _ in histogram)


def _read_counts(prefix):
    """The Counter of the written counts, in first-occurrence order, and the cut-off."""
    from apache_beam.io.filesystems import FileSystems
    rows = []
    cutoff = 0
    for path in _matches(prefix + "-cutoff*"):
        with FileSystems.open(path) as f:
            text = f.read().decode("utf-8").strip()
            cutoff = int(text) if text else cutoff
    for path in _matches(prefix + "-[0-9]*"):
        with FileSystems.open(path) as f:
            for line in f.read().decode("utf-8").splitlines():
                file_index, rank, count, word = line.split("\t", 3)
                rows.append(((int(file_index), int(rank)), word, int(count)))
    rows.sort()
    return collections.Counter({word: count for _, word, count in rows}), cutoff


def _matches(pattern):
    from apache_beam.io.filesystems import FileSystems
    return sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)


def _remove_matches(pattern):
    from apache_beam.io.filesystems import FileSystems
    paths = _matches(pattern)
    if paths:
        FileSystems.delete(paths)


def build_vocab(opts, runner, beam_pipeline_options=""):
    """build_vocab with the words counted on Beam; the rest as the local path. Returns
    `building.BuildStats`."""
    from bert_tasks.pretraining.vocab_building import building
    from bert_tasks.pretraining.vocab_building.word_table import WordTable
    start = time.monotonic()
    building.check_options(opts)
    counts, info = count_words(opts, runner, beam_pipeline_options)
    input_files = expand_input_files(opts.input_file)
    if not counts:
        raise InputError("input file(s) %s: no words in %d lines"
                         % (describe_files(input_files), info["lines"]))
    table = WordTable(2 * opts.max_input_words)
    table.counts, table.max_dropped_count = counts, info["cutoff"]
    logging.info("%d lines, %d words, %d distinct%s", info["lines"], info["words"], len(counts),
                 "" if not info["cutoff"] else
                 "; words seen at most %d times were left out (more than 2 x --max_input_words "
                 "distinct words), the counts kept are exact" % info["cutoff"])
    stats = building.BuildStats(num_lines=info["lines"], num_words=info["words"],
                                num_distinct_words=len(counts))
    return building.learn_and_write(opts, input_files, table, stats, start)
