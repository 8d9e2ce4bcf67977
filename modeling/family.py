"""The model-family contract: what a kind of encoder declares, so that the checkpoint package,
the optimizer and the tasks serve it without naming it.

A family (`modeling.bert.family.BERT`, `modeling.electra.family.ELECTRA`) declares its config
class, its encoder and task models (its heads, by the kind of task they serve), its variables'
names in the original TF1 layout, the rules that turn those into Hugging Face's names and back,
and how its Hugging Face `config.json` reads and writes. This module imports no family and no
checkpoint code: both import it, and `modeling.families` lists the families
(docs/adding_a_model_family.md).
"""
import dataclasses
from typing import Callable, Mapping

import numpy as np

# The kinds of model a family builds, the keys of `ModelFamily.models`, with the arguments each
# takes after the config:
#   "encoder"          the bare encoder (sequence and pooled output)
#   "pretrainer"       the pre-training heads
#   "classifier"       (num_labels): one label per sequence (softmax, or regression with 1)
#   "multi_label"      (num_labels): independent sigmoids per sequence
#   "span"             SQuAD's start and end logits
#   "multiple_choice"  (num_choices): SWAG's one score per choice
#   "token"            (num_labels): one label per token (NER)
#   "sentence_encoder" (pooling, normalize): one vector per text (sentence embeddings)
MODEL_KINDS = ("encoder", "pretrainer", "classifier", "multi_label", "span", "multiple_choice",
               "token", "sentence_encoder")


class NoHfClass(ValueError):
    """A task model transformers has no class for (its family's `hf_heads` says why)."""


