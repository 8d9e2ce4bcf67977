"""A starting point opened with what the run that wrote it recorded:

    found = open_checkpoint(path, flag="--init_checkpoint", lora_adapters=None)
    found.recorded               its run's `record.RunRecord`, read once (None: a Hugging Face one)
    found.record_path, .record   its run's run.json (None, None: none, as an original checkpoint)
    found.labels, .labels_file   the labels recorded beside it and their label_list.txt, or None
    found.family                 the family its run recorded, else the one its names are

`modeling.checkpoint` reads the layouts and knows no run nor flag; here its checkpoint is read as
the family the run recorded, a mismatch of shapes is explained by the run's record: the config it
trained (its bert_config.json beside run.json), the task it trained; and its refusals, which name
the file, name the flag that gave it too (`checkpoint_flags.naming_flag`).
"""
import dataclasses
import functools
import os
from typing import Optional

from bert_runner.runs import labels as run_labels
from bert_runner.runs.checkpoint_flags import ADAPTERS_FLAG, describe_source, naming_flag
from bert_runner.runs.record import FAMILY_KEY, RunRecord, read_record, read_run_file
from modeling import checkpoint as model_checkpoint
from modeling import families

# The config keys that decide the encoder's shapes.
_ARCHITECTURE_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                      "intermediate_size", "max_position_embeddings", "type_vocab_size",
                      "embedding_size")


def config_named(model, config_file=None):
    """How a message names the config `model` was built from: `config_file` when known, else
    the flag that gives it, with what its family's file is when it is not BERT's."""
    if config_file:
        return str(config_file)
    family_file = families.of_model(model).config_file
    if family_file == "bert_config.json":
        return "--bert_config_file"
    return f"--bert_config_file (the {family_file})"


@dataclasses.dataclass(frozen=True)
class RunCheckpoint(model_checkpoint.Checkpoint):
    """A `modeling.checkpoint.Checkpoint`, the flag that gave it (named in its refusals) and
    what the run that wrote it recorded (see the module docstring); its `do_lower_case` is the
    run's where it recorded one."""

    flag: Optional[str] = None
    recorded: Optional[RunRecord] = dataclasses.field(default=None, repr=False)
    labels: Optional[list] = None
    labels_file: Optional[str] = None

    @property
    def record_path(self):
        return self.recorded and self.recorded.path

    @property
    def record(self):
        return self.recorded and self.recorded.record

    def load_into(self, model, strict, config_file=None):
        """`Checkpoint.load_into`, its refusals naming `flag`, and `config_file` or its flag."""
        with naming_flag(self.flag):
            return super().load_into(model, strict, config_named(model, config_file))

    def check_fits(self, model, config_file=None, task=None, read_tensors=True):
        """`Checkpoint.check_fits`, a mismatch explained by the record of the run that wrote
        this checkpoint: the encoder's shapes, the config that run trained against
        `config_file`; the head's alone, that run's task when it is not `task` (the task
        loading it; None: not known). Its refusals name `flag`."""
        with naming_flag(self.flag):
            return super().check_fits(model, config_named(model, config_file), read_tensors,
                                      functools.partial(self._explain, task))

    def _explain(self, task, model, config_file, in_encoder):
        if in_encoder:
            return self._recorded_config_hint(model, config_file)
        return self._recorded_task_hint(task)

    def _recorded_task_hint(self, task):
        """The line saying that a head of other shapes is another task's, when the run that
        wrote this checkpoint recorded a task other than `task` (or `task` is not known)."""
        recorded = (self.record or {}).get("task")
        if not recorded:
            return []
        if recorded == task:
            return [f"  it was written by a run of this task ({recorded!r}, {self.record_path}) "
                    "with a head of other shapes: another label set"]
        return [f"  it was written by a run of task {recorded!r} ({self.record_path}): another "
                "task's head under the same names"]

    def _recorded_config_hint(self, model, config_file):
        """The line naming the config the run that wrote this checkpoint trained (its
        bert_config.json beside run.json) and the keys where it differs from `model`'s (built
        from `config_file`): the encoder's shapes are another model size's."""
        if not self.record_path:
            return []
        recorded_file = os.path.join(os.path.dirname(self.record_path), "bert_config.json")
        recorded = read_run_file(recorded_file)
        if recorded is None:
            return [f"  the encoder is another model size's than "
                    f"{config_file} describes: pass the config its run "
                    f"({self.record_path}) trained"]
        given = model_checkpoint.encoder_of(model).config.to_dict()
        differ = [f"{key} {given[key]!r}, the run's {recorded[key]!r}"
                  for key in _ARCHITECTURE_KEYS
                  if key in given and key in recorded and given[key] != recorded[key]]
        if not differ:  # the run's own sizes: the shapes differ for another reason
            return []
        return [f"  the encoder is another model size's: its run ({self.record_path}) trained "
                f"the model of {recorded_file}, not that of {config_file}"
                f" ({'; '.join(differ)}): pass --bert_config_file={recorded_file}, or leave it "
                "out"]


