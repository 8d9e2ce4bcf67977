"""The encoder's elementwise work between its matmuls, each function in two versions.

* `"reference"`: `keras.ops` only, op by op, on every backend (JAX too).
* `"fast"`: on the TensorFlow backend, each chain of elementwise ops is one XLA-compiled kernel
  forward and one backward, joined by `tf.custom_gradient`, computed in float32 whatever the
  input dtype. Run op by op, each op is a pass over its tensor, and in bfloat16 each converts
  every element to float32 and back; XLA:CPU fuses the chain into one pass. The matmuls stay
  outside XLA, with TensorFlow's oneDNN kernels: XLA:CPU's dot does not use the CPU's bfloat16
  matrix units. On other backends `"fast"` runs the reference.

Both draw the same dropout masks (`dropout`: a hash of the element index and the seed) and
agree to float rounding. A model chooses with its `kernels` argument (`BertModel(config,
kernels="reference")`), which each function receives as `fast=use_fast(kernels)`.

| module | kernel |
|---|---|
| `dropout` | hashed dropout masks (`keep_mask`, `dropout`, `grid_positions`) |
| `gelu` | GELU of a dense layer's output plus its bias |
| `layer_norm` | dropout + bias + residual sum + LayerNorm |
| `rows` | row moves between the real-row block and the attention's grid |
| `xla` | what the fast kernels share |

The attention's kernel (oneDNN's matmul, scale, mask and softmax, XLA's dropout) is with its
math in `modeling.layers.attention`.
"""
import keras

from modeling.layers.kernels.dropout import dropout, grid_positions, keep_mask
from modeling.layers.kernels.gelu import gelu
from modeling.layers.kernels.layer_norm import dropout_add_layer_norm
from modeling.layers.kernels.rows import heads_to_rows, rows_to_heads, take_rows

KERNELS = ("fast", "reference")


def use_fast(kernels):
    """Whether `kernels` (one of `KERNELS`) runs the fast kernels on this backend."""
    if kernels not in KERNELS:
        raise ValueError(f"kernels must be one of {KERNELS}, got {kernels!r}")
    return kernels == "fast" and keras.backend.backend() == "tensorflow"


__all__ = ["KERNELS", "dropout", "dropout_add_layer_norm", "gelu", "grid_positions",
           "heads_to_rows", "keep_mask", "rows_to_heads", "take_rows", "use_fast"]
