"""The Task contract: everything a task (GLUE, SQuAD, SWAG, NER, pre-training) tells the driver.

A task is one package of the tasks' package holding one `Task` subclass built from its script's
flags. `bert_runner.driver.run(task, run)` does the rest, the same way for every task: refuses a
run with nothing to do, reads every split the do_* flags ask for (all before any is converted),
writes their TFRecords (atomically, padded for TPU), counts the training steps, then trains,
evaluates and predicts (`run_task`) and hands the results back to the task (`finish`).

The data side (`examples` are whatever the task's reader returns, usually a list):

    splits                                  {split: record name}: the splits the script offers
                                            ("train", "eval", "predict"), in order; the driver
                                            writes `<output_dir>/<record name>.tf_record`
    read_examples(split)                    the split's input, read and checked (bad input names
                                            its file and line)
    check_examples(examples)                checks across the read splits ({split: examples})
    write_run_files(output_dir)             the task's own files beside run.json (NER's labels)
    recorded_settings()                     {name: JSON value}: the task's settings recorded in
                                            run.json (a later command that changes one is told)
    training_only_settings                  names of those that only training reads (a command
                                            that only evaluates or predicts gives none)
    training_data(examples)                 what of the training examples identifies them (the
                                            examples; NER's read file without its path)
    records(examples, split, tokenizer)     yields the split's `tf.train.Example`s; keeps what
                                            `evaluate` / `write_predictions` will need
    padding_record()                        a record with is_real_example=0 (TPU padding)
    existing_records(split, config)         TFRecord paths when the split's records exist
                                            (pre-training's --input_file), else None
    input_dataset(files, batch_size, ...)   the split's batches (default: the TFRecords parsed
                                            with feature_spec)
    training_steps(run, examples, num_records)   (num_train_steps, num_warmup_steps)
    eval_batches                            None, or batches to evaluate on repeated records
    compare_with_start                      True: a training run also evaluates the starting
                                            model (before its first step) and prints its
                                            metrics beside the trained model's

The model side (`features` are the decoded TFRecord batch: a dict of int32 / float32 tensors
`[B, ...]`, one replica's share; packed training rows, `--max_sequences_per_row`, add
`bert_runner.packing`'s features and hold each other feature per sequence slot, `[B, K, ...]`):

    name                                    str: identifies the task's runs in an output_dir
    model_config(config)                    the config the model is built from (and written
                                            with the checkpoint), from --bert_config_file's
    max_seq_length                          int: the records' sequence length
    build_model(config)                     a `modeling.BertTaskModel` (names its TF1 head),
                                            with `bilstm_on_top=self.bilstm_on_top`
    initializer(model)                      None, or a function initialising a model that has
                                            no --init_checkpoint (a student from its teacher)
    feature_spec(is_training)               {name: tf.io.FixedLenFeature} of the TFRecords
    loss(model, features, training)         (scalar float32 loss, {name: scalar metric})
    predict_step(model, features)           {name: tensor [B, ...]}, for evaluation and prediction
    evaluate(outputs, global_step)          {name: numpy scalar}: the eval_results.txt values
    baselines(outputs)                      {name: text}: chance / majority figures beside them
    write_predictions(batches, split, output_dir)   the task's prediction files
    finish(result, output_dir)              after a run: scores of the predictions, summaries
    flops_per_example(config)               training model FLOPs of one example (for logs)

`outputs` is `collect(batches)`: the `predict_step` values of the whole split, concatenated in
file order, plus `batch_index` `[N]` (the batch of each row, for per-batch means such as the
Estimator's `loss`). `write_predictions` gets the batches themselves, so a task can stream them.
"""
import numpy as np

# The splits a fine-tuning script usually offers, each written to <name>.tf_record.
STANDARD_SPLITS = {"train": "train", "eval": "eval", "predict": "predict"}


class Task:
    """Base class of the tasks; see the module docstring for the contract."""

    name = None
    max_seq_length = None
    splits = STANDARD_SPLITS
    eval_batches = None
    compare_with_start = False
    training_only_settings = ()
    # --bilstm_on_top, set by the driver: `build_model` passes it to the task model.
    bilstm_on_top = False
    # --init_checkpoint, set by the driver: a task that records its labels checks them against
    # those recorded beside it (`modeling.checkpoint.run_files.labels_governing`).
    init_checkpoint = None
    # --lora_adapters, set by the driver: their head, and the labels recorded with it, replace
    # the starting checkpoint's.
    lora_adapters = None
    # --output_dir, set by the driver: where the model a run without training uses is.
    output_dir = None

    # The data side.

    def read_examples(self, split):
        """The input of `split` ("train", "eval" or "predict"), read and checked.

        The driver reads every split the run needs before it converts any, so bad dev or test
        input fails in seconds, before the training set's conversion or the fine-tuning.
        """
        raise NotImplementedError

    def check_examples(self, examples):
        """Checks across splits once all are read (`{split: examples}`), before the model is
        built: a task whose model depends on its data (NER's label list) settles it here."""

    def write_run_files(self, output_dir):
        """Writes the task's own files in `output_dir` once the driver has accepted it (it holds
        no other task's run), before any record is written."""

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

    def records(self, examples, split, tokenizer):
        """Yields the `tf.train.Example`s of `split`, in file order.

        The task keeps here what its `evaluate` / `write_predictions` need to turn the results
        back into its outputs (the examples, SQuAD's windows, NER's windows).
        """
        raise NotImplementedError

    def padding_record(self):
        """The `tf.train.Example` appended on TPU to fill the last evaluation and prediction
        batch: all zeros, `is_real_example=0` (or what the task's metrics skip)."""
        raise NotImplementedError(f"{type(self).__name__} has no padding record")

    def existing_records(self, split, config):
        """The TFRecord paths of `split` when its records already exist (checked against the
        model `config`), read as a stream and not counted; None: the driver writes them."""
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

    def build_model(self, config):
        """The task model for `config` (a `modeling.BertConfig`), built, under the caller's scope."""
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

    def finish(self, result, output_dir):
        """Runs after evaluation and prediction, with the `bert_runner.driver.RunResult`
        (`eval_results`, and `predictions`: what `write_predictions` returned)."""

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
