"""create_pretraining_data against the original's records, plus flags, bad input and atomic output.

The fixture runs use the original's flags (fixtures/pretraining_data/commands.txt) and compare every
parsed record (feature names, kinds and values) with the original's TFRecords.
"""
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from bert_tasks.pretraining.data import pipeline
from bert_tasks.pretraining.data.features import FEATURE_NAMES, name_to_features
from bert_tasks.pretraining.data.reading import InputError
import refusals
import vocab
from vocab.tokenization import VocabError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB_FILE = vocab.bundled_vocab_file()
FIXTURE_FLAGS = dict(vocab_file=VOCAB_FILE, do_lower_case=True, max_seq_length=128,
                     max_predictions_per_seq=20, masked_lm_prob=0.15, random_seed=12345,
                     dupe_factor=2)


def read_examples(path):
    """TFRecord file -> list of {feature name: (kind, values)}."""
    examples = []
    for record in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
        example = tf.train.Example.FromString(record)
        examples.append({
            name: (feature.WhichOneof("kind"),
                   list(getattr(feature, feature.WhichOneof("kind")).value))
            for name, feature in example.features.feature.items()})
    return examples


def run(tmp_path, output_name, corpus, **overrides):
    flags = dict(FIXTURE_FLAGS, input_file=str(corpus),
                 output_file=",".join(str(tmp_path / n) for n in output_name.split(",")))
    flags.update(overrides)
    return pipeline.write_records(pipeline.Options(**flags))


@pytest.fixture(scope="module")
def data_dir(fixtures_dir):
    return fixtures_dir / "pretraining_data"


@pytest.fixture(scope="module")
def original_examples(data_dir):
    """{name: read_examples of the original's records <name>.tfrecord}: parsed once for the tests
    that compare with them (pretrain_default's by five)."""
    return {name: read_examples(data_dir / (name + ".tfrecord"))
            for name in ("pretrain_default", "pretrain_wwm", "pretrain_default_shard0",
                         "pretrain_default_shard1")}


@pytest.mark.parametrize("tokenizer", ["faithful", "auto"])
@pytest.mark.parametrize("name,overrides", [("pretrain_default", {}),
                                            ("pretrain_wwm", {"do_whole_word_mask": True})])
def test_records_equal_the_original(tmp_path, data_dir, original_examples, name, overrides,
                                   tokenizer):
    stats = run(tmp_path, "out.tfrecord", data_dir / "corpus.txt", tokenizer=tokenizer, **overrides)
    ours = read_examples(tmp_path / "out.tfrecord")
    original = original_examples[name]
    assert len(ours) == len(original) == stats.num_instances
    for i, (a, b) in enumerate(zip(ours, original)):
        assert a == b, "record %d differs" % i
    assert sorted(ours[0]) == sorted(FEATURE_NAMES)


def test_two_shards_round_robin_equal_the_original(tmp_path, data_dir, original_examples):
    run(tmp_path, "s0.tfrecord,s1.tfrecord", data_dir / "corpus.txt")
    for shard in (0, 1):
        assert (read_examples(tmp_path / ("s%d.tfrecord" % shard))
                == original_examples["pretrain_default_shard%d" % shard])
    assert sorted(os.listdir(tmp_path)) == ["s0.tfrecord", "s1.tfrecord"]  # no temporaries left


def test_name_to_features_parses_the_original_records(data_dir):
    spec = name_to_features(128, 20)
    dataset = tf.data.TFRecordDataset(str(data_dir / "pretrain_default.tfrecord")).batch(200)
    parsed = tf.io.parse_example(next(iter(dataset)), spec)
    assert parsed["input_ids"].shape == (118, 128)
    assert parsed["masked_lm_weights"].dtype == tf.float32
    assert parsed["next_sentence_labels"].shape == (118, 1)


def _write(path, text, mode="w"):
    with open(path, mode) as f:
        f.write(text)
    return path


