"""Loading the model an export serves, and refusing a checkpoint that is not that model.

A fine-tuned checkpoint is checked against what wrote it before any weight is read: its run.json
names the script and task (an NER model is not exported as SQuAD, nor an MRPC model as CoLA), it
holds the format's head, of the task's number of labels; then every weight must load
(`modeling.checkpoint`, strict). Messages name `--checkpoint`.
"""
import dataclasses

from bert_runner import run_identity
from bert_runner.runs import checkpoints
from bert_runner.runs.record import run_record
from bert_runner.serving import registry
from modeling import families


def load_fine_tuned(model, checkpoint, export_format, config_file=None, task_name=None,
                    label_source=None):
    """`model` (a `BertTaskModel` of a fine-tuning script) with every weight from `checkpoint`.

    Args:
      model: the task model to fill, e.g. `BertSpanLabeler(config)`.
      checkpoint: the script's output_dir (its latest ckpt-N), a ckpt-N prefix, or an
        original-layout TF1 checkpoint holding the head (`model.tf1_head_variables()`).
      export_format: the --format exported (a `registry.ServingFormat` name with a `script`): a
        checkpoint whose run.json names another script's run is refused, saying which --format
        it needs.
      config_file: the `--bert_config_file`, for the messages.
      task_name: the --task_name of a format whose script runs several tasks (run_classifier's),
        checked against run.json.
      label_source: what gives the number of labels, for the messages ("--task_name=MRPC").
    Raises:
      ValueError naming the checkpoint: the run that wrote it (its output_dir's run.json) was
      another script's or another task's; it has no such head (a pre-training checkpoint) or one
      of another number of labels; a variable is missing or mis-shaped (another config); its
      files are missing, truncated or corrupt.
    """
    found = checkpoints.open_checkpoint(checkpoint, _FLAG)
    serving_format = registry.get(export_format)
    _check_fine_tuned_task(found, serving_format, task_name)
    _check_head(found, model, serving_format, label_source)
    found.load_into(model, strict=True, config_file=config_file)
    return model


_FLAG = "--checkpoint"


def _check_head(found, model, serving_format, label_source):
    """Refuses a checkpoint (`found`, a `modeling.checkpoint.Checkpoint`) without the model's
    head (a pre-training one, or another task's), or with a head of another number of labels than
    the task's (MNLI's 3 as MRPC's 2)."""
    prefix = found.location
    tf1_name, weights = model.tf1_head_variables()[0]
    names = (tf1_name, weights.path)  # the head's weights [outputs, hidden], both layouts
    heads = [(name, found.shapes[name]) for name in names if name in found.shapes]
    if not heads:
        raise ValueError(
            f"Checkpoint {prefix} ({_FLAG}) has no {serving_format.head} head "
            f"({' or '.join(names)}): export a checkpoint of {serving_format.script} (its "
            "output_dir), not a pre-training one or another script's")
    for name, shape in heads:
        if len(shape) == 2 and shape[0] != weights.shape[0] and label_source:
            raise ValueError(
                f"Checkpoint {prefix} ({_FLAG}) has a classifier head of {shape[0]} labels "
                f"({name} {list(shape)}), {label_source} has {weights.shape[0]}: export it with "
                "the labels it was fine-tuned on")


def _check_fine_tuned_task(found, serving_format, task_name):
    """Refuses to export the checkpoint `found` as `serving_format` (and `task_name`) when the
    run.json of the run that wrote it names another script (an NER model as SQuAD) or another task
    of the script (an MRPC checkpoint exported as CoLA: both have 2 labels, only the record
    tells)."""
    prefix, record_path, record = found.location, found.record_path, found.record
    recorded = (record or {}).get("task")
    if not isinstance(recorded, str):
        return
    recorded_format = registry.of_script_task(recorded)
    recorded_task = recorded.partition("/")[2]
    if recorded_format is serving_format:
        if task_name and recorded_task and (serving_format.model_family(recorded_task)
                                            != serving_format.model_family(task_name.lower())):
            raise ValueError(
                f"Checkpoint {prefix} ({_FLAG}) was fine-tuned on {recorded_task.upper()} "
                f"({record_path}), not on --task_name={task_name}: export it with "
                f"--task_name={recorded_task.upper()}")
        return
    if recorded_format is None:
        advice = f"export a checkpoint of {serving_format.script} (its output_dir)"
    else:
        advice = f"export it with --format={recorded_format.name}" + (
            f" --task_name={recorded_task.upper()}" if recorded_task else "")
    raise ValueError(
        f"Checkpoint {prefix} ({_FLAG}) was written by a {recorded} run "
        f"({record_path}), not by {serving_format.script}: {advice}")


