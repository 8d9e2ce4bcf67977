"""bert_runner.driver in process, on a small fake task (the tiny model, a few records): what the
driver owns for every script — the do_* refusal, every split read before any is converted,
atomic record files, TPU padding, training steps, output_dir ownership, resume and restore."""
import dataclasses
import json
import logging
import os
import random
import re

import numpy as np
import pytest
import tensorflow as tf

from modeling_helpers import TINY, tiny_config
from refusals import message
from bert_runner import driver, run_identity, splits
from bert_runner.inputs import decode_record
from bert_runner.run_config import RunConfig
from bert_runner.task import SplitRecords, Task, collect
from bert_tasks.classifier import features
from bert_tasks.pretraining.task import PretrainingTask
from modeling import BertClassifier, classification_loss
from vocab.tokenization import FullTokenizer

WORDS = "the a dog cat bird tree house car road river city hill sun moon star rain".split()
SEQ = 8


class KeywordTask(Task):
    """Label 1 iff a line's text holds "good". Files `<record name>.txt` in data_dir, lines
    `<label> <text>`; records as run_classifier's, predictions.txt one label per line."""

    name = "keyword"
    max_seq_length = SEQ
    splits = {"train": "train", "eval": "dev", "predict": "test"}

    def __init__(self, data_dir, name="keyword"):
        self.data_dir = data_dir
        self.name = name
        self.finished = []

    def read_examples(self, split, run=None, labels=None):
        path = os.path.join(self.data_dir, self.splits[split] + ".txt")
        examples = []
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                label, text = line.split(" ", 1)
                if label not in ("0", "1"):
                    raise ValueError(f"{path}:{number}: label {label!r} is not 0 or 1")
                examples.append(features.InputExample(f"{split}-{number}", text.strip(), None, label))
        return examples

    def records(self, examples, split, tokenizer, run):
        return SplitRecords(features.tf_examples(examples, ["0", "1"], SEQ, tokenizer))

    def padding_record(self):
        return features.features_to_tf_example(features.convert_single_example(
            0, features.PaddingInputExample(), ["0", "1"], SEQ, None))

    def build_model(self, config, bilstm_on_top=False, modes=None):
        return BertClassifier(config, 2, modes=modes)

    def feature_spec(self, is_training):
        return features.name_to_features(SEQ)

    def loss(self, model, batch, training):
        return classification_loss(model(batch, training=training)["logits"],
                                   batch["label_ids"])[0], {}

    def predict_step(self, model, batch):
        return {"predicted": tf.argmax(model(batch)["logits"], -1), "label_ids": batch["label_ids"]}

    def evaluate(self, outputs, global_step, split, output_dir):
        accuracy = np.mean(outputs["predicted"] == outputs["label_ids"])
        return {"eval_accuracy": np.float32(accuracy), "global_step": np.int64(global_step)}

    def baselines(self, outputs, split):
        return {"eval_accuracy": "chance 0.5000"}

    def write_predictions(self, batches, split, output_dir):
        predicted = collect(batches)["predicted"][:split.num_examples]
        with open(os.path.join(output_dir, "predictions.txt"), "w") as f:
            f.write("".join(f"{p}\n" for p in predicted))
        return predicted

    def finish(self, result, output_dir):
        self.finished.append((result, output_dir))


def write_data(data_dir, sizes=(("train", 64), ("dev", 16), ("test", 12))):
    rng = random.Random(0)
    data_dir.mkdir(exist_ok=True)
    for name, size in sizes:
        lines = []
        for _ in range(size):
            label = rng.randrange(2)
            words = [rng.choice(WORDS) for _ in range(3)]
            words.insert(rng.randrange(4), "good" if label else "bad")
            lines.append(f"{label} {' '.join(words)}\n")
        (data_dir / f"{name}.txt").write_text("".join(lines))
    return data_dir


def config(output_dir, **flags):
    values = dict(bert_config_file=str(TINY / "bert_config.json"),
                  vocab_file=str(TINY / "vocab.txt"), train_batch_size=8, eval_batch_size=8,
                  predict_batch_size=8, learning_rate=1e-3, num_train_epochs=4.0)
    return RunConfig(str(output_dir), **{**values, **flags})


def decoded(path):
    return [decode_record(r, features.name_to_features(SEQ)) for r in tf.data.TFRecordDataset(path)]