def open_checkpoint(path, flag="--init_checkpoint", lora_adapters=None):
    """The `RunCheckpoint` at `path` (any starting point `modeling.checkpoint.open_checkpoint`
    reads; `flag` is named in the messages): a TensorFlow checkpoint with the record (read once:
    `recorded`) and labels of the run that wrote it, read as the family that run recorded.

    Raises ValueError naming a run.json beside it that is not a JSON object, or that records a
    family this version does not know; the reader's errors otherwise.
    """
    path = os.fspath(path)
    recorded = family = None
    if not model_checkpoint.is_hugging_face(path):
        # The record first: an unreadable run.json is refused whatever the checkpoint beside it.
        recorded = read_record(path)
    record_path, record = (recorded.path, recorded.record) if recorded else (None, None)
    with naming_flag(flag):
        if (record or {}).get(FAMILY_KEY):
            try:
                family = families.get(record[FAMILY_KEY])
            except ValueError as e:
                prefix = model_checkpoint.open_checkpoint(path).location
                raise ValueError(f"{describe_source(prefix, flag)} was written by a run of "
                                 f"another version ({record_path}): {e}") from None
        found = model_checkpoint.open_checkpoint(path, lora_adapters, family)
    fields = {f.name: getattr(found, f.name) for f in dataclasses.fields(found)}
    # A run's label_list.txt, or the one an export to a Hugging Face directory writes into it.
    labels = run_labels.recorded(found.location, recorded and recorded.directories)
    fields.update(labels=labels and list(labels.labels), labels_file=labels and labels.file)
    if recorded:
        fields.update(do_lower_case=(record or {}).get("do_lower_case"))
    return RunCheckpoint(**fields, flag=flag, recorded=recorded)


def check_adapters_task(path, task_name, base):
    """Refuses `--lora_adapters` without a base to load them onto (`base`: --init_checkpoint),
    or of another task than `task_name` (`modeling.checkpoint.check_adapters_task`)."""
    if not base:
        raise ValueError(f"{ADAPTERS_FLAG}={path} needs --init_checkpoint: the base model the "
                         "LoRA run started from, which the adapters are loaded onto")
    with naming_flag(None):
        model_checkpoint.check_adapters_task(path, task_name)


def load_checkpoint(model, path, strict=True, flag=None, config_file=None, lora_adapters=None):
    """`open_checkpoint(path, flag, lora_adapters).load_into(model, strict, config_file)`."""
    return open_checkpoint(path, flag, lora_adapters).load_into(model, strict, config_file)


def initialize_from_checkpoint(model, init_checkpoint, flag="--init_checkpoint",
                               config_file=None, lora_adapters=None):
    """Loads `init_checkpoint` into `model`: the whole encoder, and the heads it has
    (`Checkpoint.load_into` with strict=False)."""
    return load_checkpoint(model, init_checkpoint, False, flag, config_file, lora_adapters)


def check_init_checkpoint(model, init_checkpoint, flag="--init_checkpoint", config_file=None,
                          lora_adapters=None, task=None, read_tensors=True):
    """`RunCheckpoint.check_fits` of `init_checkpoint` (for `task`, the loading task's name),
    before any work: returns the model's variables it would leave newly initialised."""
    return open_checkpoint(init_checkpoint, flag, lora_adapters).check_fits(
        model, config_file, task, read_tensors)
