"""Activation functions named in `bert_config.json`, written with `keras.ops` only."""
import math

from keras import ops


def gelu(x):
    """The original release's GELU: the tanh approximation (modeling.py:264).

    It differs from the exact erf form by up to ~1e-3 per activation, which is visible in the
    outputs of a trained model, so configs from the original release must use this one.
    The original's `tf.pow(x, 3)` is rewritten to `x * square(x)` by TF's graph optimizer; we
    write it that way, which also avoids a general `pow`, slower when running eagerly.
    """
    cdf = 0.5 * (1.0 + ops.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * (x * ops.square(x)))))
    return x * cdf


def gelu_exact(x):
    """Exact GELU, x·Φ(x) with erf: what Hugging Face's `"gelu"` means."""
    return 0.5 * x * (1.0 + ops.erf(x / math.sqrt(2.0)))


def linear(x):
    return x


_ACTIVATIONS = {
    "gelu": gelu,
    "gelu_exact": gelu_exact,
    "relu": ops.relu,
    "tanh": ops.tanh,
    "linear": linear,
}


def get_activation(name):
    """Maps a config's `hidden_act` to a function, as the original `get_activation` does.

    Non-strings are returned unchanged; None, "" and "linear" mean identity; names are
    case-insensitive. Raises ValueError for anything else.
    """
    if not isinstance(name, str):
        return linear if name is None else name
    if not name:
        return linear
    key = name.lower()
    if key not in _ACTIVATIONS:
        raise ValueError(f"Unsupported activation: {name}")
    return _ACTIVATIONS[key]