@pytest.mark.parametrize("offered, message", [
    (KeywordTask.splits, "At least one of `do_train`, `do_eval` or `do_predict' must be True."),
    ({"train": "train", "predict": "eval"}, "At least one of `do_train` or `do_predict` must be True."),
    ({"train": "train", "eval": "eval"}, "At least one of `do_train` or `do_eval` must be True."),
    ({"eval": "dev"}, "At least one of `do_eval` must be True."),
])
def test_a_run_with_nothing_to_do_is_refused_with_the_scripts_message(tmp_path, offered, message):
    task = type("OfferingTask", (KeywordTask,), {"splits": offered})(str(tmp_path))
    # do_eval alone does not count for a task without an eval split (SQuAD's --do_eval scores).
    flags = {"do_eval": True} if "eval" not in offered else {}
    with pytest.raises(splits.NothingToDoError) as error:
        driver.run_command(task, config(tmp_path / "out", **flags))
    assert str(error.value) == message
    assert not (tmp_path / "out").exists()


def test_every_split_is_read_before_any_is_converted(tmp_path):
    data = write_data(tmp_path / "data")
    (data / "test.txt").write_text("1 a good dog\nx a bad cat\n")
    with pytest.raises(ValueError, match=f"{data / 'test.txt'}:2: label 'x' is not 0 or 1"):
        driver.run_command(KeywordTask(str(data)),
                   config(tmp_path / "out", do_train=True, do_eval=True, do_predict=True))
    assert not (tmp_path / "out").exists()  # before output_dir, run.json or any record


def test_tpu_pads_eval_and_predict_records_to_full_batches(tmp_path):
    task = KeywordTask(str(write_data(tmp_path / "data")))
    tokenizer = FullTokenizer(str(TINY / "vocab.txt"))
    examples = task.read_examples("eval")[:5]
    tpu = config(tmp_path, use_tpu=True, train_batch_size=4, eval_batch_size=4)
    split = splits.write_split(task, examples, "eval", tokenizer, tpu)
    assert split == splits.Split([str(tmp_path / "dev.tf_record")], 5, 4, num_padding=3,
                                 examples=examples)
    rows = decoded(split.files[0])
    assert [int(r["is_real_example"]) for r in rows] == [1] * 5 + [0] * 3
    assert not any(np.any(r["input_ids"]) for r in rows[5:])
    # --distribution_strategy=tpu is a TPU too.
    strategy = config(tmp_path, distribution_strategy="tpu", eval_batch_size=4)
    assert splits.write_split(task, examples, "eval", tokenizer, strategy).num_padding == 3
    # Training records are never padded; nor are any without a TPU.
    assert splits.write_split(task, examples, "train", tokenizer, tpu).num_padding == 0
    assert len(decoded(str(tmp_path / "train.tf_record"))) == 5
    assert splits.write_split(task, examples, "eval", tokenizer, config(tmp_path)).num_padding == 0
    assert len(decoded(split.files[0])) == 5


def test_a_failed_conversion_leaves_the_previous_records(tmp_path):
    task = KeywordTask(str(write_data(tmp_path / "data")))
    tokenizer = FullTokenizer(str(TINY / "vocab.txt"))
    examples = task.read_examples("eval")
    splits.write_split(task, examples, "eval", tokenizer, config(tmp_path))
    before = (tmp_path / "dev.tf_record").read_bytes()
    bad = examples[:3] + [features.InputExample("dev-x", "a dog", None, "7")]
    with pytest.raises(ValueError, match="unknown label '7'"):
        splits.write_split(task, bad, "eval", tokenizer, config(tmp_path))
    assert (tmp_path / "dev.tf_record").read_bytes() == before
    assert not list(tmp_path.glob("*.tmp-*"))


def test_training_steps_count_the_tasks_unit(tmp_path):
    from bert_tasks.ner.task import NerTask
    from bert_tasks.squad.task import SquadTask

    run = config(tmp_path, train_batch_size=4, num_train_epochs=2.0, warmup_proportion=0.25)
    assert KeywordTask(None).training_steps(run, [None] * 10, 12) == (5, 1)  # examples
    assert NerTask(None, 8).training_steps(run, [None] * 10, 12) == (6, 1)  # windows
    assert SquadTask(32, doc_stride=8, max_query_length=8).training_steps(
        run, [None] * 10, 40) == (5, 1)  # questions
    assert PretrainingTask(16, 4, num_train_steps=9, num_warmup_steps=2).training_steps(
        run, None, None) == (9, 2)  # its flags
    with pytest.raises(ValueError, match="3 training windows at --train_batch_size=4 for "
                                         "--num_train_epochs=1.0 make 0 training steps"):
        NerTask(None, 8).training_steps(config(tmp_path, train_batch_size=4,
                                                     num_train_epochs=1.0), [None] * 9, 3)


