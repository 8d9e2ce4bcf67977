"""A run's output_dir (or a checkpoint in it) as a model on its own: the config and vocabulary
that run used, taken where --bert_config_file and --vocab_file are left out, by every script
(bert_runner.flags.require_model_files, modeling.checkpoint.model_files); a vocabulary that is
gone or changed is refused naming it."""
import json
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from modeling_helpers import TINY, tiny_config
from refusals import assert_refused, message

LINES = TINY / "extract_features" / "input.txt"


def _encoder():
    from modeling import BertModel, checkpoint as checkpoints

    model = BertModel(tiny_config())
    checkpoints.load_checkpoint(model, TINY / "bert_model.ckpt", strict=False)
    return model


def _run_directory(directory, model, record):
    """`directory` as the driver leaves a run: ckpt-1, run.json and bert_config.json."""
    import tensorflow as tf

    from modeling import checkpoint as checkpoints
    from bert_runner.runs import record as run_records

    directory.mkdir(parents=True)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=checkpoints.ModelVariables.of_model(model)), str(directory), 1)
    manager.save(checkpoint_number=1)
    run_records.write_output_dir_record(str(directory), record)
    (directory / "bert_config.json").write_text(tiny_config().to_json_string())
    return directory


def _record(task, start, vocab_file, **settings):
    from bert_runner.runs.hashes import fingerprint

    return {"task": task, "init_checkpoint": str(start), "vocab": fingerprint(str(vocab_file)),
            "do_lower_case": True, **settings}


@pytest.fixture
def runs(tmp_path):
    """A Hugging Face directory and two runs started from it without --vocab_file and
    --bert_config_file: an embedding run (with its sentence_transformers/ copy) and a
    classifier run (whose vocabulary is the directory's alone)."""
    from modeling.checkpoint.hugging_face import save_hf_model

    model = _encoder()
    hf = pathlib.Path(save_hf_model(model, tmp_path / "hf", TINY / "vocab.txt", True))
    embeddings = _run_directory(tmp_path / "embeddings", model, _record(
        "sentence_embeddings", hf, f"{hf}/vocab.txt", max_seq_length=16, pooling="mean",
        normalize=True))
    save_hf_model(model, embeddings / "sentence_transformers", TINY / "vocab.txt", True)
    classifier = _run_directory(tmp_path / "classifier", model, _record(
        "classifier/mrpc", hf, f"{hf}/vocab.txt", max_seq_length=16))
    return hf, embeddings, classifier


def _flag_values(*names):
    from absl import flags

    from bert_runner import flags as run_flags

    values = flags.FlagValues()
    for name in ("bert_config_file", "vocab_file", "init_checkpoint", *names):
        flags.DEFINE_string(name, None, "", flag_values=values)
    run_flags.require_model_files("vocab_file", "bert_config_file", flag_values=values)
    return values


def test_a_run_supplies_the_config_and_vocabulary_it_used(runs):
    from bert_runner.runs.model_files import model_files

    hf, embeddings, classifier = runs
    for given, vocab in ((embeddings / "ckpt-1", embeddings / "sentence_transformers/vocab.txt"),
                         (embeddings, embeddings / "sentence_transformers/vocab.txt"),
                         (classifier, f"{hf}/vocab.txt")):
        values = _flag_values()
        values(["x", f"--init_checkpoint={given}"])
        assert (values.bert_config_file, values.vocab_file) == (
            str(given.parent if given.name == "ckpt-1" else given) + "/bert_config.json",
            str(vocab))
        files = model_files(None, None, str(given), 16)
        assert (files.config_file, files.vocab_file) == (values.bert_config_file, str(vocab))
        assert files.config.to_dict() == tiny_config().to_dict()
    # Given flags are kept; a missing one alone is taken from the run.
    values = _flag_values()
    values(["x", f"--init_checkpoint={classifier}", f"--vocab_file={TINY / 'vocab.txt'}"])
    assert (values.bert_config_file, values.vocab_file) == (
        f"{classifier}/bert_config.json", str(TINY / "vocab.txt"))
    # An evaluation or prediction of the run in its own output_dir, without --init_checkpoint.
    values = _flag_values("output_dir")
    values(["x", f"--output_dir={classifier}"])
    assert (values.bert_config_file, values.vocab_file) == (
        f"{classifier}/bert_config.json", f"{hf}/vocab.txt")
    # A new output_dir holds no run: the flags stay required.
    with pytest.raises(Exception, match=re.escape(message("model-files-required"))):
        _flag_values("output_dir")(["x", f"--output_dir={classifier.parent / 'new'}"])


