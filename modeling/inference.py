"""Inference copies of a model in another numeric policy."""
import keras


def with_bfloat16_weights(model):
    """A copy of `model` (a `BertModel` or a task model) holding its weights in bfloat16, for
    inference.

    Under `mixed_bfloat16` every call casts each float32 weight to bfloat16 before using it;
    this copy (the pure `bfloat16` Keras policy; LayerNorm weights and statistics stay float32,
    as the layers ask) casts them once, here. Its outputs are those of `model` under
    `mixed_bfloat16`, bit for bit, at half the weight memory and without the per-call casts.
    Not for training: the updates would be rounded to bfloat16.
    """
    config = {**model.get_config(), "dtype": "bfloat16"}
    copy = model.__class__.from_config(config)
    for target, source in zip(copy.weights, model.weights):
        if target.path != source.path or tuple(target.shape) != tuple(source.shape):
            raise ValueError(f"{type(model).__name__}: weight {source.path} has no counterpart in "
                             f"the bfloat16 copy (got {target.path})")
        target.assign(keras.ops.cast(source, target.dtype))
    return copy
