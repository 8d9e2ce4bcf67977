"""bert_runner.trainer's progress lines, interrupted saves and input, on a one-layer model: the
ETA at the pace after the first loop call (a fake clock), a save interrupted mid-way (a patched
save) leaves no `ckpt-<step>_temp/`, the input read without tf.data's autotuning thread, the
--log_steps cadence and --profile_steps' trace, and packed text counts the pairs its rows
hold."""
import re
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_runner import cli, inputs, trainer as trainer_lib
from bert_runner.trainer import Trainer, eta_seconds, remove_unfinished_saves
from modeling.optimization import create_optimizer


def _loss(model, features, training):
    return tf.reduce_mean(tf.square(model(features["x"]) - features["y"])), {}


def _batches(context):
    batch = {"x": np.ones((4, 2), "float32"), "y": np.zeros((4, 1), "float32")}
    return tf.data.Dataset.from_tensors(batch).repeat()


def _trainer(output_dir, **kwargs):
    model = keras.Sequential([keras.layers.Dense(1)])
    model.build((None, 2))
    optimizer = create_optimizer("adamw", 1e-2, num_train_steps=8, num_warmup_steps=0)
    return Trainer(tf.distribute.get_strategy(), model, optimizer, _loss, str(output_dir),
                   global_batch_size=4, **kwargs)


def test_the_eta_is_the_pace_since_the_first_loop_call(tmp_path, monkeypatch, caplog):
    """The first loop call takes 100 s on the fake clock (tracing), the others 1 s each: the
    first line's ETA is at that call's pace, the later ones at 1 s a step."""
    clock = types.SimpleNamespace(now=1000.0)
    monkeypatch.setattr(trainer_lib, "time", types.SimpleNamespace(time=lambda: clock.now))
    trainer = _trainer(tmp_path, steps_per_loop=1)
    loop = trainer._train_loop

    def timed_loop(iterator, steps):
        clock.now += 100.0 if not trainer.history else 1.0
        return loop(iterator, steps)

    trainer._train_loop = timed_loop
    caplog.set_level("INFO")
    trainer.train(_batches, num_train_steps=5)
    etas = [int(re.search(r" ETA (\d+) s", m).group(1)) for m in caplog.messages
            if m.startswith("step ")]
    assert etas == [400, 3, 2, 1, 0]
    assert [record.seconds for record in trainer.history] == [100.0, 1.0, 1.0, 1.0, 1.0]


def test_eta_seconds():
    assert eta_seconds(400, 200, 130.0, (0, 0.0)) == pytest.approx(130.0)
    # After a first call of 120 s for 20 steps, 180 steps in 10 s: 200 more take about 11 s.
    assert eta_seconds(400, 200, 130.0, (20, 120.0)) == pytest.approx(200 * 10 / 180)
    assert eta_seconds(400, 20, 120.0, (20, 120.0)) == 0.0  # no step since: no pace yet


def test_a_save_interrupted_midway_leaves_no_temporary_folder(tmp_path, monkeypatch, caplog):
    """SIGTERM (as `bert_runner.cli` raises it) after the save wrote its shards, before they were
    moved to ckpt-2.*: the shards' folder is removed and the interruption goes on; another
    directory's folder of the same name is not this run's."""
    other = tmp_path / "other" / "ckpt-2_temp"
    other.mkdir(parents=True)
    out = tmp_path / "out"

    def interrupted_save(manager, checkpoint_number=None, **kwargs):
        temporary = out / f"ckpt-{checkpoint_number}_temp"
        temporary.mkdir()
        (temporary / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"\0" * 1024)
        raise cli.Terminated()

    monkeypatch.setattr(tf.train.CheckpointManager, "save", interrupted_save)
    trainer = _trainer(out, steps_per_loop=1, save_checkpoints_steps=2)
    caplog.set_level("INFO")
    with pytest.raises(cli.Terminated):
        trainer.train(_batches, num_train_steps=4)
    assert trainer.step == 2
    assert sorted(p.name for p in out.iterdir()) == ["train"]
    assert other.is_dir()
    assert f"Removed {out / 'ckpt-2_temp'}, an unfinished checkpoint save" in caplog.messages


def test_training_and_prediction_read_their_input_without_tf_datas_autotuning_thread(
        tmp_path, monkeypatch):
    """Deleting an iterator waits for that thread, which can sleep for up to a minute
    (`trainer.without_autotuning_thread`): both loops read their datasets with it off, batch for
    batch."""
    made = []
    original = trainer_lib.without_autotuning_thread

    def recorded(dataset_fn):
        def make(context):
            made.append(original(dataset_fn)(context))
            return made[-1]
        return make

    monkeypatch.setattr(trainer_lib, "without_autotuning_thread", recorded)
    trainer = _trainer(tmp_path, steps_per_loop=1)
    trainer.train(_batches, num_train_steps=1)
    batches = list(trainer.predict(lambda context: _batches(context).take(2),
                                   lambda model, features: {"y": model(features["x"])}))
    assert len(made) == 2 and not any(d.options().autotune.enabled for d in made)
    want = trainer.model(np.ones((4, 2), "float32")).numpy()
    assert len(batches) == 2 and all(np.array_equal(b["y"], want) for b in batches)


