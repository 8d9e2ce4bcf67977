"""A run as a plan of values, made once by the driver before any work:

    start, checkpoint = resolve_start(run, task.max_seq_length)   # the one walk of the path
    plan = RunPlan(run, start, config, identity, seeds, existing, made)
    plan = dataclasses.replace(plan, splits=..., num_train_steps=..., num_warmup_steps=...)

`resolve_start` reads `--init_checkpoint` once (`bert_runner.runs.model_files.resolve`: the
checkpoint opened, its layout, its run's record, the labels beside it, the files it supplies)
into a `StartingPoint`; the identity check (`driver.prepare`), the fit check of the run's one
model (`driver.check_start`), the trainer and the writers read that, and load the one opened
`checkpoints.RunCheckpoint` that comes with it: nothing opens or classifies the path again. The
plan holds values only (no TensorFlow object, no model, no strategy), so an engine of another
backend can run the same plan; the opened checkpoint, the task, the tokenizer and the strategy
travel beside it.
"""
import dataclasses
from typing import Optional

from bert_runner import run_identity
from bert_runner.runs import labels as run_labels, model_files
from bert_runner.seeds import seed_dir


@dataclasses.dataclass(frozen=True)
class StartingPoint:
    """What a run starts from, resolved once from its flags (`resolve_start`).

    path: `--init_checkpoint` as given; None: none (the model's own initialisation, or the
      task's: a student from its teacher).
    layout: the opened checkpoint's layout (`modeling.checkpoint`: "original", "run",
      "hugging_face", "tf_hub"); None without a path.
    files: the `runs.model_files.ModelFiles`: the family's config (`modeling.BertConfig`, before
      the task's `model_config`), the file it was read from, named in messages
      (`--bert_config_file`, a Hugging Face `config.json`, a run's bert_config.json, a released
      checkpoint itself), and the vocabulary (`--vocab_file`, else the one the path supplies).
    labels: the `runs.labels.RecordedLabels` that govern the model's labels (output_dir's when
      it holds a checkpoint, else the LoRA adapters', else those beside the path), or None.
    identity: `{name: value}` the run's identity takes of it (`run_identity.of_start`: its
      content hash; for a directory, its newest checkpoint now).
    """

    path: Optional[str]
    layout: Optional[str]
    files: model_files.ModelFiles
    labels: Optional[run_labels.RecordedLabels]
    identity: dict


def resolve_start(run, max_seq_length, flag="--init_checkpoint"):
    """(`StartingPoint`, the opened `runs.checkpoints.RunCheckpoint` or None) of `run` (a
    `RunConfig`), whose `max_seq_length` is checked against the config's positions. Raises
    ValueError (FileNotFoundError) naming the flag and file of what does not do."""
    files, checkpoint = model_files.resolve(
        run.bert_config_file, run.vocab_file, run.init_checkpoint, max_seq_length, flag,
        run.lora_adapters, open_checkpoint=True)
    started = layout = None
    if checkpoint is not None:
        layout = checkpoint.layout
        if checkpoint.labels is not None:  # read beside it when it was opened
            started = run_labels.RecordedLabels(run.init_checkpoint, tuple(checkpoint.labels),
                                                checkpoint.labels_file)
    labels = run_labels.governing(run.output_dir, run.lora_adapters, started)
    return StartingPoint(run.init_checkpoint, layout, files, labels,
                         run_identity.of_start(run.init_checkpoint)), \
        checkpoint


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """One command's run, as values (see the module docstring).

    run: the `RunConfig`, its model files those of `start` (a seed's own in a sweep: `for_seed`).
    start: the `StartingPoint`. config: the task's model config (`Task.model_config` of
    `start.files.config`), which the model is built from and run.json's bert_config.json records.
    identity: the run's identity (`run_identity.of`), checked against output_dir's records.
    seeds: the `--seeds` of a sweep (empty: one run). existing: `{split: TFRecord paths, or None
    where the driver writes them}` of the splits the command asks for, in the task's order.
    made: the folders this command created (removed when it fails before writing what is kept).
    splits: `{split: bert_runner.splits.Split}` once written (empty before).
    num_train_steps, num_warmup_steps: the training schedule (0 without training).
    """

    run: object
    start: StartingPoint
    config: object
    identity: dict
    seeds: tuple = ()
    existing: dict = dataclasses.field(default_factory=dict)
    made: tuple = ()
    splits: dict = dataclasses.field(default_factory=dict)
    num_train_steps: int = 0
    num_warmup_steps: int = 0

    def for_seed(self, seed):
        """The plan of one run of the sweep: its seed, in output_dir's `seed_<seed>`."""
        return dataclasses.replace(
            self, run=self.run.with_seed(seed, seed_dir(self.run.output_dir, seed)),
            identity={**self.identity, "random_seed": seed})
