"""The Task contract: everything a task (GLUE, SQuAD, SWAG, NER, pre-training) tells the driver.

A task is one package of the tasks' package holding one `Task` subclass built from its script's
flags. `bert_runner.driver.run_command(task, run)` does the rest, the same way for every task:
refuses a run with nothing to do, reads every split the do_* flags ask for (all before any is
converted), writes their TFRecords (atomically, padded for TPU), counts the training steps, then
trains, evaluates and predicts (`run_task`) and hands the results back to the task (`finish`).

The driver sets nothing on a task: what a method needs of the command reaches it as an argument,
`run` (the frozen `bert_runner.run_config.RunConfig`: in a seed sweep the seed's own, whose
output_dir is the seed's directory), or the `Split` whose records the outputs are of (its
examples as read, and the `index` its `records` returned). What the input or the model config
decides (NER's labels, pre-training's objective from its records) is settled once, by `settle`,
whose returned task the driver uses from then on (this one is left as constructed). No method
depends on another having run first, and none changes the examples it is handed: what it makes
of them (windows, counts) is a new value, returned.

The data side (`examples` are whatever the task's reader returns, usually a list):

    splits                                  {split: record name}: the splits the script offers
                                            ("train", "eval", "predict"), in order; the driver
                                            writes `<output_dir>/<record name>.tf_record`
    read_examples(split, run=None, labels=None)   the split's input, read and checked (bad input
                                            names its file and line); `run` None outside a
                                            command; `labels` as settle's
    settle(examples, run, config, labels)   the task the run goes on with: checks across the
                                            read splits ({split: examples}) and settles what
                                            they, the model config and the labels recorded
                                            with the starting model decide, in a copy
    write_run_files(run)                    the task's own files beside run.json (NER's labels)
    recorded_settings()                     {name: JSON value}: the task's settings recorded in
                                            run.json (a later command that changes one is told)
    training_only_settings                  names of those that only training reads (a command
                                            that only evaluates or predicts gives none)
    training_data(examples)                 what of the training examples identifies them (the
                                            examples; NER's read file without its path)
    records(examples, split, tokenizer, run)   `SplitRecords`: the split's `tf.train.Example`s
                                            (streamed) and its `index`, what `evaluate` /
                                            `baselines` / `write_predictions` need beyond the
                                            examples, complete when returned (`Split.index`)
    padding_record()                        a record with is_real_example=0 (TPU padding)
    existing_records(split)                 TFRecord paths when the split's records exist
                                            (pre-training's --input_file), else None
    input_dataset(files, batch_size, ...)   the split's batches (default: the TFRecords parsed
                                            with feature_spec)
    training_steps(run, examples, num_records)   (num_train_steps, num_warmup_steps)
    eval_batches                            None, or batches to evaluate on repeated records
    compare_with_start                      True: a training run also evaluates the starting
                                            model (before its first step) and prints its
                                            metrics beside the trained model's
    examples_per_row(run)                   the examples a row of the task's own training input
                                            holds, for the progress lines (default 1.0)

The model side (`features` are the decoded TFRecord batch: a dict of int32 / float32 tensors
`[B, ...]`, one replica's share; packed training rows, `--max_sequences_per_row`, add
`bert_runner.packing`'s features and hold each other feature per sequence slot, `[B, K, ...]`):

    name                                    str: identifies the task's runs in an output_dir
    model_config(config)                    the config the model is built from (and written
                                            with the checkpoint), from --bert_config_file's
    max_seq_length                          int: the records' sequence length
    build_model(config, bilstm_on_top=False, modes=None)   a `modeling.BertTaskModel` (names
                                            its TF1 head), a BiLSTM under the head with
                                            --bilstm_on_top, its encoder's `EncoderModes`
    initializer(model)                      None, or a function initialising a model that has
                                            no --init_checkpoint (a student from its teacher)
    feature_spec(is_training)               {name: tf.io.FixedLenFeature} of the TFRecords
    loss(model, features, training)         (scalar float32 loss, {name: scalar metric})
    predict_step(model, features)           {name: tensor [B, ...]}, for evaluation and prediction
    evaluate(outputs, global_step, split, output_dir)   {name: numpy scalar}: the
                                            eval_results.txt values (NER also writes its files)
    baselines(outputs, split)               {name: text}: chance / majority figures beside them
    write_predictions(batches, split, output_dir)   the task's prediction files
    finish(result, output_dir)              after a run: scores of the predictions, summaries
    flops_per_example(config)               training model FLOPs of one example (for logs)

`outputs` is `collect(batches)`: the `predict_step` values of the whole split, concatenated in
file order, plus `batch_index` `[N]` (the batch of each row, for per-batch means such as the
Estimator's `loss`). `write_predictions` gets the batches themselves, so a task can stream them.
"""
import copy
import dataclasses
from typing import Iterable

