"""Copies of a model built with other settings (precision, kernels, execution modes, LoRA
adapters), holding its weights: no function changes a model it was handed."""
import random

import keras

from modeling.bert.modes import EncoderModes
from modeling.layers import lora as lora_adapters

_KEEP = object()


def copy_with(model, dtype=None, kernels=None, lora=_KEEP, **modes):
    """`model` (a `BertModel` or a task model) rebuilt from its config with `dtype` (a Keras dtype
    policy name), `kernels` ("fast", "reference"), `lora` (`LoraSettings` or None) and encoder
    `modes` (`EncoderModes` fields) changed, its weights copied (cast to the new policy's
    variable dtype); `model` itself where nothing changes. Every other setting, modes included,
    stays the model's.

    Adapters the copy gains start as `LoraSettings` builds them (the copy computes what `model`
    does); adapters it loses are merged into their kernels (`lora.merged_value`)."""
    config = model.get_config()
    changed = dict(config)
    if dtype is not None:
        changed["dtype"] = dtype
    if kernels is not None:
        changed["kernels"] = kernels
    if lora is not _KEEP:
        changed["lora"] = lora and lora_adapters.LoraSettings.of(lora).to_dict()
    changed["modes"] = EncoderModes.of(config["modes"]).replace(**modes).to_dict()
    if changed == config:
        return model
    # A copy draws from Python's random state (Keras' initializers and seed generators take their
    # seeds from it) only for the weights it gains: the others are the model's, so their draws are
    # undone, and a seeded run draws the same as one that made no copy.
    state = random.getstate()
    copy = model.__class__.from_config(changed)
    random.setstate(state)
    gained = [adapter for path, adapter in lora_adapters.adapters(copy).items()
              if path not in lora_adapters.adapters(model)]
    for lora_a, *_ in gained:
        lora_a.assign(lora_adapters.initial_lora_a(lora_a.shape, lora_a.dtype))
    # Variables in creation order, the dropout generators' states too (so the copy draws the
    # model's dropout masks); those are numbered per process, not per model, so they pair by place.
    adapters_kept = {v.path: v for v in model.variables if lora_adapters.is_adapter_path(v.path)}
    merged = {} if changed.get("lora") else {
        path: lora_adapters.merged_value(*adapter)
        for path, adapter in lora_adapters.adapters(model).items()}
    for target, source in zip(_without_adapters(copy.variables),
                              _without_adapters(model.variables), strict=True):
        if target.path != source.path and not (_is_seed_state(target) and _is_seed_state(source)):
            raise ValueError(f"{type(model).__name__}: variable {source.path} has no counterpart "
                             f"in the copy (got {target.path})")
        target.assign(keras.ops.cast(merged.get(target.path, source), target.dtype))
    for target in copy.variables:
        if target.path in adapters_kept:
            target.assign(keras.ops.cast(adapters_kept[target.path], target.dtype))
    return copy


def merged_copy(model):
    """`model` itself without adapters; else a copy without them, each targeted kernel holding
    its merged value (`merged_value`): a plain model, for writers and exports."""
    return copy_with(model, lora=None)


def _without_adapters(variables):
    return [v for v in variables if not lora_adapters.is_adapter_path(v.path)]


def _is_seed_state(variable):
    return variable.path.endswith("/seed_generator_state")


def with_bfloat16_weights(model):
    """A copy of `model` (a `BertModel` or a task model) holding its weights in bfloat16, for
    inference.

    Under `mixed_bfloat16` every call casts each float32 weight to bfloat16 before using it;
    this copy (the pure `bfloat16` Keras policy; LayerNorm weights and statistics stay float32,
    as the layers ask) casts them once, here. Its outputs are those of `model` under
    `mixed_bfloat16`, bit for bit, at half the weight memory and without the per-call casts.
    Not for training: the updates would be rounded to bfloat16.
    """
    return copy_with(model, dtype="bfloat16")
