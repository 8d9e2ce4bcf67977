"""LoRA (Hu et al. 2021, arXiv 2106.09685): the encoder frozen, low-rank adapters trained beside
its dense kernels, the task's head trained as usual.

A targeted kernel `W [in, out]` of an encoder layer gets `lora_a [in, r]` (He-uniform, as
KerasHub's) and `lora_b [r, out]` (zeros: training starts from the base model exactly),
and the layer computes

    x @ W + scale * (x @ lora_a) @ lora_b,        scale = alpha / r (`lora_scale`, stored)

The adapters are variables of the layer, beside the kernel (`.../self/query/lora_a`), so this
project's checkpoints hold them; `lora_scale` is stored with them, so a checkpoint alone says how to
merge (`merged_value`): every loader (`modeling.checkpoint`) merges `W + scale * A @ B` into
a model without adapters, which is how every export serves a LoRA run as a plain model.

Adapters are a constructor argument of the encoder (`BertModel(config, lora=LoraSettings(...))`,
saved by `get_config`), which builds them and freezes everything else of itself; a model built
without them gets a copy with them from `modeling.optimization.with_lora`, and a LoRA model a plain
copy, its adapters merged, from `modeling.inference.merged_copy`. Neither changes the model it is
handed.

    model = with_lora(model, LoraSettings(rank=8, alpha=8, targets="query_value"))
"""
import dataclasses
from typing import Optional

import keras
import numpy as np

from modeling.layers.initializers import HeUniform

# --lora_targets: the encoder layers' kernels that get adapters.
TARGETS = {
    # The paper's choice (its section 7.1: adapting W_q and W_v is the best at a fixed budget).
    "query_value": ("query", "value"),
    "all": ("query", "key", "value", "attention_output", "intermediate", "output"),
}
ADAPTER_VARIABLES = ("lora_a", "lora_b", "lora_scale")


@dataclasses.dataclass(frozen=True)
class LoraSettings:
    """The adapters of an encoder: `rank` r of each, `alpha` (None: the rank; the updates are
    scaled by alpha / r), and the `targets` kernels of each encoder layer (a key of `TARGETS`)."""

    rank: int
    alpha: Optional[float] = None
    targets: str = "query_value"

    def __post_init__(self):
        if self.targets not in TARGETS:
            raise ValueError(f"LoRA targets {self.targets!r} are not one of {', '.join(TARGETS)}")
        if self.rank < 1:
            raise ValueError(f"the LoRA rank must be at least 1, got {self.rank}")

    @classmethod
    def of(cls, lora):
        """`lora` as `LoraSettings`: one already, its dict (`get_config`'s), or None (none)."""
        if lora is None or isinstance(lora, cls):
            return lora
        return cls(**lora)

    @property
    def scale(self):
        return float(self.alpha if self.alpha is not None else self.rank) / self.rank

    @property
    def kernels(self):
        """The targeted kernels' names in an encoder layer (`TransformerLayer`)."""
        return TARGETS[self.targets]

    def to_dict(self):
        return dataclasses.asdict(self)


def initial_lora_a(shape, dtype):
    """A `lora_a` start: He-uniform, as KerasHub's, from an initializer of its own (a
    Keras initializer repeats its values on every call)."""
    return HeUniform()(shape, dtype)


def adapters(model):
    """`{kernel path: (kernel, lora_a, lora_b, lora_scale)}` of `model`'s encoder layers."""
    found = {}
    for layer in getattr(model, "encoder", model).encoder_layers:
        for kernel, (a, b, scale) in layer.lora_adapters():
            found[kernel.path] = (kernel, a, b, scale)
    return found


def merged_value(kernel, lora_a, lora_b, scale):
    """`kernel + scale * lora_a @ lora_b` in float64 rounded to the kernel's dtype (NumPy)."""
    kernel = np.asarray(kernel)
    delta = float(np.asarray(scale)) * (np.asarray(lora_a, np.float64) @ np.asarray(lora_b, np.float64))
    return (kernel.astype(np.float64) + delta).astype(kernel.dtype)


def trainable_count(model):
    """(trainable, total) numbers of weights of `model` (dropout's random state left out)."""
    def count(variables):
        return int(sum(np.prod(v.shape) for v in variables if "seed_generator" not in v.path))

    return count(model.trainable_variables), count(model.variables)


def is_adapter_path(path):
    """Whether the variable path `path` is an adapter's (`lora_a`, `lora_b`, `lora_scale`)."""
    return path.rsplit("/", 1)[-1] in ADAPTER_VARIABLES


def checkpoint_merges(checkpoint_paths, model_paths):
    """`{kernel path: (lora_a path, lora_b path, lora_scale path)}` of the adapters a checkpoint
    holds (its variable paths `checkpoint_paths`) that the model loading it lacks (`model_paths`):
    those kernels load merged (`merged_value`), and the adapters' own entries are not the model's."""
    merges = {}
    for path in checkpoint_paths:
        if path.endswith("/lora_a") and path not in model_paths:
            scope = path[:-len("lora_a")]
            merges[scope + "kernel"] = tuple(scope + name for name in ADAPTER_VARIABLES)
    return merges