def test_files_are_one_line_stream_and_glob_matches_are_sorted(tmp_path, data_dir,
                                                              original_examples):
    """Splitting the corpus into globbed files (no blank line at the cut) changes nothing."""
    with open(data_dir / "corpus.txt", "rb") as f:
        lines = f.read().split(b"\n")
    cut = 100
    assert lines[cut - 1].strip() and lines[cut].strip()  # cut inside a document
    _write(tmp_path / "part_b.txt", b"\n".join(lines[:cut]) + b"\n", "wb")
    _write(tmp_path / "part_c.txt", b"\n".join(lines[cut:]), "wb")
    run(tmp_path, "out.tfrecord", str(tmp_path / "part_*.txt"))
    assert read_examples(tmp_path / "out.tfrecord") == original_examples["pretrain_default"]


def test_crlf_is_dropped_like_gfile(tmp_path, data_dir, original_examples):
    with open(data_dir / "corpus.txt", "rb") as f:
        text = f.read()
    _write(tmp_path / "crlf.txt", text.replace(b"\n", b"\r\n"), "wb")
    run(tmp_path, "out.tfrecord", tmp_path / "crlf.txt")
    assert read_examples(tmp_path / "out.tfrecord") == original_examples["pretrain_default"]


def test_degenerate_documents(tmp_path):
    """Empty file, blank-only file, control-only lines, a one-sentence and a very long sentence."""
    _write(tmp_path / "a_empty.txt", "")
    _write(tmp_path / "b_blank.txt", "\n  \t\n\n")
    long_sentence = " ".join(["word"] * 400)
    _write(tmp_path / "c.txt", "\x00\u200b\n\nOnly one sentence here.\n\n%s\n\x00\nShort end.\n"
           % long_sentence)
    stats = run(tmp_path, "out.tfrecord", str(tmp_path / "*.txt"), dupe_factor=3,
                max_seq_length=32, max_predictions_per_seq=5)
    assert stats.num_documents == 2
    examples = read_examples(tmp_path / "out.tfrecord")
    assert len(examples) == stats.num_instances > 3
    for example in examples:
        assert sum(example["input_mask"][1]) <= 32
        assert len(example["input_ids"][1]) == 32


@pytest.mark.parametrize("chunk_size_mb", [0.0, 0.001])
def test_input_without_text_fails_naming_the_files(tmp_path, chunk_size_mb):
    """Empty, blank-only and control-character files make no instance: an error, no output."""
    _write(tmp_path / "a_empty.txt", "")
    _write(tmp_path / "b_blank.txt", "\n  \t\n\n" * 200)
    _write(tmp_path / "c_control.txt", "\x00\u200b\n\x01\n")
    inputs = sorted(os.listdir(tmp_path))
    with pytest.raises(InputError, match=r"no instances: input file\(s\) .*a_empty\.txt, .*"
                       r"b_blank\.txt, .*c_control\.txt: none of the 602 lines read has "
                       r"word-pieces.*no output file was written"):
        run(tmp_path, "out.tfrecord,out2.tfrecord", str(tmp_path / "*.txt"),
            chunk_size_mb=chunk_size_mb)
    assert sorted(os.listdir(tmp_path)) == inputs


@pytest.mark.parametrize("overrides,message", [
    ({"input_file": "/nonexistent/*.txt"}, "matches no file"),
    ({"input_file": "/tmp"}, re.escape("'/tmp' is a directory: give the files in it (e.g. "
                                       "'/tmp/*')")),
    ({"vocab_file": "/nonexistent/vocab.txt"}, "vocab"),
    ({"output_file": "/nonexistent/dir/out.tfrecord"}, "does not exist"),
    ({"output_file": "/sys/out.tfrecord"}, refusals.message("output-file-not-writable")),
    ({"max_predictions_per_seq": 126}, "max_predictions_per_seq"),
    ({"max_seq_length": 4}, "max_seq_length"),
    ({"masked_lm_prob": 1.5}, "masked_lm_prob"),
    ({"num_workers": 2}, "chunk_size_mb"),
])
def test_bad_flags_fail_before_any_work(tmp_path, data_dir, overrides, message):
    flags = dict(FIXTURE_FLAGS, input_file=str(data_dir / "corpus.txt"),
                 output_file=str(tmp_path / "out.tfrecord"))
    flags.update(overrides)
    with pytest.raises((InputError, VocabError), match=message):
        pipeline.write_records(pipeline.Options(**flags))
    assert os.listdir(tmp_path) == []


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = _write(tmp_path / "bad.txt", b"fine line.\n\nsecond \xff line.\n", "wb")
    with pytest.raises(InputError, match=r"bad\.txt line 3: invalid UTF-8 byte 0xff at column 8"):
        run(tmp_path, "out.tfrecord", path)
    assert os.listdir(tmp_path) == ["bad.txt"]


