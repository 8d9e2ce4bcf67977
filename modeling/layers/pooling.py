"""Sentence vectors from the encoder's last layer: one vector per input, as sentence-embedding
models (sentence-transformers) compute them.

A left-to-right model (`BertConfig.causal`) has no "cls" vector worth the name: its [CLS] row
attends to itself only, so it is the same for every text (the scripts refuse it).
"""
from keras import ops

POOLING_METHODS = ("cls", "mean", "max")


def pool(sequence_output, input_mask, method, normalize=False):
    """One vector per row of the last layer.

    Args:
      sequence_output: float `[B, S, H]`, the encoder's last layer.
      input_mask: int `[B, S]`, 1 at real tokens (`[CLS]` and `[SEP]` included, as
        sentence-transformers' attention mask), 0 at padding.
      method: "cls" (the `[CLS]` row), "mean" (the mean over real tokens) or "max" (the
        element-wise maximum over real tokens).
      normalize: divide each vector by its L2 norm (cosine similarity is then a dot product).
    Returns:
      float32 `[B, H]`.
    """
    x = ops.cast(sequence_output, "float32")
    mask = ops.cast(input_mask, "float32")[:, :, None]
    if method == "cls":
        vectors = x[:, 0]
    elif method == "mean":
        # sentence-transformers clamps the token count at 1e-9: a row always has [CLS] here.
        vectors = ops.sum(x * mask, axis=1) / ops.maximum(ops.sum(mask, axis=1), 1e-9)
    elif method == "max":
        # Padded positions may hold any value (zeros with skip_padding): never the maximum.
        vectors = ops.max(ops.where(mask > 0, x, -1e9), axis=1)
    else:
        raise ValueError(f"pooling {method!r} is not one of {', '.join(POOLING_METHODS)}")
    if normalize:
        # sentence-transformers' Normalize: x / max(||x||, 1e-12).
        norm = ops.sqrt(ops.sum(ops.square(vectors), axis=-1, keepdims=True))
        vectors = vectors / ops.maximum(norm, 1e-12)
    return vectors