import numpy as np

# The splits a fine-tuning script usually offers, each written to <name>.tf_record.
STANDARD_SPLITS = {"train": "train", "eval": "eval", "predict": "predict"}


@dataclasses.dataclass(frozen=True)
class SplitRecords:
    """What `Task.records` returns for one split.

    records: the split's `tf.train.Example`s in file order, read once (a generator streams them
      to their file). index: what `evaluate`, `baselines` and `write_predictions` need beyond
      the examples to turn the outputs back into the task's (the classifier's window counts,
      SQuAD's windows, NER's windowed set), complete when `records` returns; None where they
      need nothing more. The driver hands it on as the split's `Split.index`.
    """

    records: Iterable
    index: object = None


class Task:
    """Base class of the tasks; see the module docstring for the contract."""

    name = None
    max_seq_length = None
    splits = STANDARD_SPLITS
    eval_batches = None
    compare_with_start = False
    training_only_settings = ()

    # The data side.

    def read_examples(self, split, run=None, labels=None):
        """The input of `split` ("train", "eval" or "predict"), read and checked; `run` is the
        command's `RunConfig` (None outside one); `labels`: the `RecordedLabels` of the model the
        run starts from, as `settle` receives them (None: none recorded, or outside a command).

        The driver reads every split the run needs before it converts any, so bad dev or test
        input fails in seconds, before the training set's conversion or the fine-tuning.
        """
        raise NotImplementedError

    def settle(self, examples, run, config=None, labels=None):
        """The task the rest of the run uses, once every split is read (`{split: examples}`; a
        split with `existing_records` has none) and `config` (`model_config`'s) is known: checks
        across the splits, and returns a copy (`_settled`) holding what they or the config
        decide (NER's labels, also from `labels`: the `bert_runner.runs.labels.RecordedLabels`
        of the model the run starts from, `StartingPoint.labels`; None: none), or this task
        when nothing is; this one is left as constructed."""
        return self

    def _settled(self, **values):
        """A copy of this task with `values` as its attributes (`settle`'s result)."""
        task = copy.copy(self)
        vars(task).update(values)
        return task

    def write_run_files(self, run):
        """Writes the task's own files in `run.output_dir` once the driver has accepted it (it
        holds no other task's run), before any record is written."""

    def recorded_settings(self):
        """`{name: JSON value}` of the task's own settings that shape its records or outputs,
        recorded in run.json beside the run's hyper-parameters; a later command into the same
        output_dir that changes one is warned that the checkpoints were trained otherwise."""
        return {}

    def training_data(self, examples):
        """What identifies the training examples `read_examples("train")` returned, hashed into
        the run's identity (`bert_runner.run_identity`): their content, not where they were
        read from. Default: the examples themselves (dataclasses of their text and labels)."""
        return examples

    def records(self, examples, split, tokenizer, run):
        """The `SplitRecords` of `split`: its `tf.train.Example`s in file order, and the index
        `evaluate` / `write_predictions` read to turn the results back into the task's outputs
        (SQuAD's windows, the classifier's window counts, NER's windowed set: `Split.index`);
        `run`: the command's `RunConfig` (None outside one). `examples` are left as they are.
        """
        raise NotImplementedError

    def padding_record(self):
        """The `tf.train.Example` appended on TPU to fill the last evaluation and prediction
        batch: all zeros, `is_real_example=0` (or what the task's metrics skip)."""
        raise NotImplementedError(f"{type(self).__name__} has no padding record")

    def existing_records(self, split):
        """The TFRecord paths of `split` when its records already exist (`settle` checks them
        against the model config), read as a stream and not counted; None: the driver writes
        them."""
        return None

    def input_dataset(self, files, batch_size, is_training, sequences_per_row=1, **kwargs):
        """The `tf.data.Dataset` of feature batches of `files` (one replica's `batch_size`):
        the TFRecords parsed with `feature_spec` (or, `sequences_per_row` > 1, with the packed
        records' `bert_runner.packing.packed_feature_spec` of it); `kwargs` as
        `inputs.tfrecord_dataset`'s (input_context, seed, drop_remainder, repeat). Pre-training
        from text overrides it."""
        from bert_runner import inputs, packing
        spec = self.feature_spec(is_training)
        if sequences_per_row > 1:
            spec = packing.packed_feature_spec(spec, self.max_seq_length, sequences_per_row)
        return inputs.tfrecord_dataset(files, spec, batch_size, is_training=is_training, **kwargs)

    def examples_per_row(self, run):
        """The examples a row of the task's own training input for `run` (a `RunConfig`) holds
        on average, for the progress lines: 1.0 (a row is an example); None where the rows are
        not counted (pre-training's packed records, read as a stream); pre-training from text
        gives the pairs a row of its packed pipeline holds. Rows the driver packed
        (`--max_sequences_per_row`) are counted by the driver."""
        return 1.0

    def training_steps(self, run, examples, num_records):
        """(num_train_steps, num_warmup_steps) of `run` (a `RunConfig`) for the training split.

        The original scripts count the training examples (`RunConfig.training_steps`); a task
        counts what its original counted instead (SQuAD questions, NER windows = `num_records`).
        """
        return run.training_steps(len(examples))

    # The model side.

    def model_config(self, config):
        """The config of the model this task trains, from the one read: by default the same
        (pre-training records its objective in it, `modeling.bert.config.OBJECTIVE_KEY`). Raises
        ValueError naming the flag for a config the task cannot train."""
        return config

    def build_model(self, config, bilstm_on_top=False, modes=None):
        """The task model for `config` (a `modeling.BertConfig`), built, under the caller's scope;
        `bilstm_on_top` (`--bilstm_on_top`): a BiLSTM between the encoder and the head; `modes`:
        its encoder's `EncoderModes` (how it computes: recomputation, static shapes)."""
        raise NotImplementedError

    def initializer(self, model):
        """What initialises `model` for a run with no `--init_checkpoint` and no checkpoint to
        resume: a function of no arguments (a distillation student from its teacher), or None
        (the model's own initialisation)."""
        return None

    def feature_spec(self, is_training):
        """`{feature name: tf.io.FixedLenFeature}` of the task's TFRecords for training or not."""
        raise NotImplementedError

    def loss(self, model, features, training):
        """`(loss, metrics)`: the scalar loss to minimise and `{name: scalar}` to log beside it."""
        raise NotImplementedError

    def predict_step(self, model, features):
        """`{name: tensor [B, ...]}` per batch: what `evaluate` and `write_predictions` read."""
        raise NotImplementedError

    def evaluate(self, outputs, global_step, split, output_dir):
        """`{name: value}` for eval_results.txt from `collect`ed `predict_step` outputs of
        `split` (the `bert_runner.splits.Split`: its `examples` and `index`); a task may write
        its own evaluation files in `output_dir` (the run's, a seed's own in a sweep).

        Values should be numpy scalars (np.float32 metrics, np.int64 global_step), so the file
        shows the original's text.
        """
        raise NotImplementedError(f"{type(self).__name__} has no evaluation")

    def baselines(self, outputs, split):
        """`{metric name: "<what> <value>"}` to print beside the metric (chance, majority) of
        `split`'s outputs."""
        return {}

    def write_predictions(self, batches, split, output_dir):
        """Writes the prediction files of `split` from the iterator of `predict_step` batches."""
        raise NotImplementedError(f"{type(self).__name__} has no prediction output")

    def finish(self, result, output_dir):
        """Runs after evaluation and prediction, with the `bert_runner.driver.RunResult`
        (`eval_results`, and `predictions`: what `write_predictions` returned)."""

    def flops_per_example(self, config):
        """Training model FLOPs of one example; None to leave throughput logs without them."""
        return None

    def tokens_per_example(self):
        """Positions of the padded grid one training example fills, for tokens/s: a row of
        `max_seq_length` (a task running the encoder on several rows an example says so)."""
        return self.max_seq_length


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
