"""Checkpoints in Hugging Face's layout, in and out: a directory holding `config.json`,
`model.safetensors` (or `pytorch_model.bin`) and `vocab.txt`, or the weights file alone.

The names are the family's (`modeling.families`): its Hugging Face names are derived from the
original names by fixed rules, so a Hugging Face checkpoint is read as the original-layout
checkpoint it names (`read_hf_as_tf1`) and every check of the original loader applies to it.
Safetensors files are read and written with the `safetensors` package's NumPy API.
Scripts reach this module through `modeling.checkpoint`.
"""
import json
import os
import pickle
import shutil
import uuid

import numpy as np
import safetensors
import safetensors.numpy

from modeling import families
from modeling.checkpoint.original import encoder_names, encoder_of, is_pooler
from modeling.checkpoint.layout import LABEL_LIST_FILE
from modeling.json_file import read_json_object, read_required_json_object


def read_config(path):
    """The config of a Hugging Face `config.json`, by its family (`model_type`; none: BERT, as
    transformers' oldest files); errors name the file."""
    return config_from_dict(read_required_json_object(path, "Hugging Face config file"), path)


def config_from_dict(hf, path):
    """The config of `hf`, the dict of the Hugging Face `config.json` at `path` (`read_config`)."""
    family = families.of_hf_model_type(hf.get("model_type", "bert"), path)
    return family.config_from_hf(hf, path)


def write_safetensors(path, tensors, metadata=None):
    """Writes `{name: np.ndarray}` as a `.safetensors` file, with `{str: str}` `metadata`."""
    # (np.ascontiguousarray would make a scalar [1])
    safetensors.numpy.save_file(
        {name: np.asarray(array, order="C") for name, array in tensors.items()}, path, metadata)


def read_safetensors_metadata(path):
    """The `__metadata__` (`{str: str}`) of a `.safetensors` file, {} without one."""
    with _open_safetensors(path) as f:
        return f.metadata() or {}


def read_safetensors(path):
    """`{name: np.ndarray}` of a `.safetensors` file (bfloat16 as `ml_dtypes.bfloat16`)."""
    with _open_safetensors(path) as f:
        tensors = {}
        for name in f.keys():
            try:
                tensors[name] = f.get_tensor(name)
            except (AttributeError, TypeError, safetensors.SafetensorError) as e:
                raise ValueError(f"{path}: tensor {name} cannot be read as NumPy ({e}): a dtype "
                                 "this reader does not know (float32, float16, bfloat16 and "
                                 "the integer types are read)") from e
        return tensors


def _open_safetensors(path):
    """`safetensors.safe_open(path)` for NumPy; a file cut short, or whose header is not one, is
    refused naming it."""
    try:
        return safetensors.safe_open(path, framework="np")
    except safetensors.SafetensorError as e:
        if "not fully covered" in str(e):
            raise ValueError(f"{path}: truncated: its header describes more bytes of tensors than "
                             f"the file's {os.path.getsize(path)} (an interrupted download or "
                             "copy?)") from e
        raise ValueError(f"{path}: corrupt safetensors header ({e})") from e


def read_torch_state_dict(path):
    """`{name: np.ndarray}` from a PyTorch `pytorch_model.bin` (needs torch installed); a file
    torch cannot read, or that holds no dict of tensors, is refused naming it."""
    try:
        import torch
    except ImportError as e:
        raise ImportError(
            f"{path}: reading a PyTorch state dict needs `torch`; convert it to model.safetensors "
            "or `pip install torch`"
        ) from e
    # A file cut short fails deep in torch's zip reader ("[Errno 22] Invalid argument", no
    # file named); a file that is no pickle of tensors fails in its weights-only unpickler.
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, EOFError, RuntimeError, pickle.UnpicklingError) as e:
        # (the unpickler's own message is a page of advice on trusting the file)
        cause = ("torch's weights-only unpickler refused it"
                 if isinstance(e, pickle.UnpicklingError)
                 else (str(e).splitlines() or [type(e).__name__])[0])
        raise ValueError(f"{path}: cannot be read as a PyTorch state dict ({cause}): truncated or "
                         "corrupt (an interrupted download or copy?)") from e
    if not isinstance(state, dict) or not all(torch.is_tensor(v) for v in state.values()):
        held = "other values" if isinstance(state, dict) else f"a {type(state).__name__}"
        raise ValueError(f"{path}: cannot be read as a PyTorch state dict: it holds {held}, not "
                         "tensors by name")
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


