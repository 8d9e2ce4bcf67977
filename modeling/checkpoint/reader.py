"""The one reader: whatever a user gives as a starting point, seen as one `Checkpoint`.

    checkpoint = open_checkpoint(path, lora_adapters=None)
    checkpoint.layout            ORIGINAL (a TF1 prefix or folder), RUN (this project's ckpt-N or
                                 output_dir), HUGGING_FACE (a directory or weights file)
    checkpoint.family            its model family (`modeling.families`)
    checkpoint.load_into(model, strict)   every weight by the family's names, adapters merged
    checkpoint.check_fits(model)          the same checks, reading every tensor, assigning none

Our checkpoints (`ckpt-<step>` in an output_dir) store the model as `{variable path: variable}`
(e.g. `bert/layer_0/self/query/kernel`), next to the optimizer and the input position. Keras 3
models do not expose their sub-layers to TF's object-based checkpoints, and the paths give
names that are the same in every task model, so a pre-training run's encoder loads into a
classifier or span labeler by name. An original-layout checkpoint is read by original names,
a Hugging Face one as the original-layout checkpoint its names map to
(`hugging_face.read_hf_as_tf1`; with the companion folders its family reads for the model,
`hugging_face.read_hf_for_model`: ELECTRA's generator in `generator/`).

Every load follows one rule: the whole encoder of the model the config describes must be in the
checkpoint (else nothing is loaded: a config with another num_hidden_layers, a checkpoint of
another model), a head it lacks is newly initialised, what it holds beyond the model (optimizer
slots, another task's head) is left. Missing, truncated and corrupt files are refused naming the
file (`original`; the errors of `errors`, to which the machinery adds where the user gave it). A
LoRA run's checkpoint loads into a model without adapters with its kernels merged; its adapters
file (`adapters`) loads on top of its base.

It knows no run: the machinery (`bert_runner.runs.checkpoints`) gives the family a run recorded
and adds its record and labels.
"""
import dataclasses
import os
import re
from typing import Optional

import tensorflow as tf

from modeling import families
from modeling.layers import lora
from modeling.checkpoint import adapters, hugging_face, original, tf_hub
from modeling.checkpoint.errors import CheckpointError
from modeling.checkpoint.layout import (
    check_partial_directory, hf_home, is_hugging_face, read_casing)
from modeling.hf_directory import HF_WEIGHT_FILES
from modeling.family import ModelFamily

ORIGINAL, RUN, HUGGING_FACE, TF_HUB = "original", "run", "hugging_face", "tf_hub"


class ModelVariables(tf.Module):
    """Tracks a model's variables under their paths (what a RUN checkpoint holds).

    `by_path`: `{variable path: tf.Variable}`: a Keras model's own (`of_model`), or copies of a
    model under another Keras backend, whose values the caller copies in and out
    (`bert_runner.engines.jax_trainer`).
    """

    def __init__(self, by_path):
        super().__init__(name="model_variables")
        self.by_path = by_path

    @classmethod
    def of_model(cls, model):
        """Tracks every variable of the Keras (TensorFlow backend) `model`."""
        return cls({v.path: v.value for v in model.variables})


_KEY_PREFIX, _KEY_SUFFIX = "model/by_path/", "/.ATTRIBUTES/VARIABLE_VALUE"


def variable_path(key):
    """The variable path of a checkpoint key of `ModelVariables`, or None for entries that are not
    model weights (the optimizer's, the input position's).

    Keys are `model/by_path/<path>/.ATTRIBUTES/VARIABLE_VALUE` with TF's object-graph escaping
    of the path: "." → "..", "/" → ".S".
    """
    if not (key.startswith(_KEY_PREFIX) and key.endswith(_KEY_SUFFIX)):
        return None
    escaped = key[len(_KEY_PREFIX): -len(_KEY_SUFFIX)]
    return re.sub(r"\.(S|\.)", lambda m: "/" if m.group(1) == "S" else ".", escaped)