def test_progress_is_logged_every_log_steps_and_a_profile_is_written(tmp_path, caplog):
    """--log_steps ends loop calls at its multiples too (each a line with tokens/s); the loop
    call after the first (which compiles) runs up to --profile_steps steps under TensorFlow's
    profiler, its trace in output_dir/train/plugins/profile."""
    trainer = _trainer(tmp_path, steps_per_loop=5, save_checkpoints_steps=6, log_steps=2,
                       tokens_per_example=16, profile_steps=1)
    caplog.set_level("INFO")
    trainer.train(_batches, num_train_steps=8)
    # Loop calls end at log points (2, 4, ...), saves (6) and the end; the profile is one step.
    assert [record.step for record in trainer.history] == [2, 3, 4, 6, 8]
    lines = [m for m in caplog.messages if m.startswith("step ")]
    assert len(lines) == 5 and all(re.search(r"[\d.]+ examples/s, [\d.]+ tokens/s", m)
                                   for m in lines)
    assert "Profiled steps 3-3: " in "\n".join(caplog.messages)
    assert list((tmp_path / "train" / "plugins" / "profile").glob("*/*.xplane.pb"))


def test_a_checkpoint_of_another_input_pipeline_resumes_with_its_input_restarted(
        tmp_path, caplog):
    """A run checkpointed by an earlier version's input pipeline (another dataset graph, whose
    input position TensorFlow cannot restore) resumes: weights, optimizer and step restored, the
    input from its beginning, with a warning."""
    path = str(tmp_path / "rows.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(8):
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0, 1.0])),
                "y": tf.train.Feature(float_list=tf.train.FloatList(value=[0.0]))}))
                .SerializeToString())
    spec = {"x": tf.io.FixedLenFeature([2], tf.float32),
            "y": tf.io.FixedLenFeature([1], tf.float32)}

    def earlier(context):  # the records parsed one by one, then batched, as before
        d = tf.data.TFRecordDataset([path]).repeat().shuffle(8, seed=1).map(
            lambda record: inputs.decode_record(record, spec), num_parallel_calls=2,
            deterministic=True)
        return d.batch(4, drop_remainder=True).prefetch(1)

    def now(context):
        return inputs.tfrecord_dataset([path], spec, 4, is_training=True, seed=1)

    keras.backend.clear_session()  # the layers' names, which key the checkpoint, alike twice
    _trainer(tmp_path, steps_per_loop=1, save_checkpoints_steps=2).train(
        earlier, num_train_steps=2)
    keras.backend.clear_session()
    resumed = _trainer(tmp_path, steps_per_loop=1, save_checkpoints_steps=2)
    caplog.set_level("INFO")
    resumed.train(now, num_train_steps=4)
    assert any(m.endswith("ckpt-2 holds the input position of another input pipeline (an "
                          "earlier version's): the model, optimizer and step are restored, the "
                          "input starts again from the beginning of its data")
               for m in caplog.messages)
    assert [record.step for record in resumed.history] == [3, 4]


def test_remove_unfinished_saves_takes_only_save_folders(tmp_path):
    (tmp_path / "ckpt-3_temp").mkdir()
    (tmp_path / "ckpt-3_temp" / "part-00000-of-00001.index").write_bytes(b"")
    for kept in ("ckpt-2.index", "ckpt-4_temp", "checkpoint"):
        (tmp_path / kept).write_text("")  # a file, not a save's folder
    (tmp_path / "eval_temp").mkdir()
    assert remove_unfinished_saves(str(tmp_path)) == [str(tmp_path / "ckpt-3_temp")]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint", "ckpt-2.index", "ckpt-4_temp", "eval_temp"]


@pytest.mark.large
def test_packed_text_counts_the_pairs_its_rows_hold(tmp_path, caplog):
    """run_pretraining --input_format=text --max_sequences_per_row: the rows are packed in the
    input pipeline; the progress line gives packed rows/s and examples/s at the pairs a row
    holds, as the packing logged them."""
    from bert_runner import driver
    from bert_runner.run_config import RunConfig
    from bert_tasks.pretraining.data import dynamic_masking
    from bert_tasks.pretraining.task import PretrainingTask
    from test_dynamic_masking import _tiny_text_model

    text, vocab, config = _tiny_text_model(tmp_path)
    options = dynamic_masking.MaskingOptions(vocab_file=str(vocab), max_sequences_per_row=3)
    task = PretrainingTask(32, 8, None, str(text), num_train_steps=2, num_warmup_steps=0,
                           dynamic_input=dynamic_masking.DynamicInput(options, 32, 8,
                                                                      tokenizer="faithful"))
    caplog.set_level("INFO")
    driver.run_command(task, RunConfig(
        str(tmp_path / "out"), bert_config_file=str(config), vocab_file=str(vocab),
        do_train=True, train_batch_size=4, learning_rate=1e-3, save_checkpoints_steps=2,
        iterations_per_loop=2))
    pairs, rows = map(int, re.search(r"Packed (\d+) pairs into (\d+) rows", caplog.text).groups())
    assert pairs > rows
    line = re.search(r"steps/s ([\d.]+) packed rows/s, ([\d.]+) examples/s", caplog.text)
    assert line, caplog.text
    rows_per_s, examples_per_s = map(float, line.groups())
    assert examples_per_s == pytest.approx(rows_per_s * pairs / rows, rel=0.02, abs=0.1)