@dataclasses.dataclass(frozen=True)
class HfHead:
    """A task model's head as the transformers class that computes it (`ModelFamily.hf_heads`).

    architecture: the class ("BertForSequenceClassification"), config.json's `architectures`.
    names: `{original head name: Hugging Face name}`; the arrays are the same (output layers,
      `[out, in]` in both layouts).
    zeros: `{Hugging Face name: shape}` the class holds and the model has not (a bias that
      cancels in the softmax): written as zeros, read back as nothing.
    pooler: whether the class holds the encoder's pooler (transformers' token and span classes
      have none).
    problem_type: `num_labels -> config.json's "problem_type"` (None: none written); also how
      a directory of an architecture several heads share is told apart when read.
    labels: whether config.json names its outputs (`id2label`, `label2id`).
    config: config.json keys the class needs to compute the model's outputs.
    """

    architecture: str
    names: Mapping[str, str]
    zeros: Mapping[str, tuple] = dataclasses.field(default_factory=dict)
    pooler: bool = True
    problem_type: Callable = lambda num_labels: None
    labels: bool = False
    config: Mapping[str, object] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ModelFamily:
    """One model family, as the checkpoint package and the tasks see it.

    name: the family's name ("bert"), recorded in run.json.
    config_class: its config (`BertConfig`); a config's family is found by its class.
    claims_config: `(dict of a config file) -> bool`: whether a config file (not a Hugging Face
      `config.json`) is this family's (BERT's: it holds every key of `bert_config.json`).
    config_from_file: `path -> config`, reading such a file; errors name it.
    models: `{kind: callable(config, *args, **options) -> keras.Model}` for every `MODEL_KINDS`
      kind the family serves; task models declare their heads' original names themselves
      (`tf1_head_variables()`).
    encoder_names: `(encoder) -> [(original name, variable)]` in the original's creation order.
    original_scope: the scope of the encoder's variables in the original layout ("bert"): a
      checkpoint holding `<scope>/embeddings/word_embeddings` is of this family.
    hf_model_types: the `model_type` values of the Hugging Face `config.json` files it reads.
    hf_name: original name -> (Hugging Face name, whether the array is transposed).
    original_name: Hugging Face name -> (original name, transposed): `hf_name` inverted.
    normalise_hf_names: `{name: array}` as saved (with or without the model prefix, older
      names) -> `{Hugging Face name: array}` of the names `original_name` inverts, without the
      entries that duplicate tied or constant state.
    config_from_hf: `(dict of config.json, its path) -> config`, refusing what it cannot model.
    config_to_hf: `config -> dict` of the `config.json` transformers reads.
    hf_encoder_prefix: the prefix the bare encoder's Hugging Face names are saved without.
    warmup_rule: the learning-rate warm-up its original code trains with
      (`modeling.optimization.WARMUP_RULES`): "bert" (linear warm-up, then the decay counted
      from step 0) or "electra" (the decay times min(1, step / warm-up steps)).
    layerwise_lr_decay: `config -> float`, the layer-wise learning-rate decay its original
      fine-tuning uses by default (1.0: none).
    config_from_checkpoint: `({original name: shape}, source) -> config` for a family whose
      released checkpoints come without a config file (ELECTRA's), or None.
    read_hf: `(location, model, read) -> {original name: array}`, how `model` reads the Hugging
      Face checkpoint at `location` (a directory, or a weights file with its `config.json`
      beside it) when the family's checkpoints are more than one weights file or are refused
      for some models: `read(path)` is the `{original name: array}` of one directory or weights
      file by the family's names (`hugging_face.read_hf_as_tf1`); the family adds what it keeps
      in companion folders (ELECTRA's pre-training model: its generator, in `generator/`) and
      refuses (ValueError naming the files) what the model cannot start from (ELECTRA: a
      generator given for a discriminator). None (BERT's): `read(location)`.
    hf_folders: `(model) -> [(folder, config.json dict, {Hugging Face name: array as saved})]`
      or None: the Hugging Face directories `write_hugging_face` writes for `model`, folder ""
      the directory itself and others below it (ELECTRA's pre-training model: the
      discriminator with its head, and its generator in `generator/`; BERT's: the encoder and
      both heads as `BertForPreTraining`). None (the function's answer for the other models, or
      the field's): the encoder alone, as the bare model saves it (names without
      `hf_encoder_prefix`, `config_to_hf` of its config).
    config_file: what its users call the config file they give as --bert_config_file (the
      original's flag, which every family's scripts keep), in messages: BERT's
      "bert_config.json", ELECTRA's "--hparams JSON".
    hf_heads: `{kind: HfHead or str}`: the transformers class of each fine-tuned kind of model
      (`MODEL_KINDS`), which `write_hugging_face` writes with its head and the reader reads
      back by its `architectures`; a str says why transformers has no class for that kind
      (ELECTRA's own SQuAD head), the refusal `hf_head` raises. A kind absent: no class either.
    """

    name: str
    config_class: type
    claims_config: Callable
    config_from_file: Callable
    models: Mapping[str, Callable]
    encoder_names: Callable
    original_scope: str
    hf_model_types: tuple
    hf_name: Callable
    original_name: Callable
    normalise_hf_names: Callable
    config_from_hf: Callable
    config_to_hf: Callable
    hf_encoder_prefix: str
    warmup_rule: str = "bert"
    layerwise_lr_decay: Callable = lambda config: 1.0
    config_from_checkpoint: Callable = None
    read_hf: Callable = None
    hf_folders: Callable = None
    config_file: str = "bert_config.json"
    hf_heads: Mapping[str, object] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        unknown = sorted(set(self.models) - set(MODEL_KINDS))
        if unknown:
            raise ValueError(f"the {self.name} family declares models of unknown kinds {unknown} "
                             f"(kinds: {', '.join(MODEL_KINDS)})")

    def build(self, kind, config, *args, **options):
        """The family's `kind` model of `config` (see `MODEL_KINDS`)."""
        if kind not in self.models:
            raise ValueError(f"the {self.name} family has no {kind!r} model (it builds "
                             f"{', '.join(self.models)})")
        return self.models[kind](config, *args, **options)

    def kind_of(self, model):
        """The `MODEL_KINDS` kind of `model` (one of this family's models), or None."""
        return next((kind for kind, built in self.models.items() if type(model) is built), None)

    def hf_head(self, model):
        """The `HfHead` of the task model `model`; raises `NoHfClass` saying why transformers
        has none for it (its kind's refusal, a BiLSTM on top)."""
        kind = self.kind_of(model)
        head = self.hf_heads.get(kind)
        if getattr(model, "bilstm", None) is not None:
            head = ("a BiLSTM on top of the encoder (--bilstm_on_top), which no transformers "
                    "class has")
        if not isinstance(head, HfHead):
            raise NoHfClass(f"transformers has no class for the {self.name.upper()} {kind} "
                            f"model: {head or 'no head of that kind'}")
        return head

    def head_of_hf_config(self, hf):
        """The `HfHead` a Hugging Face `config.json` (dict) names by its `architectures` (and
        `problem_type`, where heads share a class), or None (a bare model, a pre-training one,
        or the class configured to compute another head than ours: ELECTRA's multiple choice
        with a projection)."""
        architectures = hf.get("architectures") or ()
        num_labels = len(hf.get("id2label") or {}) or 2
        heads = [h for h in self.hf_heads.values()
                 if isinstance(h, HfHead) and h.architecture in architectures
                 and all(hf.get(key) == value for key, value in h.config.items())]
        return next((h for h in heads if h.problem_type(num_labels) == hf.get("problem_type")),
                    heads[0] if heads else None)

    def hf_tensors(self, names):
        """`{Hugging Face name: float32 array as saved}` of `[(original name, variable)]` by the
        family's names (`hf_name`; kernels transposed to PyTorch's `[out, in]`)."""
        tensors = {}
        for name, var in names:
            hf, transpose = self.hf_name(name)
            value = np.asarray(var, dtype=np.float32)
            tensors[hf] = value.T if transpose else value
        return tensors

    def config_flag(self, config_file=None):
        """How a message names the config a model was built from: its path when known, else the
        flag, with what this family's file is when it is not BERT's."""
        if config_file:
            return str(config_file)
        if self.config_file == "bert_config.json":
            return "--bert_config_file"
        return f"--bert_config_file (the {self.config_file})"

    def holds_encoder(self, names):
        """Whether original-layout `names` hold this family's encoder."""
        return f"{self.original_scope}/embeddings/word_embeddings" in names