# Export flags that must serve the model as its run trained it (run.json's names): the vector
# of a sentence encoder is its pooling; another casing gives the model other word-pieces.
_AS_TRAINED = ("do_lower_case",) + run_identity.MODEL_NAMES_NO_TEXT
# Export flags that may serve it otherwise (how its outputs are read), said in a warning.
_AS_ASKED = ("max_seq_length", "doc_stride", "max_query_length", "long_documents",
             "window_aggregation", "version_2_with_negative")


def follow_run_record(export_config):
    """`export_config` (an `ExportConfig`) with the settings the command line left out (not in
    its `given`) taken from what the run that wrote its checkpoint recorded (its run.json): the
    sequence length it was trained at, its casing, its pooling and normalisation, its
    long-document or SQuAD windows (and SQuAD's question length), its SQuAD version, and a
    run_classifier run's --task_name. A given casing, pooling or normalisation other than the
    run's is refused naming the record (the model would read other word-pieces, or the vector
    would be another model's); another sequence length, windows or version is served as asked,
    with a warning.
    A checkpoint without a run.json (original layout, Hugging Face) keeps the settings as given."""
    from absl import logging

    checkpoint = export_config.checkpoint
    path, record = run_record(checkpoint)
    if not record:
        return export_config
    followed = {}
    for flag in _AS_TRAINED + _AS_ASKED:
        if record.get(flag) is None:
            continue
        given, recorded = getattr(export_config, flag), record[flag]
        if flag not in export_config.given:
            followed[flag] = recorded
        elif given != recorded and flag in _AS_TRAINED:
            raise ValueError(
                f"--{flag}={_flag_text(given)}, but {checkpoint} was trained with "
                f"--{flag}={_flag_text(recorded)} ({path}): pass that, or leave --{flag} out")
        elif given != recorded:
            logging.warning("--%s=%s, but %s was trained with --%s=%s (%s): served as asked",
                            flag, given, checkpoint, flag, recorded, path)
    followed = dataclasses.replace(export_config, **followed)
    return dataclasses.replace(followed, task_name=_recorded_task_name(followed, record))


def _recorded_task_name(export_config, record):
    """--task_name, or where a classifier's export leaves it out the task its run fine-tuned (a
    given one is checked against the record when the checkpoint loads,
    `_check_fine_tuned_task`)."""
    recorded = record.get("task")
    if (export_config.task_name or not isinstance(recorded, str)
            or not recorded.startswith("classifier/")
            or export_config.format not in registry.CLASSIFIER_FORMATS or export_config.pooling):
        return export_config.task_name
    return recorded.partition("/")[2]


def _flag_text(value):
    return str(value).lower() if isinstance(value, bool) else str(value)


def recorded_bilstm_on_top(checkpoint):
    """Whether the run that wrote `checkpoint` was fine-tuned with `--bilstm_on_top` (its
    run.json says; false without one): the export builds the model it trained."""
    record = checkpoints.open_checkpoint(checkpoint, _FLAG).record
    return bool((record or {}).get("bilstm_on_top", False))


def load_encoder(config, checkpoint, config_file=None):
    """The encoder of `config`'s family with the whole encoder of `checkpoint` (original layout,
    ours, or Hugging Face's), whatever heads it also holds; refused naming the checkpoint and
    `config_file` when the encoder is not all there (`modeling.checkpoint`)."""
    model = families.build_model("encoder", config)
    checkpoints.initialize_from_checkpoint(model, checkpoint, flag=_FLAG, config_file=config_file)
    return model


def recorded_model_options(checkpoint):
    """The task model's options the run that wrote `checkpoint` recorded (its run.json): the
    export builds the model as it was fine-tuned."""
    return {"bilstm_on_top": recorded_bilstm_on_top(checkpoint)}


def recorded_script_task(checkpoint):
    """run.json's `task` of the run that wrote `checkpoint` ("classifier/mrpc", "ner"), or
    None."""
    recorded = (run_record(checkpoint)[1] or {}).get("task")
    return recorded if isinstance(recorded, str) and recorded else None


def recorded_task(checkpoint):
    """The task of the run that wrote `checkpoint` (run.json's `task` after "<script>/":
    "mrpc" of "classifier/mrpc"), or None."""
    return (recorded_script_task(checkpoint) or "").partition("/")[2] or None


def recorded_labels(checkpoint, flag):
    """The label_list.txt the run wrote beside `checkpoint`; refused naming `flag` (the flag that
    gives the labels instead) without one."""
    labels = checkpoints.open_checkpoint(checkpoint, _FLAG).labels
    if not labels:
        raise ValueError(f"--checkpoint={checkpoint} has no label_list.txt beside it: give the "
                         f"model's labels in order with {flag}")
    return labels


def serving_precision(model, mixed_precision):
    """`model` with bfloat16 weights under --mixed_precision=bf16, else itself."""
    if mixed_precision != "bf16":
        return model
    from modeling.inference import with_bfloat16_weights

    return with_bfloat16_weights(model)
