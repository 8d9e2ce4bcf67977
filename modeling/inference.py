"""Copies of a model built with other settings (precision, kernels, execution modes), holding
its weights: no function changes a model it was handed."""
import keras

from modeling.bert.modes import EncoderModes


def copy_with(model, dtype=None, kernels=None, **modes):
    """`model` (a `BertModel` or a task model) rebuilt from its config with `dtype` (a Keras dtype
    policy name), `kernels` ("fast", "reference") and encoder `modes` (`EncoderModes` fields)
    changed, its weights copied (cast to the new policy's variable dtype); `model` itself where
    nothing changes. Every other setting, modes included, stays the model's."""
    config = model.get_config()
    changed = dict(config)
    if dtype is not None:
        changed["dtype"] = dtype
    if kernels is not None:
        changed["kernels"] = kernels
    changed["modes"] = EncoderModes.of(config["modes"]).replace(**modes).to_dict()
    if changed == config:
        return model
    copy = model.__class__.from_config(changed)
    for target, source in zip(copy.weights, model.weights, strict=True):
        if target.path != source.path or tuple(target.shape) != tuple(source.shape):
            raise ValueError(f"{type(model).__name__}: weight {source.path} has no counterpart in "
                             f"the copy (got {target.path})")
        target.assign(keras.ops.cast(source, target.dtype))
    return copy


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