def test_a_hugging_face_directory_gives_its_casing_unless_the_flag_is_given(runs, tmp_path):
    """A cased directory's text is not lower-cased by --do_lower_case's default (True)."""
    from absl import flags

    from bert_runner import flags as run_flags

    hf = runs[0]
    cased = tmp_path / "cased"
    shutil.copytree(hf, cased)
    (cased / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))

    def parsed(*args):
        values = flags.FlagValues()
        for name in ("bert_config_file", "vocab_file", "init_checkpoint"):
            flags.DEFINE_string(name, None, "", flag_values=values)
        flags.DEFINE_bool("do_lower_case", True, "", flag_values=values)
        run_flags.require_model_files("vocab_file", "bert_config_file", flag_values=values)
        values(["x", *args])
        return values.do_lower_case

    assert parsed(f"--init_checkpoint={cased}") is False
    assert parsed(f"--init_checkpoint={cased / 'model.safetensors'}") is False
    assert parsed(f"--init_checkpoint={cased}", "--do_lower_case=true") is True
    assert parsed(f"--init_checkpoint={hf}") is True  # the tiny model's directory is uncased


def test_a_vocabulary_that_is_gone_or_changed_is_refused_naming_it(runs):
    from absl import flags

    from bert_runner.runs.model_files import model_files

    hf, embeddings, classifier = runs
    # The Hugging Face directory's vocab.txt changed: not the vocabulary the run read.
    (hf / "vocab.txt").write_text((TINY / "vocab.txt").read_text() + "extra\n")
    with pytest.raises(flags.IllegalFlagValueError,
                       match=re.escape(message("run-vocab-missing"))) as error:
        _flag_values()(["x", f"--init_checkpoint={classifier}"])
    assert f"{hf}/vocab.txt hold(s) another vocabulary" in str(error.value)
    (hf / "vocab.txt").unlink()
    with pytest.raises(ValueError, match=re.escape(message("run-vocab-missing"))) as error:
        model_files(None, None, str(classifier))
    assert f"{hf}/vocab.txt, the vocabulary of the Hugging Face directory it started from, " \
           f"no longer exists ({classifier}/run.json)" in str(error.value)
    shutil.rmtree(hf)
    with pytest.raises(flags.IllegalFlagValueError,
                       match=re.escape(message("run-vocab-missing"))) as error:
        _flag_values()(["x", f"--init_checkpoint={classifier}/ckpt-1"])
    assert f"{hf}, the checkpoint it started from, no longer exists" in str(error.value)
    # The embedding run kept a copy of it: still whole.
    values = _flag_values()
    values(["x", f"--init_checkpoint={embeddings}"])
    assert values.vocab_file == f"{embeddings}/sentence_transformers/vocab.txt"
    # Without its bert_config.json, a run supplies no config.
    (classifier / "bert_config.json").unlink()
    with pytest.raises(ValueError, match=re.escape(message("model-files-required"))):
        model_files(None, str(TINY / "vocab.txt"), str(classifier))


