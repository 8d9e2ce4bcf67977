"""What the LiteRT and ONNX conversions share: the model they convert (a format's
`registry.Convertible`, chosen by the `ExportConfig`), its copy on the reference kernels, the
directory they write (the model file beside export.json, whole or not at all) and the converter's
error in one line."""
import json
import os
import shutil
import uuid

from absl import logging

from bert_runner import results
from bert_runner.serving import registry
from modeling.inference import copy_with
from bert_runner.startup import check_pooling


_CONVERTS = "converts a classifier (--task_name) or an embedding model (--pooling)"


def convertible_from_config(export_config, files):
    """The `registry.Convertible` export_model.py --format=litert or onnx converts: the
    classifier of --task_name, or with --pooling the encoder (an embedding model), or (ONNX) the
    model of the task the run's run.json records (SQuAD, NER, SWAG), as their formats declare it
    (LiteRT: `ServingFormat.litert`).

    Raises ValueError (one line, naming the flags) for what these formats do not export.
    """
    fmt = "--format=%s" % export_config.format
    if export_config.mixed_precision:
        raise ValueError("%s: --mixed_precision is for SavedModels; a LiteRT model is made "
                         "smaller with --quantization" % fmt)
    if export_config.long_documents:
        raise ValueError("%s %s, not --long_documents (their windows are not in this graph): "
                         "export a SavedModel" % (fmt, _CONVERTS))
    if export_config.pooling and export_config.task_name:
        raise ValueError("%s %s, not both at once" % (fmt, _CONVERTS))
    if not export_config.pooling and not export_config.task_name:
        return _recorded_task_convertible(export_config, files, fmt)
    if export_config.pooling:
        check_pooling(export_config.pooling, files.config)
    return registry.get("embedding" if export_config.pooling else "classifier").convertible(
        export_config, files)


def _recorded_task_convertible(export_config, files, fmt):
    """The `registry.Convertible` of the run's recorded task (its run.json), refused in one line
    for a checkpoint no fine-tuning run wrote, LiteRT of a task whose format does not declare it
    (`ServingFormat.litert`) and full int8 (its calibration is a classifier's texts)."""
    from bert_runner.serving import provenance

    recorded = provenance.recorded_script_task(export_config.checkpoint)
    task = registry.of_script_task(recorded) if recorded else None
    if task is None or task.convertible is None:
        raise ValueError("%s %s, or the model of the run (SQuAD, NER, SWAG) whose run.json "
                         "--checkpoint=%s records: give one" % (fmt, _CONVERTS,
                                                               export_config.checkpoint))
    if export_config.format != "onnx" and not task.litert:
        raise ValueError("%s %s: a %s model (--checkpoint=%s) exports as a SavedModel "
                         "(--format=%s) or ONNX" % (fmt, _CONVERTS, task.name,
                                                    export_config.checkpoint, task.name))
    if export_config.quantization == "int8":  # calibrated on texts, not rows
        raise ValueError("%s --quantization=int8 %s: a %s model (--checkpoint=%s) converts with "
                         "--quantization=float32, float16 or dynamic_int8"
                         % (fmt, _CONVERTS, task.name, export_config.checkpoint))
    return task.convertible(export_config, files)


def reference_copy(model, **modes):
    """A copy of `model` (a `BertModel` or task model) on the reference kernels (`keras.ops` op
    by op), with encoder `modes` (`EncoderModes` fields): the fast kernels are XLA-compiled
    functions, which LiteRT and ONNX cannot convert."""
    return copy_with(model, kernels="reference", **modes)


def release_memory():
    """Collects Python's garbage and hands the C heap's free pages back to the system (glibc's
    malloc_trim): a conversion's intermediate copies of the weights (several times the model's
    size) are not left under what comes after it."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def first_line(error):
    """The line of a converter error that says what failed (its "error:" line), else its first."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line]
    return (errors or lines or [type(error).__name__])[0]


METADATA_FILE = "export.json"


def write_export_dir(export_dir, files, metadata):
    """Writes `files` ({name: bytes}) and `metadata` (as METADATA_FILE) into the new directory
    `export_dir`, through a temporary directory beside it renamed at the end: a reader never
    sees half of it.

    Raises:
      FileExistsError: `export_dir` exists.
      ValueError: it cannot be written (nothing is left), naming --export_dir and the reason.
    """
    export_dir = os.fspath(export_dir).rstrip("/")
    if os.path.exists(export_dir):
        raise FileExistsError("%s already exists: choose a new --export_dir" % export_dir)
    tmp_dir = "%s.tmp-%s" % (export_dir, uuid.uuid4().hex)
    try:
        os.makedirs(tmp_dir)
        for name, content in {**files, METADATA_FILE: (json.dumps(metadata, indent=2)
                                                       + "\n").encode("utf-8")}.items():
            with open(os.path.join(tmp_dir, name), "wb") as f:
                f.write(content)
        os.rename(tmp_dir, export_dir)
    except OSError as e:
        raise ValueError("Cannot write --export_dir=%s (%s): nothing was exported; choose a "
                         "writable location" % (export_dir, results.file_error_reason(e))) from e
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    logging.info("Wrote %s to %s", ", ".join(files), export_dir)