def test_zero_training_steps_are_refused_before_training(tmp_path):
    data = write_data(tmp_path / "data", (("train", 5),))
    with pytest.raises(ValueError, match="5 training examples at --train_batch_size=8 for "
                                         "--num_train_epochs=1.0 make 0 training steps"):
        driver.run_command(KeywordTask(str(data)),
                   config(tmp_path / "out", do_train=True, num_train_epochs=1.0))
    assert not list((tmp_path / "out").glob("ckpt-*"))
    # Nothing that would block the corrected command, or another task, is left behind.
    assert not (tmp_path / "out" / "run.json").exists()
    assert not (tmp_path / "out" / "run.lock").exists()


def test_a_failed_run_removes_the_output_dir_it_made_until_it_holds_what_is_kept(tmp_path,
                                                                                monkeypatch):
    """A run that fails after writing its records and run.json into the output_dir it created
    leaves no directory; one that fails after training keeps every file (its checkpoints
    resume)."""
    data = write_data(tmp_path / "data")

    def lost_device(*args, **kwargs):
        raise RuntimeError("lost device")

    with monkeypatch.context() as patched:
        patched.setattr(driver, "run_task", lost_device)
        with pytest.raises(RuntimeError, match="lost device"):
            driver.run_command(KeywordTask(str(data)), config(tmp_path / "out", do_train=True,
                                                      do_eval=True))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]

    task = type("LosingTask", (KeywordTask,), {"finish": lost_device})(str(data))
    with pytest.raises(RuntimeError, match="lost device"):
        driver.run_command(task, config(tmp_path / "out", do_train=True, num_train_epochs=0.25))
    held = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert {"run.json", "train.tf_record", "checkpoint", "ckpt-2.index"} <= set(held), held
    assert "run.lock" not in held


