"""TF Hub SavedModels of the TF2 text-encoder API (TF Model Garden's `export_tfhub.py`, the BERT
and ELECTRA encoders of TF Hub and Kaggle Models) read as original-layout checkpoints.

Such a directory holds `saved_model.pb`, `variables/`, `assets/vocab.txt` (its `vocab_file`),
a `do_lower_case` variable, and `keras_metadata.pb`, in which Keras recorded the encoder layer's
constructor arguments (`Text>BertEncoder`: sizes, layers, heads, activation, embedding width,
token types, positions): the config is read from there, never assumed. Its variables are stored
by object position (`variables/<i>/...`); their names come from the SavedModel's object graph,
whose nodes are the checkpoint's in the same order.

Model Garden's names and shapes against the original's (`bert/` for BERT; an embedding width
other than the hidden size is an ELECTRA encoder, `electra/`, with `embeddings_project`):

    word_embeddings/embeddings                   embeddings/word_embeddings
    position_embedding/embeddings                embeddings/position_embeddings
    type_embeddings/embeddings                   embeddings/token_type_embeddings
    embeddings/layer_norm/{gamma,beta}           embeddings/LayerNorm/{gamma,beta}
    embedding_projection/{kernel,bias}           embeddings_project/{kernel,bias}
    transformer/layer_<i>/self_attention/{query,key,value}/kernel [H, N, H/N]
                                                 encoder/layer_<i>/attention/self/.../kernel [H, H]
      .../bias [N, H/N]                          .../bias [H]
    .../self_attention/attention_output/kernel [N, H/N, H]
                                                 .../attention/output/dense/kernel [H, H]
    .../self_attention_layer_norm                .../attention/output/LayerNorm
    .../intermediate, .../output                 .../intermediate/dense, .../output/dense
    .../output_layer_norm                        .../output/LayerNorm
    pooler_transform/{kernel,bias}               pooler/dense/{kernel,bias} (BERT's)
    bert/cls/predictions/transform/..., output_bias/bias (the `mlm` sub-object)
                                                 cls/predictions/... (BERT's masked-LM head)

Every reshape is a merge of the heads' axes: no transposes.

This project's own exports (`bert_runner.serving.tf_hub`) hold `assets/encoder.json`
(`DESCRIPTION_FILE`): the config, and the original name of each of `variables` (and of the `mlm`
sub-object's head variables), which are read in place of Model Garden's metadata and names.
"""
import json
import os
import re

import numpy as np

from modeling.checkpoint.errors import CheckpointError
from modeling.json_file import read_json_object

SAVED_MODEL_FILE = "saved_model.pb"
KERAS_METADATA_FILE = "keras_metadata.pb"
VOCAB_ASSET = os.path.join("assets", "vocab.txt")
DESCRIPTION_FILE = "encoder.json"
_DO_LOWER_CASE_KEY = "do_lower_case/.ATTRIBUTES/VARIABLE_VALUE"
# The Keras classes of Model Garden's BERT-architecture encoders.
_ENCODER_CLASSES = ("Text>BertEncoder", "Text>BertEncoderV2", "BertEncoder", "BertEncoderV2")
# Model Garden's activations by their serialised names: its "gelu" is the tanh approximation,
# the original BERT's.
_ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "gelu_exact": "gelu_exact", "tanh": "tanh",
                "linear": "linear"}

_EMBEDDINGS = {"word_embeddings/embeddings": "embeddings/word_embeddings",
               "position_embedding/embeddings": "embeddings/position_embeddings",
               "type_embeddings/embeddings": "embeddings/token_type_embeddings",
               "embeddings/layer_norm/gamma": "embeddings/LayerNorm/gamma",
               "embeddings/layer_norm/beta": "embeddings/LayerNorm/beta",
               "embedding_projection/kernel": "embeddings_project/kernel",
               "embedding_projection/bias": "embeddings_project/bias",
               "pooler_transform/kernel": "pooler/dense/kernel",
               "pooler_transform/bias": "pooler/dense/bias"}
_LAYER_PARTS = {"self_attention/query": "attention/self/query",
                "self_attention/key": "attention/self/key",
                "self_attention/value": "attention/self/value",
                "self_attention/attention_output": "attention/output/dense",
                "self_attention_layer_norm": "attention/output/LayerNorm",
                "intermediate": "intermediate/dense",
                "output": "output/dense",
                "output_layer_norm": "output/LayerNorm"}
_MLM = {"bert/cls/predictions/transform/dense/kernel": "cls/predictions/transform/dense/kernel",
        "bert/cls/predictions/transform/dense/bias": "cls/predictions/transform/dense/bias",
        "bert/cls/predictions/transform/LayerNorm/gamma":
            "cls/predictions/transform/LayerNorm/gamma",
        "bert/cls/predictions/transform/LayerNorm/beta":
            "cls/predictions/transform/LayerNorm/beta",
        "bert/cls/predictions/output_bias/bias": "cls/predictions/output_bias"}