@pytest.mark.large
def test_the_documented_commands_take_a_runs_files(runs, tmp_path):
    """docs/sentence_embeddings.md: extract_features.py --init_checkpoint=OUTPUT_DIR/ckpt-N
    --pooling=mean --normalize, for a run started from a Hugging Face directory."""
    hf, embeddings, classifier = runs
    out = tmp_path / "vectors.jsonl"
    process = subprocess.run([
        sys.executable, str(ROOT / "extract_features.py"), f"--init_checkpoint={embeddings}/ckpt-1",
        "--pooling=mean", "--normalize", f"--input_file={LINES}", f"--output_file={out}",
        "--max_seq_length=16"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert process.returncode == 0, process.stderr[-3000:]
    vectors = np.array([json.loads(line)["embedding"] for line in out.read_text().splitlines()])
    assert vectors.shape == (4, 32)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # export_model.py --format=embedding --checkpoint=OUTPUT_DIR: the run's files and settings.
    process = subprocess.run([
        sys.executable, str(ROOT / "export_model.py"), "--format=embedding",
        f"--checkpoint={embeddings}", f"--export_dir={tmp_path / 'serving' / '1'}"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert process.returncode == 0, process.stderr[-3000:]
    exported = json.loads((tmp_path / "serving/1/assets.extra/export.json").read_text())
    assert (exported["pooling"], exported["normalize"], exported["max_seq_length"]) == (
        "mean", True, 16)
    # A run whose vocabulary is gone: one line naming it, before any work.
    shutil.rmtree(hf)
    process = subprocess.run([
        sys.executable, str(ROOT / "extract_features.py"), f"--init_checkpoint={classifier}",
        f"--input_file={LINES}", f"--output_file={out}", "--max_seq_length=16"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert_refused(process, "run-vocab-missing")
    assert f"{hf}, the checkpoint it started from, no longer exists" in process.stderr


def test_run_classifier_predicts_in_a_runs_output_dir_without_the_files_flags(runs, tmp_path):
    """run_classifier.py --do_predict in a finished run's --output_dir (no --init_checkpoint):
    the run's config and vocabulary, as the Hugging Face directory it started from gave them."""
    from modeling import BertClassifier, checkpoint as checkpoints
    from bert_runner.runs import record as run_records
    from modeling_helpers import save_like_the_trainer
    from test_run_classifier import write_keyword_mrpc

    hf = runs[0]
    model = BertClassifier(tiny_config(), 2)
    checkpoints.load_checkpoint(model, TINY / "bert_model.ckpt", strict=False)
    out = tmp_path / "mrpc"
    save_like_the_trainer(model, out)
    run_records.write_output_dir_record(str(out), _record(
        "classifier/mrpc", hf, f"{hf}/vocab.txt", max_seq_length=16))
    (out / "bert_config.json").write_text(tiny_config().to_json_string())
    write_keyword_mrpc(tmp_path / "data", num_train=4, num_dev=4, num_test=6)
    process = subprocess.run([
        sys.executable, str(ROOT / "run_classifier.py"), "--task_name=MRPC", "--do_predict",
        f"--data_dir={tmp_path / 'data'}", f"--output_dir={out}", "--max_seq_length=16"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert process.returncode == 0, process.stderr[-3000:]
    assert len((out / "test_results.tsv").read_text().splitlines()) == 6


def test_a_run_from_scratch_records_its_vocabulary_and_is_found_there(tmp_path, monkeypatch):
    """A run trained from scratch with a --vocab_file outside its output_dir: run.json records
    the file (absolute) beside its hash, and a later command without --vocab_file takes it from
    there while its content is the recorded one; changed or gone, it is refused naming it."""
    from bert_runner import driver
    from bert_runner.runs.model_files import model_files
    from bert_runner.runs import record as run_records

    vocab = tmp_path / "elsewhere" / "vocab.txt"
    vocab.parent.mkdir()
    vocab.write_bytes((TINY / "vocab.txt").read_bytes())
    run = _run_directory(tmp_path / "run", _encoder(), {})
    record = {"task": "classifier/mrpc", "init_checkpoint": None,
              "vocab": _record("x", None, vocab)["vocab"], "do_lower_case": True}
    monkeypatch.chdir(tmp_path / "elsewhere")  # a relative --vocab_file, recorded absolute
    (run / "run.json").unlink()
    (run / "bert_config.json").unlink()
    driver._record_run(str(run), tiny_config(), record, "vocab.txt")
    recorded = run_records.output_dir_record(str(run))
    assert recorded[run_records.VOCAB_PATH_KEY] == str(vocab)
    monkeypatch.chdir(tmp_path)
    files = model_files(None, None, str(run))
    assert (files.config_file, files.vocab_file) == (f"{run}/bert_config.json", str(vocab))
    values = _flag_values()
    values(["x", f"--init_checkpoint={run}/ckpt-1"])
    assert values.vocab_file == str(vocab)
    vocab.write_text((TINY / "vocab.txt").read_text() + "extra\n")
    with pytest.raises(ValueError, match=re.escape(message("run-vocab-missing"))) as error:
        model_files(None, None, str(run))
    assert f"{vocab} hold(s) another vocabulary" in str(error.value)
    vocab.unlink()
    with pytest.raises(ValueError, match=re.escape(message("run-vocab-missing"))) as error:
        model_files(None, None, str(run))
    assert f"{vocab}, the vocabulary it read, no longer exists ({run}/run.json)" in str(
        error.value)


@pytest.mark.large
def test_export_takes_the_vocabulary_a_run_from_scratch_recorded(tmp_path):
    """export_model.py of a run trained from scratch with a --vocab_file kept elsewhere, given
    neither --vocab_file nor --bert_config_file: the run's recorded vocabulary (it was refused,
    asking for --vocab_file again)."""
    from bert_runner.runs.hashes import fingerprint
    from test_export import _fine_tuned_run

    vocab = tmp_path / "elsewhere" / "vocab.txt"
    vocab.parent.mkdir()
    vocab.write_bytes((TINY / "vocab.txt").read_bytes())
    run = tmp_path / "run"
    _fine_tuned_run(run, "ner", "token", 3, ["B-PER", "I-PER", "O"])
    record = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps(
        {**record, "init_checkpoint": None, "vocab": fingerprint(str(vocab)),
         "vocab_file": str(vocab)}))
    process = subprocess.run([
        sys.executable, str(ROOT / "export_model.py"), "--format=huggingface",
        f"--checkpoint={run}", f"--export_dir={tmp_path / 'hf'}"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert process.returncode == 0, process.stderr[-3000:]
    assert (tmp_path / "hf" / "vocab.txt").read_bytes() == vocab.read_bytes()
