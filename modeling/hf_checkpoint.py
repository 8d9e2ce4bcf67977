"""Import BERT checkpoints saved in Hugging Face naming (`config.json` + `model.safetensors`
or `pytorch_model.bin`) into this project's models.

Hugging Face's `"gelu"` is the exact erf form, so imported configs use `hidden_act="gelu_exact"`;
their tanh variants (`gelu_new`, `gelu_pytorch_tanh`) map to the original's `"gelu"`.
The Hugging Face names are derived from the original TF1 names by fixed rules (`hf_name`), so
the two formats cannot drift apart.
"""
import json
import os
import re
import struct

import numpy as np

from modeling.config import BertConfig
from modeling.tf1_checkpoint import assign_checked, variable_map

_HF_ACTIVATIONS = {
    "gelu": "gelu_exact",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}
_CONFIG_KEYS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "initializer_range",
)
# Head variables whose Hugging Face names do not follow the scope rules.
_HEAD_NAMES = {
    "cls/predictions/output_bias": "cls.predictions.bias",
    "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",
    "cls/seq_relationship/output_bias": "cls.seq_relationship.bias",
    "output_weights": "classifier.weight",
    "output_bias": "classifier.bias",
    "cls/squad/output_weights": "qa_outputs.weight",
    "cls/squad/output_bias": "qa_outputs.bias",
}
# Entries Hugging Face saves that duplicate tied or constant state.
_IGNORED = re.compile(
    r"(^|\.)(position_ids|cls\.predictions\.decoder\.(weight|bias))$"
)


def config_from_hf(path):
    """Reads a Hugging Face BERT `config.json` into a `BertConfig`; errors name the file."""
    with open(path, encoding="utf-8") as f:
        try:
            hf = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON ({e})") from e
    missing = [k for k in _CONFIG_KEYS if k not in hf]
    if missing:
        raise ValueError(f"{path}: missing BERT config keys {missing}")
    act = hf.get("hidden_act", "gelu")
    if act not in _HF_ACTIVATIONS:
        raise ValueError(f"{path}: hidden_act {act!r} is not supported ({sorted(_HF_ACTIVATIONS)})")
    if abs(hf.get("layer_norm_eps", 1e-12) - 1e-12) > 0:
        raise ValueError(f"{path}: layer_norm_eps {hf['layer_norm_eps']} is not BERT's 1e-12")
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"{path}: only absolute position embeddings are supported")
    config = BertConfig.from_dict({k: hf[k] for k in _CONFIG_KEYS})
    config.hidden_act = _HF_ACTIVATIONS[act]
    return config.validate(source=path)


def hf_name(tf1_name):
    """Original TF1 name → (Hugging Face name, whether the array is transposed).

    Dense kernels are `[in, out]` in TF1 and `[out, in]` in PyTorch; `output_weights` are
    already `[out, in]` in both.
    """
    if tf1_name in _HEAD_NAMES:
        return _HEAD_NAMES[tf1_name], False
    name = re.sub(r"layer_(\d+)", r"layer.\1", tf1_name).replace("/", ".")
    transpose = name.endswith(".kernel")
    name = re.sub(r"\.kernel$", ".weight", name)
    name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
    name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
    if re.search(r"embeddings\.\w+_embeddings$", name):
        name += ".weight"
    return name, transpose


def read_safetensors(path):
    """`{name: np.ndarray}` from a `.safetensors` file (format: u64 header size, JSON, data)."""
    import ml_dtypes  # installed with keras; numpy has no bfloat16

    dtypes = {
        "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16,
        "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
        "BOOL": np.bool_,
    }
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: too short to be a safetensors file")
    (header_size,) = struct.unpack("<Q", data[:8])
    try:
        header = json.loads(data[8 : 8 + header_size])
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: corrupt safetensors header ({e})") from e
    body = data[8 + header_size :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        if info["dtype"] not in dtypes or end > len(body):
            raise ValueError(f"{path}: tensor {name} has dtype {info['dtype']} or offsets out of range")
        array = np.frombuffer(body[begin:end], dtype=dtypes[info["dtype"]])
        tensors[name] = array.reshape(info["shape"])
    return tensors


def read_torch_state_dict(path):
    """`{name: np.ndarray}` from a PyTorch `pytorch_model.bin` (needs torch installed)."""
    try:
        import torch
    except ImportError as e:
        raise ImportError(
            f"{path}: reading a PyTorch state dict needs `torch`; convert it to model.safetensors "
            "or `pip install torch`"
        ) from e
    state = torch.load(path, map_location="cpu", weights_only=True)
    return {k: v.float().numpy() for k, v in state.items()}


def read_hf_weights(path):
    """Reads `model.safetensors` or `pytorch_model.bin` (or a directory holding either)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        for candidate in ("model.safetensors", "pytorch_model.bin"):
            if os.path.exists(os.path.join(path, candidate)):
                return read_hf_weights(os.path.join(path, candidate))
        raise FileNotFoundError(f"{path}: no model.safetensors or pytorch_model.bin")
    if path.endswith(".safetensors"):
        return read_safetensors(path)
    return read_torch_state_dict(path)


def _normalise_names(tensors):
    """Accepts checkpoints saved with or without the `bert.` prefix (a bare `BertModel` has
    none) and with the old `gamma`/`beta` LayerNorm names."""
    out = {}
    for name, value in tensors.items():
        if _IGNORED.search(name):
            continue
        name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
        name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
        is_head = name.startswith(("cls.", "classifier.", "qa_outputs."))
        if not is_head and not name.startswith("bert."):
            name = "bert." + name
        out[name] = value
    return out


def load_hf_checkpoint(model, weights_path, strict=True):
    """Loads Hugging Face BERT weights into a `BertModel` or task model.

    Every tensor is matched by name (`hf_name`) and shape; strict/partial semantics and the
    report are those of `tf1_checkpoint.load_tf1_checkpoint`.
    """
    tf1_names = variable_map(model)
    targets = {}
    transposed = {}
    for tf1, var in tf1_names.items():
        name, transpose = hf_name(tf1)
        targets[name] = var
        transposed[name] = transpose
    tensors = _normalise_names(read_hf_weights(weights_path))

    def get(name):
        value = tensors[name]
        return value.T if transposed.get(name) else value

    shapes = {n: get(n).shape for n in tensors}
    return assign_checked(targets, shapes, get, os.fspath(weights_path), strict)