def test_trains_evaluates_predicts_resumes_and_keeps_its_output_dir(tmp_path, caplog):
    data = write_data(tmp_path / "data")
    out = tmp_path / "out"
    task = KeywordTask(str(data))
    run = config(out, do_train=True, do_eval=True, do_predict=True,
                 init_checkpoint=str(TINY / "bert_model.ckpt"))
    result = driver.run_command(task, run)
    assert task.finished == [(result, str(out))]
    assert result.eval_results["global_step"] == 32  # int(64 / 8 * 4)
    assert result.eval_results["eval_accuracy"] >= 0.75
    assert (out / "eval_results.txt").read_text().startswith("eval_accuracy = ")
    # The same metrics as numbers for programs (the demo), each beside its baseline.
    report = json.loads((out / "eval_report.json").read_text())
    assert report == {"metrics": {k: float(v) for k, v in result.eval_results.items()},
                      "baselines": {"eval_accuracy": "chance 0.5000"}}
    assert len((out / "predictions.txt").read_text().splitlines()) == 12
    # Evaluation and prediction, whose last batches are smaller (12 = 8 + 4), traced the model
    # once between them.
    assert [f.experimental_get_tracing_count()
            for f in result.trainer._predict_functions.values()] == [1]
    assert sorted(p.name for p in out.glob("*.tf_record")) == [
        "dev.tf_record", "test.tf_record", "train.tf_record"]
    assert '"task": "keyword"' in (out / "run.json").read_text()
    # The checkpoints' config beside them: output_dir describes its model alone.
    assert (json.loads((out / "bert_config.json").read_text())
            == json.loads((TINY / "bert_config.json").read_text()))
    assert not list(out.glob("*.tmp-*")) and not (out / "run.lock").exists()

    # Evaluation alone restores the run's last checkpoint, as the Estimator did; the training
    # flags it leaves at their defaults are not said to differ from the run's.
    first = (out / "eval_results.txt").read_text()
    with caplog.at_level(logging.WARNING):
        driver.run_command(KeywordTask(str(data)), config(out, do_eval=True))
    assert (out / "eval_results.txt").read_text() == first
    assert "trained with other settings" not in caplog.text

    # The same command again: the finished run is resumed, not retrained.
    caplog.set_level(logging.INFO)
    driver.run_command(KeywordTask(str(data)), run)
    assert "already holds a finished run (checkpoint at step 32 of 32)" in caplog.text
    assert "NOT trained again" in caplog.text
    assert sorted(p.name for p in out.glob("ckpt-*.index")) == ["ckpt-32.index"]

    # A training command of another run (its run.json tells) is refused before anything there
    # is touched: another learning rate, seed, starting checkpoint or training data would be
    # resumed as if it were this one, or its finished checkpoint kept as this command's.
    records, recorded = (out / "train.tf_record").read_bytes(), (out / "run.json").read_text()
    for change, said in [({"learning_rate": 3e-3}, "learning_rate 0.001 -> 0.003"),
                         ({"random_seed": 7}, "random_seed 12345 -> 7"),
                         ({"init_checkpoint": None},
                          f"init_checkpoint '{TINY / 'bert_model.ckpt'}' -> None")]:
        with pytest.raises(driver.OutputDirError, match=re.escape(message("output-dir-another-run"))
                           + ".*" + re.escape(said)):
            driver.run_command(KeywordTask(str(data)), dataclasses.replace(run, **change))
    # Where only the schedule differs, the refusal says how to train that model on.
    hint = f"start another --output_dir with --init_checkpoint={out} (its weights"
    with pytest.raises(driver.OutputDirError, match=re.escape(hint)):
        driver.run_command(KeywordTask(str(data)), dataclasses.replace(run, num_train_epochs=6.0))
    with pytest.raises(driver.OutputDirError) as refused:
        driver.run_command(KeywordTask(str(data)), dataclasses.replace(run, random_seed=7,
                                                               learning_rate=3e-3))
    assert "--init_checkpoint=" not in str(refused.value)
    other_data = write_data(tmp_path / "other", sizes=(("train", 48), ("dev", 16), ("test", 12)))
    with pytest.raises(driver.OutputDirError, match="the training data differs; training "
                                                    "examples 64 -> 48"):
        driver.run_command(KeywordTask(str(other_data)), run)
    # Evaluation alone may change what training did, not how the model reads its input.
    with pytest.raises(driver.OutputDirError, match=re.escape(message("output-dir-other-input"))
                       + ".*do_lower_case True -> False"):
        driver.run_command(KeywordTask(str(data)), config(out, do_eval=True, do_lower_case=False))
    assert (out / "train.tf_record").read_bytes() == records
    assert (out / "run.json").read_text() == recorded
    assert sorted(p.name for p in out.glob("ckpt-*.index")) == ["ckpt-32.index"]

    # Another task in the same output_dir is refused before anything there is touched.
    with pytest.raises(driver.OutputDirError, match="holds a run of task 'keyword'.*this is task "
                                                    "'other'"):
        driver.run_command(KeywordTask(str(data), name="other"), config(out, do_train=True))
    assert (out / "train.tf_record").read_bytes() == records
    # So is another model: its checkpoints hold no BiLSTM (run.json records the model).
    assert json.loads((out / "run.json").read_text())["pretraining_objective"] == "mlm"
    with pytest.raises(driver.OutputDirError, match=re.escape(message("output-dir-other-model"))):
        driver.run_command(KeywordTask(str(data)), config(out, do_eval=True, bilstm_on_top=True))
    # A run.json that is not JSON says nothing of the model its checkpoints are of: refused.
    (out / "run.json").write_text('{"task": "keyword", ')
    with pytest.raises(ValueError, match=re.escape(message("run-record-unreadable"))):
        driver.run_command(KeywordTask(str(data)), config(out, do_eval=True))
    assert (out / "train.tf_record").read_bytes() == records


def test_recompute_activations_flag_reaches_every_encoder_layer(tmp_path):
    strategy = tf.distribute.get_strategy()
    for recompute in (False, True):
        run = RunConfig(str(tmp_path), recompute_activations=recompute)
        trainer = driver.build_trainer(PretrainingTask(16, 4), run, tiny_config(), strategy, 1, 0)
        assert trainer.model.encoder.recompute is recompute
        assert all(layer.recompute is recompute for layer in trainer.model.encoder.encoder_layers)