_LAYER = re.compile(r"^transformer/layer_(\d+)/(.+)/(kernel|bias|gamma|beta)$")
# The first BertEncoder's names of the settings BertEncoderV2 renamed.
_OLDER_NAMES = {"inner_dim": ("intermediate_size",), "inner_activation": ("activation",)}


def is_saved_model(path):
    """Whether `path` is a SavedModel directory (of any API: `read_encoder` tells)."""
    return bool(path) and os.path.isfile(os.path.join(os.fspath(path), SAVED_MODEL_FILE))


def vocab_file(path):
    """The vocabulary asset of the SavedModel at `path`, or None."""
    vocab = os.path.join(os.fspath(path), VOCAB_ASSET)
    return vocab if os.path.isfile(vocab) else None


def read_casing(path):
    """The `do_lower_case` the SavedModel at `path` records, or None."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(os.path.join(os.fspath(path), "variables", "variables"))
    return bool(reader.get_tensor(_DO_LOWER_CASE_KEY)) if reader.has_tensor(
        _DO_LOWER_CASE_KEY) else None


def _fields(data):
    """`[(field number, value)]` of a serialised protocol buffer message: varints as ints,
    length-delimited fields as bytes (what `keras_metadata.pb` needs; no other wire types)."""
    fields, i = [], 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i:i + size], i + size
        else:
            raise ValueError(f"wire type {wire}")
        fields.append((number, value))
    return fields


def _varint(data, i):
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i


def _encoder_settings(path):
    """The constructor arguments Keras recorded for the SavedModel's encoder layer, or None:
    in `keras_metadata.pb` (a `SavedMetadata`, each node's metadata a JSON object), or, in the
    SavedModels of TensorFlow 2.4 and before, in the object graph's `user_object.metadata`."""
    metadata = os.path.join(path, KERAS_METADATA_FILE)
    if os.path.isfile(metadata):
        with open(metadata, "rb") as f:
            nodes = [value for number, value in _fields(f.read()) if number == 1]
        texts = [value for node in nodes for number, value in _fields(node) if number == 5]
    else:
        from tensorflow.core.protobuf import saved_model_pb2

        saved = saved_model_pb2.SavedModel()
        with open(os.path.join(path, SAVED_MODEL_FILE), "rb") as f:
            saved.ParseFromString(f.read())
        texts = [node.user_object.metadata.encode("utf-8")
                 for node in saved.meta_graphs[0].object_graph_def.nodes
                 if node.WhichOneof("kind") == "user_object" and node.user_object.metadata]
    for text in texts:
        try:
            found = _find_encoder(json.loads(text.decode("utf-8")))
        except ValueError:  # not JSON: another object's metadata
            continue
        if found is not None:
            return found
    return None


def _find_encoder(value):
    """The `config` of the first encoder layer in a Keras metadata JSON value, or None."""
    if isinstance(value, dict):
        if value.get("class_name") in _ENCODER_CLASSES and isinstance(value.get("config"), dict):
            return value["config"]
        children = value.values()
    elif isinstance(value, list):
        children = value
    else:
        return None
    for child in children:
        found = _find_encoder(child)
        if found is not None:
            return found
    return None


def _config(settings, path):
    """The original-release config dict (`bert_config.json`'s keys; `embedding_size` where the
    embedding width differs) of the encoder `settings` (`_encoder_settings`): Model Garden's
    `BertEncoderV2` arguments, or those of its first `BertEncoder` (`intermediate_size`,
    `activation`, `dropout_rate`, `attention_dropout_rate`)."""
    def setting(name):
        for key in (name, *_OLDER_NAMES.get(name, ())):
            if key in settings:
                return settings[key]
        raise CheckpointError(f"{path}: its encoder records no {name!r} ({KERAS_METADATA_FILE})",
                              path)

    activation = setting("inner_activation")
    if isinstance(activation, dict):  # a serialised Keras function: its registered name
        activation = activation.get("config", activation.get("class_name"))
    name = str(activation).split(">")[-1]
    if name not in _ACTIVATIONS:
        raise CheckpointError(f"{path}: its encoder's activation {activation!r} is none of "
                              f"{', '.join(_ACTIVATIONS)}", path)
    if settings.get("norm_first"):
        raise CheckpointError(f"{path}: a pre-LayerNorm encoder (norm_first), not BERT's", path)
    initializer = (settings.get("initializer") or {}).get("config", {})
    config = {
        "vocab_size": setting("vocab_size"),
        "hidden_size": setting("hidden_size"),
        "num_hidden_layers": setting("num_layers"),
        "num_attention_heads": setting("num_attention_heads"),
        "intermediate_size": setting("inner_dim"),
        "hidden_act": _ACTIVATIONS[name],
        "hidden_dropout_prob": settings.get("output_dropout", settings.get("dropout_rate", 0.1)),
        "attention_probs_dropout_prob": settings.get("attention_dropout",
                                                     settings.get("attention_dropout_rate", 0.1)),
        "max_position_embeddings": setting("max_sequence_length"),
        "type_vocab_size": setting("type_vocab_size"),
        "initializer_range": initializer.get("stddev", 0.02),
    }
    width = settings.get("embedding_width") or config["hidden_size"]
    if width != config["hidden_size"]:
        config["embedding_size"] = width
    return config


def _variable_keys(path):
    """`{variable name: checkpoint key}` of the SavedModel's variables (its object graph's
    variable nodes, in the order of the checkpoint's object graph)."""
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2, trackable_object_graph_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(path, SAVED_MODEL_FILE), "rb") as f:
        saved.ParseFromString(f.read())
    reader = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    nodes = saved.meta_graphs[0].object_graph_def.nodes
    keys = {}
    for node, stored in zip(nodes, graph.nodes):
        if node.WhichOneof("kind") == "variable" and stored.attributes:
            keys.setdefault(node.variable.name, stored.attributes[0].checkpoint_key)
    return reader, keys