def read_hf_as_tf1(path, family):
    """`{original name: np.ndarray in the original's orientation}` of a Hugging Face checkpoint of
    `family` (a weights file or a directory holding one); the tied decoder and `position_ids` are
    left out. A task model's head is read by the names of the class its `config.json` names
    (`ModelFamily.head_of_hf_config`: a multi-label classifier's, a multiple-choice scorer's),
    the entries that class holds beyond the model (`HfHead.zeros`) left out."""
    head = family.head_of_hf_config(_config_beside(path))
    by_class = {hf: original for original, hf in head.names.items()} if head else {}
    weights = read_hf_weights(path)
    for name in head.zeros if head else ():
        weights.pop(name, None)
    tensors = {}
    for name, value in family.normalise_hf_names(weights).items():
        if name in by_class:
            tensors[by_class[name]] = value
            continue
        name, transpose = family.original_name(name)
        tensors[name] = value.T if transpose else value
    return tensors


def _config_beside(path):
    """The dict of the `config.json` of a Hugging Face directory or beside its weights file ({}:
    none)."""
    path = os.fspath(path)
    folder = path if os.path.isdir(path) else os.path.dirname(path) or "."
    return read_json_object(os.path.join(folder, "config.json")) or {}


def read_hf_for_model(path, family, model):
    """`{original name: np.ndarray}` of the Hugging Face checkpoint at `path` (of `family`) as
    `model` loads it: the family's `read_hf` (companion folders, refusals) over
    `read_hf_as_tf1`."""
    def read(where):
        return read_hf_as_tf1(where, family)

    tensors = family.read_hf(os.fspath(path), model, read)
    return _cross_encoder_as_two_labels(tensors, _config_beside(path), model)


def _cross_encoder_as_two_labels(tensors, config, model):
    """`tensors` with a sentence-transformers cross-encoder's head (one logit z, not a
    regression: a reranker's export, `bert_tasks.classifier.raw_text.cross_encoder`) read into
    the two labels `model`'s head has: rows [0, z], whose softmax is [1 - sigmoid(z),
    sigmoid(z)], the cross-encoder's score as the probability of label "1"."""
    head = dict(getattr(model, "tf1_head_variables", list)())
    sequence_classifier = any(name.endswith("ForSequenceClassification")
                              for name in config.get("architectures") or ())
    if not sequence_classifier or config.get("problem_type") == "regression" or len(head) != 2:
        return tensors
    (weights, kernel), (bias, offset) = head.items()
    if not (tuple(kernel.shape[:1]) == tuple(offset.shape) == (2,) and weights in tensors
            and bias in tensors and tensors[weights].shape[:1] == tensors[bias].shape == (1,)):
        return tensors
    return {**tensors, **{name: np.concatenate([np.zeros_like(tensors[name]), tensors[name]])
                          for name in (weights, bias)}}


def hf_folders(model, head=False, labels=None, hf_config=None):
    """`[(folder, config.json dict, {Hugging Face name: array})]` that `save_hf_model` writes
    for `model`: its family's `hf_folders`; with `head`, a task model as the transformers class
    of its head (`head_folder`); else the encoder alone as the bare model saves it (names
    without the model prefix)."""
    family = families.of_model(model)
    folders = family.hf_folders(model)
    if folders is not None:
        return folders
    if head:
        return [("", *head_folder(model, labels, hf_config))]
    tensors = {name.removeprefix(family.hf_encoder_prefix): value
               for name, value in family.hf_tensors(encoder_names(model)).items()}
    return [("", family.config_to_hf(encoder_of(model).config), tensors)]


def head_folder(model, labels=None, hf_config=None):
    """(config.json dict, {Hugging Face name: array}) of the task model `model` as the
    transformers class its family declares for its head (`ModelFamily.hf_head`: raises
    `NoHfClass` where there is none): the encoder under the model prefix (without the pooler
    where the class has none), the head by the class's names, its `problem_type`, and its
    outputs named by `labels` (None: transformers' LABEL_<i>; refused where their number is not
    the model's), and the config.json entries `hf_config` (a cross-encoder's activation)."""
    family = families.of_model(model)
    head = family.hf_head(model)
    encoder = encoder_of(model)
    tensors = family.hf_tensors([(name, var) for name, var in encoder_names(model)
                                 if head.pooler or not is_pooler(name)])
    for name, var in model.tf1_head_variables():
        tensors[head.names[name]] = np.asarray(var, dtype=np.float32)
    for name, shape in head.zeros.items():
        tensors[name] = np.zeros(shape, np.float32)
    config = {**family.config_to_hf(encoder.config), "architectures": [head.architecture],
              **head.config}
    num_labels = getattr(model, "num_labels", None)
    if head.labels:
        names = list(labels) if labels is not None else [f"LABEL_{i}" for i in range(num_labels)]
        if len(names) != num_labels:
            raise ValueError(f"{len(names)} labels ({', '.join(names)}) for a "
                             f"{head.architecture} of {num_labels} outputs")
        config["id2label"] = {str(i): name for i, name in enumerate(names)}
        config["label2id"] = {name: i for i, name in enumerate(names)}
    problem_type = head.problem_type(num_labels)
    if problem_type:
        config["problem_type"] = problem_type
    config.update(hf_config or {})
    return config, tensors


