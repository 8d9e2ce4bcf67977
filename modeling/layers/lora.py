"""LoRA (Hu et al. 2021, arXiv 2106.09685): the encoder frozen, low-rank adapters trained beside
its dense kernels, the task's head trained as usual.

A targeted kernel `W [in, out]` of an encoder layer gets `lora_a [in, r]` (He-uniform, as
KerasHub's and PEFT's) and `lora_b [r, out]` (zeros: training starts from the base model exactly),
and the layer computes

    x @ W + scale * (x @ lora_a) @ lora_b,        scale = alpha / r (`lora_scale`, stored)

The adapters are variables of the layer, beside the kernel (`.../self/query/lora_a`), so this
project's checkpoints hold them; `lora_scale` is stored with them, so a checkpoint alone says how to
merge (`merged_value`): every loader (`modeling.checkpoint`) merges `W + scale * A @ B` into
a model without adapters, which is how every export serves a LoRA run as a plain model.

    enable_lora(model, rank=8, alpha=8, targets="query_value")   # after the model is built
"""
import contextlib

import numpy as np

# --lora_targets: the encoder layers' kernels that get adapters.
TARGETS = {
    # The paper's choice (its section 7.1: adapting W_q and W_v is the best at a fixed budget).
    "query_value": ("query", "value"),
    "all": ("query", "key", "value", "attention_output", "intermediate", "output"),
}
ADAPTER_VARIABLES = ("lora_a", "lora_b", "lora_scale")


def enable_lora(model, rank, alpha=None, targets="query_value"):
    """Freezes every variable of `model.encoder` (embeddings, layers, pooler) and adds adapters of
    `rank` to the `targets` kernels of each encoder layer; the rest of `model` (its head, a
    BiLSTM on top) stays trainable. `alpha` None: the rank (scale 1). Returns `model`."""
    if targets not in TARGETS:
        raise ValueError(f"LoRA targets {targets!r} are not one of {', '.join(TARGETS)}")
    if rank < 1:
        raise ValueError(f"the LoRA rank must be at least 1, got {rank}")
    for variable in model.encoder.variables:
        variable.trainable = False
    scale = float(alpha if alpha is not None else rank) / rank
    for layer in model.encoder.encoder_layers:
        layer.enable_lora(rank, scale, TARGETS[targets])
    return model


def check_rank(rank, config, config_file=None):
    """Refuses (ValueError naming --lora_rank) a rank above the model's hidden size: the
    adapters would hold more weights than the kernels they adapt."""
    if rank > config.hidden_size:
        raise ValueError(
            f"--lora_rank={rank} is above the hidden size {config.hidden_size} of the model "
            f"({config_file or '--bert_config_file'}): a low rank is the point (8 or 16 usually)")


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


@contextlib.contextmanager
def merged(model):
    """Within the block `model`'s targeted kernels hold their merged values (for writers that read
    variables: the original layout, Hugging Face's); restored after. The forward pass still adds
    the adapters: do not run the model inside."""
    found = adapters(model)
    originals = {path: np.asarray(kernel) for path, (kernel, *_) in found.items()}
    try:
        for kernel, a, b, scale in found.values():
            kernel.assign(merged_value(kernel, a, b, scale))
        yield model
    finally:
        for path, (kernel, *_) in found.items():
            kernel.assign(originals[path])


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
