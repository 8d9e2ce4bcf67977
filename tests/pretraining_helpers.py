"""Synthetic pretraining TFRecords for the tiny fixture model (vocab 99), and CLI helpers."""
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

from conftest import ROOT
from modeling_helpers import TINY_TRAIN

SEQ, PRED = 16, 4


def write_records(path, num_records, seed=0, vocab_size=99, seq=SEQ, pred=PRED,
                  next_sentence=True):
    """Learnable records: B repeats A (so masked tokens are predictable from the other segment).
    `next_sentence=False`: without next_sentence_labels, as create_pretraining_data.py
    --next_sentence_prediction=false writes them."""
    rng = np.random.RandomState(seed)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(num_records):
            half = (seq - 3) // 2
            a = rng.randint(5, vocab_size, size=half)
            real = np.concatenate([[2], a, [3], a, [3]])
            pad = seq - len(real)
            ids = np.concatenate([real, np.zeros(pad, int)])
            mask = np.array([1] * len(real) + [0] * pad)
            segments = np.array([0] * (half + 2) + [1] * (half + 1) + [0] * pad)
            positions = np.sort(rng.choice(np.arange(1, len(real) - 1), pred, replace=False))
            labels = ids[positions].copy()
            ids[positions] = 4  # [MASK]
            features = {
                "input_ids": ids, "input_mask": mask, "segment_ids": segments,
                "masked_lm_positions": positions, "masked_lm_ids": labels,
            }
            if next_sentence:
                features["next_sentence_labels"] = [int(rng.rand() < 0.5)]
            feature = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=list(map(int, v))))
                       for k, v in features.items()}
            feature["masked_lm_weights"] = tf.train.Feature(
                float_list=tf.train.FloatList(value=[1.0] * pred))
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return path


def cli_flags(**values):
    """`--name=value` command-line flags of `run_in_process`-style keyword arguments."""
    return [f"--{name}={value}" for name, value in values.items()]


def pretraining_command(input_file, output_dir, *extra, config=TINY_TRAIN / "bert_config.json"):
    return [
        sys.executable, str(ROOT / "run_pretraining.py"), f"--input_file={input_file}",
        f"--output_dir={output_dir}", f"--bert_config_file={config}",
        f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PRED}", *extra,
    ]


def run_in_process(input_file, output_dir, config=TINY_TRAIN / "bert_config.json",
                   max_seq_length=SEQ, max_predictions_per_seq=PRED, next_sentence_prediction=None,
                   num_train_steps=100000, num_warmup_steps=10000, max_eval_steps=100, **run_flags):
    """`run_pretraining.py` with these flags (its defaults otherwise), through the driver in this
    process, as its `run()` does: returns the driver's `RunResult`. `run_flags`: the `RunConfig`
    flags (do_train, train_batch_size, ...). Its log lines reach pytest's `caplog`."""
    from bert_runner import driver
    from bert_runner.run_config import RunConfig
    from bert_tasks.pretraining.task import PretrainingTask

    from tensorflow.python.framework import config as tf_config

    task = PretrainingTask(max_seq_length, max_predictions_per_seq, next_sentence_prediction,
                           str(input_file), num_train_steps, num_warmup_steps, max_eval_steps)
    deterministic = tf_config.is_op_determinism_enabled()
    try:
        return driver.run_command(
            task, RunConfig(str(output_dir), bert_config_file=str(config), **run_flags))
    finally:
        # --deterministic turns on op determinism for the whole process: not for later tests.
        if not deterministic and tf_config.is_op_determinism_enabled():
            tf_config.disable_op_determinism()


def run_cli(cmd, **kwargs):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, **kwargs)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def model_checkpoint_values(prefix):
    """The model's weights in one of our checkpoints (object paths), without optimizer slots and
    the input-pipeline state (a variant tensor numpy cannot read)."""
    reader = tf.train.load_checkpoint(str(prefix))
    return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()
            if n.startswith("model/by_path/")}


def truncate_checkpoint(prefix, keep=0.5):
    """Cuts the `.data` file of checkpoint `prefix` to `keep` of its size (a full disk, say)."""
    data = next(prefix.parent.glob(prefix.name + ".data-*"))
    size = data.stat().st_size
    with open(data, "r+b") as f:
        f.truncate(int(size * keep))
