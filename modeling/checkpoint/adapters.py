"""A LoRA run's adapters apart from its checkpoints: output_dir/lora_adapters.safetensors holds
what the run trained (every adapter, the head) and how (rank, alpha, targets, task), with a
fingerprint of the frozen base model they belong to. A few hundred KB where the model is hundreds
of MB: `--lora_adapters` puts them back onto the base checkpoint (any layout), merged into its
kernels (`modeling.layers.lora`), and refuses a base whose weights are not the ones they were
trained on.

    save(model, output_dir, settings)             # after training (bert_runner.driver)
    overlay(source, model, path)                  # inside the reader (`modeling.checkpoint`)
"""
import dataclasses
import hashlib
import json
import os

import numpy as np

from modeling.layers import lora
from modeling.checkpoint import hugging_face, original
from modeling.checkpoint.errors import AdaptersError
from modeling.checkpoint.layout import ADAPTERS_FILE
from modeling.checkpoint.files import atomic_output

_METADATA_KEY = "bert_lora"


def fingerprint(arrays):
    """A short hash of the base encoder's weights (float32, in the original's variable order):
    the same for the same model in any layout."""
    digest = hashlib.sha256()
    for array in arrays:
        digest.update(np.ascontiguousarray(array, dtype=np.float32).tobytes())
    return digest.hexdigest()[:16]


def save(model, output_dir, settings):
    """Writes output_dir/lora_adapters.safetensors (atomically): `{variable path: array}` of every
    trained variable and adapter scale of `model`, and `settings` (JSON-able: rank, alpha,
    targets, task, base) with the base's fingerprint. Returns the path."""
    tensors = {v.path: np.asarray(v) for v in model.variables
               if v.trainable or lora.is_adapter_path(v.path)}
    record = {**settings, "base_fingerprint": fingerprint(
        np.asarray(v) for _, v in original.encoder_names(model))}
    path = os.path.join(output_dir, ADAPTERS_FILE)
    with atomic_output(path) as tmp_path:
        hugging_face.write_safetensors(tmp_path, tensors, {_METADATA_KEY: json.dumps(record)})
    return path


def read(path):
    """(`{variable path: array}`, settings) of an adapters file; `AdaptersError` naming it."""
    if not os.path.isfile(path):
        raise AdaptersError(f"{path}: no such file (a LoRA run writes {ADAPTERS_FILE} in its "
                            "output_dir)", path)
    tensors = hugging_face.read_safetensors(path)
    metadata = hugging_face.read_safetensors_metadata(path)
    if _METADATA_KEY not in metadata:
        raise AdaptersError(f"{path} is not a LoRA adapters file of this project (no "
                            f"{_METADATA_KEY} record): pass the {ADAPTERS_FILE} a LoRA run wrote",
                            path)
    return tensors, json.loads(metadata[_METADATA_KEY])


def recorded_labels(path):
    """The labels of the run that wrote the adapters file `path` (its head's outputs, in
    order), or None (a task without labels, or a file written before they were recorded)."""
    metadata = hugging_face.read_safetensors_metadata(path)
    labels = json.loads(metadata.get(_METADATA_KEY, "{}")).get("labels")
    return list(labels) if labels is not None else None


def check_task(path, task_name):
    """Refuses adapters of another task than `task_name` (an MRPC head scores nothing of CoLA,
    whatever its shape): `AdaptersError`."""
    trained_on = read(path)[1].get("task")
    if trained_on != task_name:
        raise AdaptersError(f"{path} holds adapters of a {trained_on!r} run, not of "
                            f"{task_name!r}: load them with that task", path)


def overlay(source, model, path):
    """`source` (the reader's source of the base model) with the adapters file
    `path` on top: its head and adapters by variable path, and each adapted kernel merged where
    `model` has no adapter of its own. Raises `AdaptersError` naming both files when the base is
    not the model the adapters were trained on, or the file holds variables `model` lacks."""
    tensors, settings = read(path)
    encoder = original.encoder_of(model)
    by_variable = {id(var): name for name, var in source.names.items()}
    order = [by_variable[id(v)] for _, v in original.encoder_names(model)]
    base = fingerprint(source.get_tensor(name) for name in order)
    if base != settings.get("base_fingerprint"):
        raise AdaptersError(
            f"{path} holds adapters trained on another base model than {source.prefix} "
            f"(fingerprints {settings.get('base_fingerprint')} and {base}; they were trained on "
            f"{settings.get('base')}): pass the checkpoint that run started from", path)
    model_paths = {v.path: v for v in model.variables if "seed_generator" not in v.path}
    merges = lora.checkpoint_merges(tensors, model_paths)
    merged_adapters = {p for adapter in merges.values() for p in adapter}
    if model is not encoder:
        # A task model takes its head from the file: the same head, all of it.
        encoder_paths = {v.path for v in encoder.variables}
        head = {p for p in model_paths if p not in encoder_paths}
        strange = sorted(p for p in tensors if p not in model_paths and p not in merged_adapters)
        lacking = sorted(head - set(tensors))
        if strange or lacking:
            raise AdaptersError(
                f"{path} holds the adapters and head of a {settings.get('task')!r} run "
                f"(LoRA targets {settings.get('targets')}), not this model's "
                f"({', '.join((strange or lacking)[:4])}): load it with that task's script and "
                "flags", path)
    tensors = {p: a for p, a in tensors.items() if p in model_paths or p in merged_adapters}
    names, extra = dict(source.names), {}
    for variable_path, array in tensors.items():
        if variable_path not in merged_adapters:
            var = model_paths[variable_path]
            name = by_variable.get(id(var), variable_path)
            names[name], extra[name] = var, array
    for kernel_path, adapter_paths in merges.items():
        name = by_variable[id(model_paths[kernel_path])]
        extra[name] = lora.merged_value(source.get_tensor(name),
                                        *(tensors[p] for p in adapter_paths))
    shapes = {**source.shapes, **{name: array.shape for name, array in extra.items()}}
    return dataclasses.replace(
        source, prefix=f"{source.prefix} + {path}", names=names, shapes=shapes,
        get_tensor=lambda name: extra[name] if name in extra else source.get_tensor(name))
