"""BERT checkpoints in Hugging Face's layout, in and out: a directory holding `config.json`,
`model.safetensors` (or `pytorch_model.bin`) and `vocab.txt`.

Hugging Face's `"gelu"` is the exact erf form, so imported configs use `hidden_act="gelu_exact"`;
their tanh variants (`gelu_new`, `gelu_pytorch_tanh`) map to the original's `"gelu"`, and
`save_hf_model` writes the inverse. The Hugging Face names are derived from the original TF1 names
by fixed rules (`hf_name`, inverted by `tf1_name`), so the two formats cannot drift apart: a
Hugging Face checkpoint is read as the TF1 checkpoint it names (`read_hf_as_tf1`), and every check
of the TF1 loader applies to it.
"""
import json
import os
import re
import shutil
import struct
import uuid

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
# The tanh GELU of the original release under its Hugging Face name (`save_hf_model`).
_TO_HF_ACTIVATIONS = {"gelu_exact": "gelu", "gelu": "gelu_new", "relu": "relu", "tanh": "tanh",
                      "linear": "linear"}
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
    if hf.get("model_type", "bert") != "bert":
        raise ValueError(f"{path}: model_type {hf['model_type']!r} is not a BERT model")
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


def config_to_hf(config):
    """The Hugging Face `config.json` dict of a `BertConfig` (for `transformers.BertModel`).
    A left-to-right model (`config.causal`) is refused: `BertModel` would attend both ways."""
    if config.causal:
        raise ValueError("a left-to-right model (\"pretraining_objective\": \"ltr\") has no "
                         "Hugging Face BertModel form: transformers' BertModel attends both ways "
                         "and would compute other outputs; export it as a SavedModel")
    hf = {key: getattr(config, key) for key in _CONFIG_KEYS}
    act = (config.hidden_act or "linear").lower()
    return {"architectures": ["BertModel"], "model_type": "bert",
            "hidden_act": _TO_HF_ACTIVATIONS[act], "layer_norm_eps": 1e-12, "pad_token_id": 0,
            "position_embedding_type": "absolute", **hf}


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


_HEAD_TF1_NAMES = {hf: tf1 for tf1, hf in _HEAD_NAMES.items()}


def tf1_name(hf_name_):
    """Hugging Face name → (original TF1 name, whether the array is transposed): `hf_name`
    inverted."""
    if hf_name_ in _HEAD_TF1_NAMES:
        return _HEAD_TF1_NAMES[hf_name_], False
    name = re.sub(r"\.layer\.(\d+)\.", r".layer_\1.", hf_name_)
    name = re.sub(r"LayerNorm\.weight$", "LayerNorm.gamma", name)
    name = re.sub(r"LayerNorm\.bias$", "LayerNorm.beta", name)
    name = re.sub(r"(embeddings\.\w+_embeddings)\.weight$", r"\1", name)
    transpose = name.endswith(".weight")
    name = re.sub(r"\.weight$", ".kernel", name)
    return name.replace(".", "/"), transpose


def write_safetensors(path, tensors, metadata=None):
    """Writes `{name: np.ndarray}` as a `.safetensors` file (u64 header size, JSON header padded
    to 8 bytes as the reference writer does, then the arrays' bytes in header order)."""
    dtypes = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16",
              np.dtype(np.int64): "I64", np.dtype(np.int32): "I32"}
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, array in tensors.items():
        array = np.asarray(array, order="C")  # (ascontiguousarray would make a scalar [1])
        data = array.tobytes()
        header[name] = {"dtype": dtypes[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)) + encoded)
        for blob in blobs:
            f.write(blob)


def _safetensors_header(path, data):
    """(header dict, the bytes after it) of a `.safetensors` file's contents `data`."""
    if len(data) < 8:
        raise ValueError(f"{path}: too short to be a safetensors file")
    (header_size,) = struct.unpack("<Q", data[:8])
    try:
        header = json.loads(data[8 : 8 + header_size])
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: corrupt safetensors header ({e})") from e
    return header, data[8 + header_size :]


def read_safetensors_metadata(path):
    """The `__metadata__` (`{str: str}`) of a `.safetensors` file, {} without one."""
    with open(path, "rb") as f:
        head = f.read(8)
        size = struct.unpack("<Q", head)[0] if len(head) == 8 else 0
        header, _ = _safetensors_header(path, head + f.read(size))
    return header.get("__metadata__", {})


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
    header, body = _safetensors_header(path, data)
    needed = max((info["data_offsets"][1] for name, info in header.items()
                  if name != "__metadata__"), default=0)
    if needed > len(body):
        raise ValueError(f"{path}: truncated: its header describes {needed} bytes of tensors, the "
                         f"file holds {len(body)} (an interrupted download or copy?)")
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        if info["dtype"] not in dtypes:
            raise ValueError(f"{path}: tensor {name} has dtype {info['dtype']}, which this reader "
                             f"does not know ({', '.join(dtypes)})")
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


