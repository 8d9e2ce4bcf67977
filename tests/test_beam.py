"""create_pretraining_data.py / build_vocab.py --runner: the Beam pipelines write, shard for shard,
what the local path writes (records byte for byte; word counts in the same order, so the same
vocab). One small DirectRunner run per tool (module fixtures), in the large tier, skipped without
apache-beam (requirements-beam.txt); the refusals in the default tier, with or without it."""
import collections
import os
import sys

import pytest

from bert_tasks.pretraining import beam_pipelines
from bert_tasks.pretraining.data import corpus, pipeline
from bert_tasks.pretraining.vocab_building import building
from bert_tasks.pretraining.vocab_building.word_table import WordTable
from conftest import ROOT
from optional_packages import require
from refusals import message

VOCAB = str(ROOT / "vocab" / "uncased_L-12_H-768_A-12" / "vocab.txt")
SHARD_LINES = (150, 170, 120)  # about 20 KB each, whole documents


def _beam():
    return require("apache_beam")


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Three input files cut at document boundaries from Persuasion, a few hundred lines."""
    text = (ROOT / "data" / "austen" / "persuasion.txt").read_text(encoding="utf-8")
    lines = corpus.gutenberg_to_corpus(text).splitlines()
    folder = tmp_path_factory.mktemp("beam_input")
    paths, start = [], 0
    for k, size in enumerate(SHARD_LINES):
        stop = start + size
        while lines[stop - 1].strip():
            stop += 1
        path = folder / f"part{k}.txt"
        path.write_text("\n".join(lines[start:stop]) + "\n", encoding="utf-8")
        paths.append(str(path))
        start = stop
    return paths


@pytest.fixture(scope="module")
def records(shards, tmp_path_factory):
    """(the Beam run's options and stats, its output prefix) on the three files."""
    _beam()
    out = tmp_path_factory.mktemp("beam_records") / "beam.tfrecord"
    opts = pipeline.Options(input_file=os.path.join(os.path.dirname(shards[0]), "part*.txt"),
                            output_file=str(out), vocab_file=VOCAB, dupe_factor=2,
                            random_seed=7, tokenizer="faithful")
    return opts, beam_pipelines.make_pretraining_data(opts, "DirectRunner"), out


@pytest.mark.large  # apache-beam: the large tier's packages (optional_packages)
def test_each_shard_is_the_local_output_of_its_file(records, shards, tmp_path):
    opts, stats, out = records
    beam_files = beam_pipelines.shard_output_files(str(out), len(shards))
    assert sorted(str(p) for p in out.parent.iterdir()) == beam_files  # no temporaries left
    total = 0
    for path, beam_file in zip(shards, beam_files):
        local = tmp_path / (os.path.basename(path) + ".tfrecord")
        local_stats = pipeline.write_records(pipeline.Options(**{
            **vars(opts), "input_file": path, "output_file": str(local)}))
        beam_bytes = open(beam_file, "rb").read()
        assert beam_bytes and beam_bytes == local.read_bytes(), path
        total += local_stats.num_instances
    assert stats.num_shards == len(shards)
    assert stats.num_instances == total > 0


def _word_counts_of_local_run(shards, opts):
    """The local path's WordTable (its counting step alone)."""
    return building._count_words(opts, shards, building.BuildStats()).counts


@pytest.fixture(scope="module")
def vocabs(shards, tmp_path_factory):
    """(Beam's counts as handed to the learner, local counts, Beam vocab, local vocab)."""
    _beam()
    folder = tmp_path_factory.mktemp("beam_vocab")
    opts = building.Options(input_file=os.path.join(os.path.dirname(shards[0]), "part*.txt"),
                            output_file=str(folder / "beam_vocab.txt"), vocab_size=500,
                            num_unused=99, min_count=2)
    seen = {}
    count_words = beam_pipelines.count_words

    def recording(*args, **kwargs):
        seen["counts"], seen["info"] = count_words(*args, **kwargs)
        return seen["counts"], seen["info"]

    beam_pipelines.count_words = recording
    try:
        beam_pipelines.build_vocab(opts, "DirectRunner")
    finally:
        beam_pipelines.count_words = count_words
    local = building.Options(**{**vars(opts), "output_file": str(folder / "local_vocab.txt")})
    building.build_vocab(local)
    return seen, _word_counts_of_local_run(shards, local), folder


@pytest.mark.large  # apache-beam: the large tier's packages (optional_packages)
def test_word_counts_are_the_local_tables_in_its_order(vocabs):
    seen, local_counts, _ = vocabs
    assert seen["info"]["cutoff"] == 0
    assert list(seen["counts"].items()) == list(local_counts.items())
    assert seen["info"]["words"] == sum(local_counts.values())


@pytest.mark.large  # apache-beam: the large tier's packages (optional_packages)
def test_the_vocab_is_the_local_paths(vocabs):
    _, _, folder = vocabs
    beam_vocab = (folder / "beam_vocab.txt").read_text(encoding="utf-8")
    assert beam_vocab == (folder / "local_vocab.txt").read_text(encoding="utf-8")
    assert len(beam_vocab.splitlines()) == 500
    assert sorted(p.name for p in folder.iterdir()) == ["beam_vocab.txt", "local_vocab.txt"]


def test_the_cutoff_is_the_word_tables_rule():
    # More distinct words than the table holds: the cut-off the pipeline computes from the count
    # histogram leaves exactly the words a WordTable keeps when it prunes the same counts.
    counts = collections.Counter({"w%d" % i: 1 + i % 7 for i in range(50)})
    histogram = collections.Counter(counts.values()).items()
    table = WordTable(20)
    table.add(counts)
    cutoff = beam_pipelines.table_cutoff(list(histogram), 20)
    assert cutoff == table.max_dropped_count > 0
    assert {w for w, c in counts.items() if c > cutoff} == set(table.counts)
    assert beam_pipelines.table_cutoff(list(histogram), 50) == 0


def test_a_runner_without_beam_names_the_requirements_file(monkeypatch, shards, tmp_path):
    monkeypatch.setitem(sys.modules, "apache_beam", None)  # import apache_beam fails
    opts = pipeline.Options(input_file=shards[0], output_file=str(tmp_path / "x"),
                            vocab_file=VOCAB)
    with pytest.raises(beam_pipelines.BeamMissing) as refused:
        beam_pipelines.make_pretraining_data(opts, "DirectRunner")
    assert message("beam-not-installed") in str(refused.value)
    assert beam_pipelines.REQUIREMENTS_FILE == "requirements-beam.txt"
    assert (ROOT / beam_pipelines.REQUIREMENTS_FILE).is_file()
    assert not list(tmp_path.iterdir())


def test_an_output_that_is_an_input_is_refused_before_the_pipeline(monkeypatch, tmp_path):
    """Checked before Beam runs anything (so without apache-beam here): a shard name or the vocab
    that is an input file would be replaced by what is made from it."""
    monkeypatch.setattr(beam_pipelines, "_beam", lambda runner: None)
    text = "Some text here.\nAnd more of it.\n"
    shard = tmp_path / "x-00000-of-00001"
    shard.write_text(text)
    opts = pipeline.Options(input_file=str(shard), output_file=str(tmp_path / "x"),
                            vocab_file=VOCAB)
    with pytest.raises(ValueError, match=message("output-file-is-input")):
        beam_pipelines.make_pretraining_data(opts, "DirectRunner")
    opts = building.Options(input_file=str(tmp_path / "*"), output_file=str(shard))
    with pytest.raises(ValueError, match=message("output-file-is-input")):
        beam_pipelines.build_vocab(opts, "DirectRunner")
    assert shard.read_text() == text and os.listdir(tmp_path) == [shard.name]