def _cli(*args):
    return [sys.executable, os.path.join(ROOT, "create_pretraining_data.py"),
            "--vocab_file=" + VOCAB_FILE] + list(args)


def test_an_output_file_that_is_an_input_is_refused(tmp_path, data_dir, monkeypatch):
    """--output_file=--input_file (or the vocab) exited 0 having replaced it with records."""
    text = (data_dir / "corpus.txt").read_bytes()
    corpus = _write(tmp_path / "a.txt", text, "wb")
    process = subprocess.run(_cli("--input_file=%s" % corpus, "--output_file=%s" % corpus),
                             capture_output=True, text=True)
    refusals.assert_refused(process, "output-file-is-input")
    assert "--input_file=%s" % corpus in process.stderr
    assert corpus.read_bytes() == text
    # Any of several outputs, any input of a list or a glob, any spelling of the path; the vocab.
    vocab_copy = _write(tmp_path / "vocab.txt", open(VOCAB_FILE, "rb").read(), "wb")
    os.symlink(corpus, tmp_path / "link.txt")
    os.link(corpus, tmp_path / "hard.txt")
    monkeypatch.chdir(tmp_path)
    for input_file, output_file in (
            ("b.txt,a.txt", "out.tfrecord,./a.txt"),
            ("*.txt", "out.tfrecord,sub/../a.txt"),
            ("a.txt", "link.txt"),
            ("a.txt", "hard.txt"),
            ("link.txt", str(corpus)),
            ("a.txt", "vocab.txt")):
        _write(tmp_path / "b.txt", "More text.\n")
        (tmp_path / "sub").mkdir(exist_ok=True)
        options = dict(FIXTURE_FLAGS, input_file=input_file, output_file=output_file,
                       vocab_file=str(vocab_copy))
        with pytest.raises(InputError, match=re.escape(refusals.message("output-file-is-input"))):
            pipeline.write_records(pipeline.Options(**options))
        assert corpus.read_bytes() == text and vocab_copy.read_bytes() == open(
            VOCAB_FILE, "rb").read()
        assert not (tmp_path / "out.tfrecord").exists()
    with pytest.raises(InputError, match=re.escape("--vocab_file=%s" % vocab_copy)):
        pipeline.write_records(pipeline.Options(**dict(options, output_file=str(vocab_copy))))


