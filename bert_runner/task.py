"""The Task contract: what a task (GLUE, SQuAD, SWAG, NER, pre-training) tells the shared driver.

A task is one package holding one `Task` subclass (`bert_tasks/classifier/task.py`, `bert_tasks/squad/task.py`, ...). Its
script reads the task's data, writes the TFRecords (`bert_runner.driver.Split`), builds the task from
its flags and hands both to `bert_runner.driver.run_task`, which owns everything that is the same for
every task: strategy, optimizer, training with resume and `--init_checkpoint`, both checkpoint
layouts, evaluation and prediction loops, `eval_results.txt`.

What a task provides (`features` below are the decoded TFRecord batch: a dict of int32 / float32
tensors `[B, ...]`, one replica's share):

    name                                    str: identifies the task's runs in an output_dir
    build_model(config)                     a `modeling.BertTaskModel` (names its TF1 head)
    feature_spec(is_training)               {name: tf.io.FixedLenFeature} of the TFRecords
    loss(model, features, training)         (scalar float32 loss, {name: scalar metric})
    predict_step(model, features)           {name: tensor [B, ...]}, for evaluation and prediction
    evaluate(outputs, global_step)          {name: numpy scalar}: the eval_results.txt values
    baselines(outputs)                      {name: text}: chance / majority figures beside them
    write_predictions(batches, split, output_dir)   the task's prediction files
    flops_per_example(config)               training model FLOPs of one example (for logs)

`outputs` is `collect(batches)`: the `predict_step` values of the whole split, concatenated in
file order, plus `batch_index` `[N]` (the batch of each row, for per-batch means such as the
Estimator's `loss`). `write_predictions` gets the batches themselves, so a task can stream them.
"""
import numpy as np


class Task:
    """Base class of the tasks; see the module docstring for the contract."""

    name = None

    def build_model(self, config):
        """The task model for `config` (a `modeling.BertConfig`), built, under the caller's scope."""
        raise NotImplementedError

    def feature_spec(self, is_training):
        """`{feature name: tf.io.FixedLenFeature}` of the task's TFRecords for training or not."""
        raise NotImplementedError

    def loss(self, model, features, training):
        """`(loss, metrics)`: the scalar loss to minimise and `{name: scalar}` to log beside it."""
        raise NotImplementedError

    def predict_step(self, model, features):
        """`{name: tensor [B, ...]}` per batch: what `evaluate` and `write_predictions` read."""
        raise NotImplementedError

    def evaluate(self, outputs, global_step):
        """`{name: value}` for eval_results.txt from `collect`ed `predict_step` outputs.

        Values should be numpy scalars (np.float32 metrics, np.int64 global_step), so the file
        shows the original's text.
        """
        raise NotImplementedError(f"{type(self).__name__} has no evaluation")

    def baselines(self, outputs):
        """`{metric name: "<what> <value>"}` to print beside the metric (chance, majority)."""
        return {}

    def write_predictions(self, batches, split, output_dir):
        """Writes the prediction files of `split` from the iterator of `predict_step` batches."""
        raise NotImplementedError(f"{type(self).__name__} has no prediction output")

    def flops_per_example(self, config):
        """Training model FLOPs of one example; None to leave throughput logs without them."""
        return None


def collect(batches):
    """Concatenates `predict_step` batches (dicts of numpy arrays) in order.

    Returns `{name: np.ndarray [N, ...]}` plus `batch_index` int `[N]`. Empty batches (an idle
    replica's share of the last batch) are skipped. Raises ValueError if no row arrived.
    """
    parts, batch_index = {}, []
    for batch in batches:
        rows = len(next(iter(batch.values())))
        if not rows:
            continue
        for name, value in batch.items():
            parts.setdefault(name, []).append(value)
        batch_index.append(np.full(rows, len(batch_index)))
    if not parts:
        raise ValueError("the evaluation/prediction set yielded no examples")
    collected = {name: np.concatenate(values) for name, values in parts.items()}
    collected["batch_index"] = np.concatenate(batch_index)
    return collected


def per_batch_mean(values, batch_index):
    """Mean of `values [N]` within each batch: `[num_batches]` float64."""
    sums = np.bincount(batch_index, weights=np.asarray(values, np.float64))
    return sums / np.bincount(batch_index)


def encoder_training_flops(config, seq_length, max_predictions=0):
    """Model FLOPs of one training example (forward + backward = 3 × forward).

    Counts the matmuls: per token 2·(4H² + 2HI) per layer plus attention 4·S·H per layer, and the
    masked-LM head (2·(H² + HV)) at each predicted position. BERT-Base at S=128, P=20: ≈69.9 GFLOPs.
    """
    h, i, v = config.hidden_size, config.intermediate_size, config.vocab_size
    per_token = config.num_hidden_layers * (2 * (4 * h * h + 2 * h * i) + 4 * seq_length * h)
    head = max_predictions * 2 * (h * h + h * v)
    return 3 * (per_token * seq_length + head)