def test_fused_attention_flag_sets_the_encoders_modes(tmp_path):
    """--fused_attention=true fuses the attention; auto leaves a run on TensorFlow or a CPU
    unfused."""
    strategy = tf.distribute.get_strategy()
    for flag, fused in (("auto", False), ("false", False), ("true", True)):
        run = RunConfig(str(tmp_path), fused_attention=flag)
        modes = driver.build_trainer(PretrainingTask(16, 4), run, tiny_config(), strategy, 1,
                                     0).model.encoder.modes
        assert modes.fused_attention is fused and not modes.whole_last_layer, flag


def test_a_command_that_changes_a_recorded_setting_is_told(tmp_path):
    """run.json records the task's own settings (run_classifier's windows) beside the run's
    hyper-parameters; a later command into the output_dir that changes one is reported."""
    from bert_tasks.classifier.task import ClassifierTask

    run = config(tmp_path, do_eval=True)
    windows = ClassifierTask("mrpc", 24, long_documents=True, doc_stride=8)
    driver._record_run(run.output_dir, tiny_config(), run_identity.of(windows, run))
    recorded = json.loads((tmp_path / "run.json").read_text())
    assert (recorded["long_documents"], recorded["doc_stride"]) == (True, 8)
    assert driver._changed_settings(run.output_dir, run_identity.of(windows, run)) == []
    assert driver._changed_settings(run.output_dir,
                                    run_identity.of(ClassifierTask("mrpc", 24), run)) == [
        "long_documents True -> False", "doc_stride 8 -> None"]


def test_another_tasks_checkpoint_says_whose_it_is(tmp_path):
    """An NER output_dir as a classifier's --init_checkpoint: the head's shapes differ under the
    same names; the refusal says which task wrote it (its run.json)."""
    from bert_runner.runs import checkpoints
    from modeling.checkpoint import original as original_layout

    tagger = BertClassifier(tiny_config(), 9)  # a 9-label head named as run_ner's
    prefix = original_layout.save_tf1_checkpoint(tagger, str(tmp_path / "bert_model.ckpt"))
    (tmp_path / "run.json").write_text(json.dumps({"task": "ner"}))
    with pytest.raises(ValueError, match="shape mismatch output_weights") as error:
        checkpoints.check_init_checkpoint(BertClassifier(tiny_config(), 2), prefix)
    assert f"written by a run of task 'ner' ({tmp_path / 'run.json'})" in str(error.value)


@pytest.mark.large
def test_a_seed_sweep_is_extended_and_each_seed_records_its_run(tmp_path):
    """--seeds: the output_dir's run.json records the sweep (every setting but the seed), each
    seed_<n> directory its own run; more seeds of the same sweep extend it, a sweep of other
    settings is refused, and a seed directory alone is checked against its own record."""
    data = write_data(tmp_path / "data", sizes=(("train", 16), ("dev", 8), ("test", 4)))
    out = tmp_path / "out"
    run = config(out, do_train=True, num_train_epochs=1.0)
    driver.run_command(KeywordTask(str(data)), run, seeds=[1])

    def checkpoint_files(directory):
        return {p.name: p.read_bytes() for p in directory.iterdir() if p.name.startswith("ckpt-")}

    finished = checkpoint_files(out / "seed_1")
    driver.run_command(KeywordTask(str(data)), run, seeds=[1, 2])  # seed 1 finished, seed 2 trained
    assert finished and checkpoint_files(out / "seed_1") == finished
    assert checkpoint_files(out / "seed_2")
    assert "random_seed" not in json.loads((out / "run.json").read_text())
    assert [json.loads((out / f"seed_{s}" / "run.json").read_text())["random_seed"]
            for s in (1, 2)] == [1, 2]
    with pytest.raises(driver.OutputDirError, match="learning_rate 0.001 -> 0.002"):
        driver.run_command(KeywordTask(str(data)), dataclasses.replace(run, learning_rate=2e-3),
                   seeds=[3])
    assert not (out / "seed_3").exists()
    with pytest.raises(driver.OutputDirError, match="random_seed 2 -> 12345"):
        driver.run_command(KeywordTask(str(data)), config(out / "seed_2", do_train=True,
                                                  num_train_epochs=1.0))
