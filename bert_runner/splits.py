"""The data side of `bert_runner.driver`: which splits a run asks for, and each split's TFRecords
(written from the task's records, or the task's existing files) as a `Split`."""
import dataclasses
import os
from typing import Optional, Sequence

from absl import logging

from bert_runner import packing, tfrecords

# The RunConfig fields of each split's flag and batch size.
_DO_FLAG = {"train": "do_train", "eval": "do_eval", "predict": "do_predict"}
_BATCH_SIZE = {"train": "train_batch_size", "eval": "eval_batch_size",
               "predict": "predict_batch_size"}
# The original scripts' messages, word for word (run_classifier's stray quote included).
_NOTHING_TO_DO = {
    ("train", "eval", "predict"):
        "At least one of `do_train`, `do_eval` or `do_predict' must be True.",
    ("train", "predict"): "At least one of `do_train` or `do_predict` must be True.",
    ("train", "eval"): "At least one of `do_train` or `do_eval` must be True.",
}

@dataclasses.dataclass(frozen=True)
class Split:
    """One split's TFRecords as the driver reads them.

    files: the TFRecord paths. num_examples: real records (for logs and outputs), None when
    unknown (pre-training's record files are read as a stream).
    batch_size: the global batch size. num_padding: TPU padding records among them (eval and
    predict sets on TPU: `is_real_example=0`). repeat/max_batches: read the files repeatedly and
    stop after `max_batches` batches (pre-training evaluation's `max_eval_steps`).
    sequences_per_row: more than 1 for packed records (`bert_runner.packing`), then `num_rows`
    records hold the `num_examples`. examples: what the task's `records` wrote them from, as
    read; index: the `SplitRecords.index` that `records` returned beside them (the classifier's
    window counts, SQuAD's windows, NER's windowed set), for the task's `evaluate`, `baselines`
    and `write_predictions`; both None for records the task did not need written.
    """

    files: Sequence[str]
    num_examples: Optional[int]
    batch_size: int
    num_padding: int = 0
    repeat: bool = False
    max_batches: Optional[int] = None
    sequences_per_row: int = 1
    num_rows: Optional[int] = None
    examples: object = None
    index: object = None


class NothingToDoError(ValueError):
    """A run whose do_* flags ask for none of the task's splits."""


def wanted_splits(task, run):
    """The task's splits whose do_* flag `run` sets, in the task's order; raises
    NothingToDoError (the original script's message) when there is none."""
    wanted = [split for split in task.splits if getattr(run, _DO_FLAG[split])]
    if not wanted:
        offered = tuple(task.splits)
        raise NothingToDoError(_NOTHING_TO_DO.get(offered) or "At least one of %s must be True."
                               % ", ".join("`%s`" % _DO_FLAG[split] for split in offered))
    return wanted


def write_split(task, examples, split, tokenizer, run):
    """Writes `<output_dir>/<record name>.tf_record` of `split` from `task.records`; on TPU the
    evaluation and prediction records are followed by `task.padding_record()` up to a multiple of
    the batch size; with `--max_sequences_per_row` the training records are packed
    (`bert_runner.packing.RecordPacker`). Returns the split's `Split`."""
    batch_size = getattr(run, _BATCH_SIZE[split])
    path = os.path.join(run.output_dir, task.splits[split] + ".tf_record")
    padding = task.padding_record() if run.on_tpu and split != "train" else None
    converted = task.records(examples, split, tokenizer, run)
    if split == "train" and run.max_sequences_per_row > 1:
        return _write_packed(task, converted.records, path, batch_size,
                             run.max_sequences_per_row)
    num_records, num_padding = tfrecords.write_records(path, converted.records, padding,
                                                       batch_size)
    return Split([path], num_records, batch_size, num_padding=num_padding, examples=examples,
                 index=converted.index)


def _write_packed(task, split_records, path, batch_size, sequences_per_row):
    packer = packing.RecordPacker(task.feature_spec(True), task.max_seq_length, sequences_per_row)
    tfrecords.write_records(path, packer.pack(split_records))
    sequences, rows, unpacked, packed = packer.fit.stats()
    logging.info(
        "train: %d sequences packed into %d rows of up to %d (%.2f a row): padding %.1f%% -> "
        "%.1f%% of the tokens; a batch of %d rows holds about %d sequences",
        sequences, rows, sequences_per_row, sequences / max(rows, 1), 100 * unpacked,
        100 * packed, batch_size, round(batch_size * sequences / max(rows, 1)))
    return Split([path], sequences, batch_size, sequences_per_row=sequences_per_row,
                 num_rows=rows)


def existing_split(task, split, files, run):
    """The `Split` of records the task did not need written (read as a stream, not counted)."""
    if split == "eval" and task.eval_batches:
        return Split(files, None, run.eval_batch_size, repeat=True, max_batches=task.eval_batches)
    return Split(files, None, getattr(run, _BATCH_SIZE[split]))