def _start_long_run(tmp_path, data_dir, *args):
    """Starts the CLI on 40 copies of the fixture corpus at dupe_factor 50 (a run long enough to
    be killed); returns (process, output path in its own directory)."""
    big = tmp_path / "big.txt"
    if not big.exists():
        with open(data_dir / "corpus.txt") as f:
            _write(big, f.read() * 40)
    out = tmp_path / "out" / "data.tfrecord"
    out.parent.mkdir(exist_ok=True)
    process = subprocess.Popen(
        _cli("--input_file=%s" % big, "--output_file=%s" % out, "--dupe_factor=50", *args),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return process, out


def test_killed_run_leaves_no_output(tmp_path, data_dir, caplog):
    """SIGTERM mid-run: temporaries are removed at once; SIGKILL: the output name never exists,
    and the next run removes the leftover temporary."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        process, out = _start_long_run(tmp_path, data_dir, "--tokenizer=faithful")
        # The run first probes that the directory is writable (a short-lived temporary file).
        leftover = ".data.tfrecord.%d.incomplete" % process.pid
        deadline = time.time() + 60
        while leftover not in os.listdir(out.parent) and time.time() < deadline:
            time.sleep(0.05)
        assert process.poll() is None, "run finished before it could be killed"
        assert os.listdir(out.parent) == [leftover]
        process.send_signal(sig)
        process.wait(30)
        assert not out.exists()
        if sig == signal.SIGTERM:
            assert os.listdir(out.parent) == []
    caplog.set_level("INFO")
    run(tmp_path / "out", "data.tfrecord", data_dir / "tiny_corpus.txt", dupe_factor=1)
    assert os.listdir(out.parent) == ["data.tfrecord"]
    assert any("removed" in m and "process" in m and "no longer running" in m
               for m in caplog.messages)


def test_stale_temporaries_of_live_processes_and_other_names_are_kept(tmp_path, data_dir):
    dead = subprocess.Popen(["true"])
    dead.wait()
    live = subprocess.Popen(["sleep", "60"])
    try:
        names = [".out.tfrecord.%d.incomplete" % dead.pid, ".out.tfrecord.%d.incomplete" % live.pid,
                 ".other.tfrecord.%d.incomplete" % dead.pid, ".out.tfrecord.x.incomplete"]
        for name in names:
            _write(tmp_path / name, "partial")
        run(tmp_path, "out.tfrecord", data_dir / "tiny_corpus.txt", dupe_factor=1)
    finally:
        live.kill()
        live.wait()
    assert sorted(os.listdir(tmp_path)) == sorted(names[1:] + ["out.tfrecord"])


def _alive(pid):
    """Whether process `pid` exists and is not a zombie (Linux /proc)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            return not any(line.startswith("State:\tZ") for line in f)
    except FileNotFoundError:
        return False


@pytest.mark.large
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_exit_when_the_run_is_killed(tmp_path, data_dir):
    """SIGKILL of a run with workers: no output, and the workers do not linger."""
    process, out = _start_long_run(tmp_path, data_dir, "--chunk_size_mb=0.05", "--num_workers=2")
    children_file = "/proc/%d/task/%d/children" % (process.pid, process.pid)
    children = []
    deadline = time.time() + 60
    while time.time() < deadline and process.poll() is None:
        with open(children_file) as f:
            children = [int(pid) for pid in f.read().split()]
        if len(children) >= 2 and os.listdir(out.parent):  # workers (and resource tracker) up
            break
        time.sleep(0.05)
    assert process.poll() is None, "run finished before it could be killed"
    process.kill()
    process.wait(30)
    deadline = time.time() + 15  # workers look for their parent every second
    while any(map(_alive, children)) and time.time() < deadline:
        time.sleep(0.1)
    assert not any(map(_alive, children))
    assert not out.exists()


def test_cli_original_command(tmp_path, data_dir, original_examples):
    """The original README-style command line works unchanged."""
    out = tmp_path / "out.tfrecord"
    result = subprocess.run(
        _cli("--input_file=%s" % (data_dir / "corpus.txt"), "--output_file=%s" % out,
             "--do_lower_case=True", "--max_seq_length=128", "--max_predictions_per_seq=20",
             "--masked_lm_prob=0.15", "--random_seed=12345", "--dupe_factor=2",
             "--tokenizer=faithful"),
        capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert read_examples(out) == original_examples["pretrain_default"]
    bad = subprocess.run(_cli("--input_file=/nonexistent.txt", "--output_file=%s" % out),
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "matches no file" in bad.stderr
    # Input without instances is the same InputError (exit 2 like the one above), here in process.
    blank = _write(tmp_path / "blank.txt", "\n\n")
    with pytest.raises(InputError, match=re.escape("no instances: input file(s) %s" % blank)):
        run(tmp_path, "e", blank)
    assert not (tmp_path / "e").exists()


@pytest.mark.parametrize("chunk_size_mb", [0.0, 0.005])
def test_progress_logging(tmp_path, data_dir, monkeypatch, caplog, chunk_size_mb):
    monkeypatch.setattr(pipeline, "_PROGRESS_SECONDS", 0.0)
    caplog.set_level("INFO")
    run(tmp_path, "out.tfrecord", data_dir / "corpus.txt", chunk_size_mb=chunk_size_mb)
    progress = [m for m in caplog.messages if "instances/s" in m]
    assert progress and all("ETA" in m and "documents" in m for m in progress)
    assert any(m.startswith("Wrote ") and "total instances" in m for m in caplog.messages)