def save_hf_model(model, directory, vocab_file, do_lower_case, sentence_embedding=None,
                  head=False, labels=None, json_files=None, hf_config=None):
    """Writes `model` as a Hugging Face directory that transformers' model of its family loads
    (`BertModel.from_pretrained(directory)`): for most models their encoder, as the bare model
    saves it; a family may write more (`ModelFamily.hf_folders`: BERT's pre-training model is a
    `BertForPreTraining` directory, ELECTRA's an `ElectraForPreTraining` directory with its
    generator in `generator/`). Each folder
    holds `config.json`, `model.safetensors` (float32), `vocab.txt` and `tokenizer_config.json`
    (the casing). The directory must not exist; it is written under a temporary name and
    renamed. Returns `directory`.

    `sentence_embedding`: None, or `(pooling, normalize, max_seq_length)` to also write the files
    with which `sentence_transformers.SentenceTransformer(directory)` computes the vectors of
    `modeling.layers.pooling.pool` (`sentence_transformer_files`).
    `head`: a fine-tuned task model as the transformers class of its head
    (`BertForSequenceClassification`, ...: `head_folder`, its outputs named by `labels`, which
    are also written as the run's `label_list.txt`), refused (`NoHfClass`) where transformers
    has none; `hf_config`: entries of its config.json beside the family's (a cross-encoder's
    activation).
    `json_files`: `{relative path: JSON value}` written in the directory too (a task's serving
    settings, `export.json`).
    """
    directory = os.fspath(directory).rstrip("/")
    if os.path.exists(directory):
        raise FileExistsError(f"{directory} already exists: choose a new directory")
    encoder = encoder_of(model)
    folders = hf_folders(model, head, labels, hf_config)
    tmp = f"{directory}.tmp-{uuid.uuid4().hex}"
    os.makedirs(tmp)
    try:
        for folder, config, tensors in folders:
            _write_hf_folder(os.path.join(tmp, folder), config, tensors, vocab_file,
                             do_lower_case)
        if head and labels is not None:
            # The run's own record of its labels, as beside its checkpoints: a script started
            # from the directory (--init_checkpoint) takes and checks them as from the run.
            with open(os.path.join(tmp, LABEL_LIST_FILE), "w", encoding="utf-8") as f:
                f.write("\n".join(labels) + "\n")
        files = dict(json_files or {})
        if sentence_embedding is not None:
            files.update(sentence_transformer_files(encoder.config.hidden_size,
                                                    *sentence_embedding))
            if sentence_embedding[1]:
                os.makedirs(os.path.join(tmp, NORMALIZE_FOLDER))
        for name, value in files.items():
            os.makedirs(os.path.dirname(os.path.join(tmp, name)), exist_ok=True)
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
                json.dump(value, f, indent=2)
                f.write("\n")
        os.replace(tmp, directory)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return directory


def _write_hf_folder(folder, config, tensors, vocab_file, do_lower_case):
    """One Hugging Face directory: `config.json` (`config`), `model.safetensors` (`tensors`),
    `tokenizer_config.json` and `vocab.txt`."""
    os.makedirs(folder, exist_ok=True)
    write_safetensors(os.path.join(folder, "model.safetensors"), tensors, {"format": "pt"})
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"do_lower_case": bool(do_lower_case), "tokenizer_class": "BertTokenizer",
                   "model_max_length": config["max_position_embeddings"]}, f, indent=2)
        f.write("\n")
    shutil.copyfile(vocab_file, os.path.join(folder, "vocab.txt"))


NORMALIZE_FOLDER = "2_Normalize"


def sentence_transformer_files(hidden_size, pooling, normalize, max_seq_length):
    """`{relative path: JSON value}` of sentence-transformers' modules over a BERT directory: the
    transformer, `1_Pooling` ("cls", "mean" or "max", as `modeling.layers.pooling.pool`) and with
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