def read_hf_as_tf1(path):
    """`{original TF1 name: np.ndarray in TF1 orientation}` of a Hugging Face checkpoint (a
    weights file or a directory holding one); the tied decoder and `position_ids` are left out."""
    tensors = {}
    for name, value in _normalise_names(read_hf_weights(path)).items():
        name, transpose = tf1_name(name)
        tensors[name] = value.T if transpose else value
    return tensors


def load_hf_checkpoint(model, weights_path, strict=True):
    """Loads Hugging Face BERT weights into a `BertModel` or task model.

    Every tensor is matched by its TF1 name (`tf1_name`) and shape; strict/partial semantics and
    the report (in TF1 names) are those of `tf1_checkpoint.load_tf1_checkpoint`.
    """
    tensors = read_hf_as_tf1(weights_path)
    return assign_checked(variable_map(model), {n: v.shape for n, v in tensors.items()},
                          tensors.__getitem__, os.fspath(weights_path), strict)


def save_hf_model(model, directory, vocab_file, do_lower_case, sentence_embedding=None):
    """Writes the encoder of `model` (a `BertModel` or task model) as a Hugging Face BERT
    directory that `transformers.BertModel.from_pretrained(directory)` loads: `config.json`,
    `model.safetensors` (float32, names without the `bert.` prefix, as `BertModel` saves them),
    `vocab.txt` and `tokenizer_config.json` (the casing). The directory must not exist; it is
    written under a temporary name and renamed. Returns `directory`.

    `sentence_embedding`: None, or `(pooling, normalize, max_seq_length)` to also write the files
    with which `sentence_transformers.SentenceTransformer(directory)` computes the vectors of
    `modeling.pooling.pool` (`sentence_transformer_files`).
    """
    from modeling.checkpoint_names import encoder_variable_map
    from modeling.tf1_checkpoint import encoder_of

    directory = os.fspath(directory).rstrip("/")
    if os.path.exists(directory):
        raise FileExistsError(f"{directory} already exists: choose a new directory")
    encoder = encoder_of(model)
    tensors = {}
    for name, var in encoder_variable_map(encoder):
        hf, transpose = hf_name(name)
        value = np.asarray(var, dtype=np.float32)
        tensors[hf.removeprefix("bert.")] = value.T if transpose else value
    tmp = f"{directory}.tmp-{uuid.uuid4().hex}"
    os.makedirs(tmp)
    try:
        write_safetensors(os.path.join(tmp, "model.safetensors"), tensors, {"format": "pt"})
        with open(os.path.join(tmp, "config.json"), "w", encoding="utf-8") as f:
            json.dump(config_to_hf(encoder.config), f, indent=2, sort_keys=True)
            f.write("\n")
        with open(os.path.join(tmp, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({"do_lower_case": bool(do_lower_case), "tokenizer_class": "BertTokenizer",
                       "model_max_length": encoder.config.max_position_embeddings}, f, indent=2)
            f.write("\n")
        shutil.copyfile(vocab_file, os.path.join(tmp, "vocab.txt"))
        if sentence_embedding is not None:
            files = sentence_transformer_files(encoder.config.hidden_size, *sentence_embedding)
            for name, value in files.items():
                os.makedirs(os.path.dirname(os.path.join(tmp, name)), exist_ok=True)
                with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
                    json.dump(value, f, indent=2)
                    f.write("\n")
            if sentence_embedding[1]:
                os.makedirs(os.path.join(tmp, NORMALIZE_FOLDER))
        os.replace(tmp, directory)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return directory


NORMALIZE_FOLDER = "2_Normalize"


def sentence_transformer_files(hidden_size, pooling, normalize, max_seq_length):
    """`{relative path: JSON value}` of sentence-transformers' modules over a BERT directory: the
    transformer, `1_Pooling` ("cls", "mean" or "max", as `modeling.pooling.pool`) and with
    `normalize` `2_Normalize` (it has no file of its own: `save_hf_model` makes its folder)."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": NORMALIZE_FOLDER,
                        "type": "sentence_transformers.models.Normalize"})
    files = {
        "modules.json": modules,
        # sentence-transformers' own lower-casing, on top of the tokenizer's: off.
        "sentence_bert_config.json": {"max_seq_length": max_seq_length, "do_lower_case": False},
        "1_Pooling/config.json": {
            "word_embedding_dimension": hidden_size,
            "pooling_mode_cls_token": pooling == "cls",
            "pooling_mode_mean_tokens": pooling == "mean",
            "pooling_mode_max_tokens": pooling == "max",
            "pooling_mode_mean_sqrt_len_tokens": False},
    }
    return files