def read_encoder(path):
    """`(config dict, vocab_file, do_lower_case, {original name: array})` of the TF Hub
    text-encoder SavedModel at `path`: its encoder (and masked-LM head where it has the `mlm`
    sub-object) under original names, BERT's (`bert/`), or ELECTRA's (`electra/`) for an
    encoder whose embeddings are narrower than its hidden size.

    Raises `CheckpointError` naming `path` and what was found: a SavedModel of another API (no
    recorded encoder layer: a task model, a raw-text export, a TF1 Hub module), or variables that
    do not make that encoder."""
    path = os.fspath(path).rstrip("/")
    described = _read_description(path)
    if described is not None:
        return described
    settings = _encoder_settings(path)
    if settings is None:
        raise CheckpointError(
            f"{path} is a SavedModel but not a TF Hub text encoder: it records no BERT encoder "
            f"layer ({KERAS_METADATA_FILE} with one of {', '.join(_ENCODER_CLASSES[:2])}); "
            "read are TF2 text-encoder SavedModels (inputs input_word_ids, input_mask, "
            "input_type_ids) as TF Model Garden's export_tfhub.py writes them", path)
    config = _config(settings, path)
    scope = "electra" if "embedding_size" in config else "bert"
    reader, keys = _variable_keys(path)
    tensors = {}
    for name, key in keys.items():
        original = _original_name(name, scope)
        if original is None:
            continue
        value = reader.get_tensor(key)
        tensors[original] = _merged_heads(name, value)
    _check_encoder(tensors, config, scope, path)
    return config, vocab_file(path), read_casing(path), tensors


def _read_description(path):
    """`read_encoder`'s result for one of this project's exports (its `DESCRIPTION_FILE`), or
    None."""
    described = read_json_object(os.path.join(path, "assets", DESCRIPTION_FILE))
    if described is None:
        return None
    import tensorflow as tf

    reader = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
    tensors = {}
    encoder = described["variables"]
    # `mlm.variables` lists the encoder's (stored once, under `variables/`), then its head's.
    for key, name in [(f"variables/{i}", name) for i, name in enumerate(encoder)] + [
            (f"mlm/variables/{len(encoder) + i}", name)
            for i, name in enumerate(described["mlm_variables"])]:
        if name is not None:  # not dropout's random state
            tensors[name] = reader.get_tensor(f"{key}/.ATTRIBUTES/VARIABLE_VALUE")
    return described["config"], vocab_file(path), read_casing(path), tensors


def _original_name(name, scope):
    """The original-layout name of Model Garden's variable `name`, or None (not a weight of the
    encoder or its masked-LM head: `do_lower_case`, an ELECTRA export's pooler and head)."""
    if name in _MLM:
        return _MLM[name] if scope == "bert" else None
    if name in _EMBEDDINGS:
        if scope == "electra" and name.startswith("pooler_transform/"):
            return None  # ELECTRA has no pooler
        return f"{scope}/{_EMBEDDINGS[name]}"
    match = _LAYER.match(name)
    if match and match.group(2) in _LAYER_PARTS:
        layer, part, variable = match.groups()
        return f"{scope}/encoder/layer_{layer}/{_LAYER_PARTS[part]}/{variable}"
    return None


def _merged_heads(name, value):
    """`value` with the attention heads' axes merged, as the original stores it."""
    if re.search(r"self_attention/(query|key|value)/kernel$", name):
        return value.reshape(value.shape[0], -1)
    if re.search(r"self_attention/(query|key|value)/bias$", name):
        return value.reshape(-1)
    if name.endswith("self_attention/attention_output/kernel"):
        return value.reshape(-1, value.shape[-1])
    return value


def _check_encoder(tensors, config, scope, path):
    """Refuses variables that do not make the encoder the metadata describes."""
    hidden, layers = config["hidden_size"], config["num_hidden_layers"]
    expected = {f"{scope}/embeddings/word_embeddings":
                    (config["vocab_size"], config.get("embedding_size", hidden)),
                f"{scope}/encoder/layer_{layers - 1}/output/dense/kernel":
                    (config["intermediate_size"], hidden)}
    for name, shape in expected.items():
        if name not in tensors or tuple(np.shape(tensors[name])) != shape:
            found = tuple(np.shape(tensors[name])) if name in tensors else "nothing"
            raise CheckpointError(
                f"{path}: its variables do not make the encoder its metadata describes: {name} "
                f"should be {list(shape)}, found {found}", path)