def _model_paths(model):
    # Dropout's random-number state is not a weight (and differs between task models).
    return {v.path: v for v in model.variables if "seed_generator" not in v.path}


@dataclasses.dataclass
class _Source:
    """A checkpoint seen in the model's naming: original names (the original and Hugging Face
    layouts) or variable paths (ours)."""

    prefix: str
    names: dict  # {name: model variable}
    shapes: dict  # {name: shape} of the checkpoint's model weights (no optimizer slots)
    get_tensor: object  # name -> np.ndarray
    encoder_names: list


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A starting point, read once: what it is.

    path: as given.
    layout: ORIGINAL, RUN, HUGGING_FACE or TF_HUB (a text-encoder SavedModel, `tf_hub`).
    location: the TensorFlow checkpoint prefix, the Hugging Face directory or weights file, or
      the SavedModel directory.
    family: its `modeling.family.ModelFamily`.
    shapes: `{name: shape}` of its weights, optimizer slots left out: original names (ORIGINAL)
      or variable paths (RUN); empty for HUGGING_FACE (its weights are read when loaded).
    config, config_file: the config it carries and its file (a Hugging Face `config.json`, a
      SavedModel's `keras_metadata.pb`), or None: the config then comes from the caller.
    vocab_file: the vocabulary it carries (a Hugging Face directory's, a SavedModel's asset), or
      None.
    do_lower_case: its casing, where it records one (a Hugging Face `tokenizer_config.json`, a
      SavedModel's `do_lower_case`), or None.
    lora_adapters: a LoRA run's adapters file loaded on top, or None.
    keys, reader: a TensorFlow checkpoint's `{name: its key in the file}` (the names of
      `shapes`) and its open `tf.train.CheckpointReader`, which every load reads through.
    """

    path: str
    layout: str
    location: str
    family: ModelFamily
    shapes: dict
    config: object = None
    config_file: Optional[str] = None
    vocab_file: Optional[str] = None
    do_lower_case: Optional[bool] = None
    lora_adapters: Optional[str] = None
    keys: dict = dataclasses.field(default=None, repr=False, compare=False)
    reader: object = dataclasses.field(default=None, repr=False, compare=False)
    tensors: dict = dataclasses.field(default=None, repr=False, compare=False)  # TF_HUB's

    def identity_file(self):
        """The file whose size and time identify this checkpoint (a cache made from another one is
        not reused; its content hash is the run's, `bert_runner.run_identity`): a TF checkpoint's
        `.index`, a Hugging Face weights file, a SavedModel's variables index."""
        if self.layout == TF_HUB:
            return os.path.join(self.location, "variables", "variables.index")
        if self.layout != HUGGING_FACE:
            return self.location + ".index"
        if os.path.isfile(self.location):
            return self.location
        return next(os.path.join(self.location, name) for name in HF_WEIGHT_FILES
                    if os.path.isfile(os.path.join(self.location, name)))

    def source(self, model):
        """This checkpoint as `model` loads it (`_Source`), adapters on top."""
        if self.layout == HUGGING_FACE:
            # By the family's rules for this model: a family may keep part of a model in a
            # companion folder (ELECTRA's generator) or refuse a directory for some models.
            tensors = hugging_face.read_hf_for_model(self.location, self.family, model)
            source = _Source(self.location, original.variable_map(model),
                             {n: v.shape for n, v in tensors.items()}, tensors.__getitem__,
                             [n for n, _ in original.encoder_names(model)])
        elif self.layout == TF_HUB:
            source = _Source(self.location, original.variable_map(model),
                             {n: v.shape for n, v in self.tensors.items()},
                             self.tensors.__getitem__,
                             [n for n, _ in original.encoder_names(model)])
        else:
            source = self._tensorflow_source(model)
        if self.lora_adapters:
            source = adapters.overlay(source, model, self.lora_adapters)
        return source

    def _tensorflow_source(self, model):
        if self.layout == ORIGINAL:
            names = original.variable_map(model)
            encoder_names = [n for n, _ in original.encoder_names(model)]
        else:
            names = _model_paths(model)
            # A LoRA model's adapters are new in any checkpoint but its own run's.
            encoder_names = [p for p in _model_paths(original.encoder_of(model))
                             if not lora.is_adapter_path(p)]

        def read(name):
            return original.read_tensor(self.reader, self.location, self.keys[name])

        # A LoRA run's checkpoint into a model without adapters (an export, another task): its
        # kernels load with the adapters merged in.
        merges = lora.checkpoint_merges(self.keys, names)
        adapter_paths = {path for adapter in merges.values() for path in adapter}

        def get_tensor(name):
            if name not in merges:
                return read(name)
            return lora.merged_value(read(name), *(read(path) for path in merges[name]))

        return _Source(self.location, names,
                       {n: s for n, s in self.shapes.items() if n not in adapter_paths},
                       get_tensor, encoder_names)

    def load_into(self, model, strict, config_file=None):
        """Loads this checkpoint into `model`: an original-layout or Hugging Face checkpoint by
        original variable name, one of ours by variable path (see the module docstring).

        strict=True: every variable on both sides, with its shape (e.g. a fine-tuned classifier
        to export); strict=False: the whole encoder, and the heads it has; a head it lacks stays
        newly initialised (logged as the original does, `*INIT_FROM_CKPT*`). `config_file` (the
        model's config) is named in the messages. Returns the `original.LoadReport`.
        """
        source = self.source(model)
        _check_required_scopes(model, source)
        encoder = original.Encoder.of(model, source.encoder_names, config_file)
        return original.assign_checked(
            source.names, source.shapes, source.get_tensor, source.prefix, strict,
            encoder=encoder)

    def check_fits(self, model, config_file=None, read_tensors=True, explain=None):
        """Checks, before any work, that this checkpoint is readable and fits `model`.

        Reads every tensor the model would take (so a truncated or corrupt `.data` file is found
        now, named, not after the features are written; not with `read_tensors=False`, for a
        run's own checkpoints, whose restore falls back past one that does not read: see
        `bert_runner.trainer.restore_newest_readable`) and compares names and shapes as
        `load_into` does; assigns nothing. Raises `CheckpointError` naming the checkpoint (the
        config file, each mismatched variable, the missing encoder variables) and the lines
        `explain(model, config_file, in_encoder)` gives (None: none) on why shapes differ, in
        the encoder or in a head alone.

        Returns the names of the model's variables the checkpoint lacks, which loading it leaves
        newly initialised (a new head; the pooler: see `original.check_encoder`).
        """
        source = self.source(model)
        _check_required_scopes(model, source)
        wrong = [name for name, var in source.names.items()
                 if name in source.shapes and tuple(source.shapes[name]) != tuple(var.shape)]
        if wrong:
            mismatched = [f"  shape mismatch {name}: model {list(source.names[name].shape)}, "
                          f"checkpoint {list(source.shapes[name])}" for name in wrong]
            encoder_names = set(source.encoder_names)
            in_encoder = any(name in encoder_names for name in wrong)
            why = explain(model, config_file, in_encoder) if explain else []
            raise CheckpointError("\n".join(
                [f"Checkpoint {source.prefix} does not fit the model of "
                 f"{families.of_model(model).config_named(config_file)}:"] + mismatched + why),
                source.prefix)
        report = original.LoadReport(
            source.prefix, [n for n in source.names if n in source.shapes],
            [n for n in source.names if n not in source.shapes],
            sorted(n for n in source.shapes if n not in source.names), [])
        original.check_encoder(
            report, original.Encoder.of(model, source.encoder_names, config_file),
            source.shapes)
        for name in report.loaded if read_tensors else ():
            source.get_tensor(name)
        return report.missing


def _check_required_scopes(model, source):
    """Refuses a checkpoint without a part the model cannot start without beside its encoder:
    the scopes of its `required_scopes()` (ELECTRA's pre-training model: its generator), each
    with why."""
    for scope, why in getattr(model, "required_scopes", tuple)():
        if not any(name.startswith(f"{scope}/") for name in source.shapes):
            raise ValueError(f"Checkpoint {source.prefix} holds no {scope}: {why}")


def open_checkpoint(path, lora_adapters=None, family=None):
    """The `Checkpoint` at `path`: an original TF1 prefix or folder, one of our ckpt-N prefixes
    or output_dirs (or a --seeds `seed_<n>` folder), a Hugging Face directory or weights file, a
    TF Hub text-encoder SavedModel (`tf_hub`); `lora_adapters`, a LoRA run's adapters file to
    load on top.
    A TensorFlow checkpoint is read as `family`'s (a `ModelFamily`, the one its run recorded),
    else as the family its names are.

    Raises `CheckpointNotFoundError` saying what is there instead
    (`original.resolve_checkpoint_prefix`), `CheckpointError` for a directory with part of the
    Hugging Face layout or an unreadable index.
    """
    path = os.fspath(path)
    check_partial_directory(path)
    if is_hugging_face(path):
        home = hf_home(path)
        config_file = os.path.join(home, "config.json") if home else None
        config = hugging_face.read_config(config_file) if home else None
        vocab_file = os.path.join(home, "vocab.txt") if home else None
        return Checkpoint(
            path, HUGGING_FACE, path,
            families.of_config(config) if config else families.families()[0], {},
            config=config, config_file=config_file,
            vocab_file=vocab_file if vocab_file and os.path.isfile(vocab_file) else None,
            do_lower_case=read_casing(home) if home else None,
            lora_adapters=lora_adapters)
    if tf_hub.is_saved_model(path):
        return _open_tf_hub(path, lora_adapters)
    prefix, reader, shapes = original.read_checkpoint(path)
    if original.is_tf1_layout(shapes):
        layout = ORIGINAL
        keys = {n: n for n in shapes if not original.is_optimizer_entry(n)}
    else:
        layout = RUN
        keys = {p: k for p, k in ((variable_path(k), k) for k in shapes)
                if p is not None and "seed_generator" not in p}
    names = {name: shapes[key] for name, key in keys.items()}
    # Our variable paths begin as the original names do (`bert/embeddings/word_embeddings`).
    return Checkpoint(path, layout, prefix, family or families.of_original_names(names),
                      names, lora_adapters=lora_adapters, keys=keys, reader=reader)


def _open_tf_hub(path, lora_adapters):
    """The `Checkpoint` of a TF Hub text-encoder SavedModel: its config, vocabulary, casing and
    weights (original names) read from it (`tf_hub.read_encoder`)."""
    config, vocab_file, do_lower_case, tensors = tf_hub.read_encoder(path)
    family = families.of_original_names(tensors)
    return Checkpoint(
        path, TF_HUB, os.fspath(path).rstrip("/"), family,
        {name: value.shape for name, value in tensors.items()},
        config=family.config_class.from_dict(config).validate(source=path),
        config_file=os.path.join(path, tf_hub.KERAS_METADATA_FILE), vocab_file=vocab_file,
        do_lower_case=do_lower_case, lora_adapters=lora_adapters, tensors=tensors)


def load_checkpoint(model, path, strict=True, config_file=None, lora_adapters=None):
    """`open_checkpoint(path, lora_adapters).load_into(model, strict, config_file)`."""
    return open_checkpoint(path, lora_adapters).load_into(model, strict, config_file)


def initialize_from_checkpoint(model, init_checkpoint, config_file=None, lora_adapters=None):
    """Loads `init_checkpoint` into `model`: the whole encoder, and the heads it has
    (`Checkpoint.load_into` with strict=False)."""
    return load_checkpoint(model, init_checkpoint, False, config_file, lora_adapters)


def check_init_checkpoint(model, init_checkpoint, config_file=None, lora_adapters=None,
                          read_tensors=True):
    """`Checkpoint.check_fits` of `init_checkpoint`, before any work: returns the model's
    variables it would leave newly initialised."""
    return open_checkpoint(init_checkpoint, lora_adapters).check_fits(
        model, config_file, read_tensors)

