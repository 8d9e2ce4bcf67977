"""run_ner_feature_based.py's run: every check before the activations, then the caches and rows.

Computing the activations is the run's long part (BERT-Base over CoNLL-2003 train: about 4 GB of
them), so `prepare` checks everything the user gave before it: the config, the vocabulary and its
case, the layer choices against the model's depth, output_dir and the cache directory (local,
writable), both data files (format, tags against the label list), their windows, and that the
checkpoint fits the config and reads to its end. Only then does `Table7Run.build_caches` compute
(or reuse) the activations, removing the temporary files a killed run left in the caches first.

    run = prepare(Table7Flags(...))
    caches = run.build_caches(predict_batch_size)
"""
import dataclasses
import os
import time
from typing import Dict, List, Optional

import keras
from absl import logging

from bert_runner import run_identity
from bert_tasks.ner import activations, conll, feature_based, tags
from bert_tasks.ner.sets import NerSet
from bert_runner.runs.hashes import fingerprint

SPLITS = ("train", "dev")


@dataclasses.dataclass(frozen=True)
class Table7Flags:
    """What the script's flags say (their names)."""
    data_dir: str
    bert_config_file: Optional[str]
    vocab_file: Optional[str]
    init_checkpoint: str
    output_dir: str
    do_lower_case: bool = True
    max_seq_length: int = 128
    document_context: bool = True
    entity_types: Optional[List[str]] = None
    choices: Optional[List[str]] = None
    cache_dir: Optional[str] = None


@dataclasses.dataclass
class Table7Run:
    """A checked run: everything the activations and the taggers need.

    Attributes:
      flags: Table7Flags.
      config, tokenizer: the model's config and the faithful tokenizer.
      choices: list of `feature_based.FeatureChoice`, each fitting the model.
      sets: {"train": NerSet, "dev": NerSet}, with their windows made (None where the cache
        will be reused).
      label_list: list of str.
      bert: the frozen `modeling.BertModel`.
      model: what identifies the model (`model_identity`).
      cache_dir: the local directory of the caches (one sub-directory per split).
      started: when `prepare` started (seconds since the epoch).
    """
    flags: Table7Flags
    config: object
    tokenizer: object
    choices: list
    sets: Dict[str, NerSet]
    label_list: List[str]
    bert: object
    model: dict
    cache_dir: str
    started: float

    def settings(self, split):
        """What the activations of `split` depend on (`cache_settings`)."""
        return cache_settings(self.flags, self.sets[split].path, self.model, self.label_list)

    def build_caches(self, batch_size):
        """{split: ActivationCache}, reused or computed now."""
        f = self.flags
        forward = activations.encoder_forward(self.bert)
        return {split: activations.ActivationCache.build(
            os.path.join(self.cache_dir, split), self.settings(split), self.bert, data.documents,
            self.tokenizer, self.label_list, f.max_seq_length, batch_size, f.document_context,
            windows=data.windows, started=self.started, forward=forward)
            for split, data in self.sets.items()}


def model_identity(init_checkpoint, config):
    """The model whose activations are cached, by content: the checkpoint's weights and the
    config that reads them (another activation function, say, on the same weights)."""
    return {run_identity.START_HASH: fingerprint(init_checkpoint),
            run_identity.CONFIG: run_identity.config_sha256(config)}


def cache_settings(flags, data_file, model, label_list):
    """What the activations of `data_file` depend on, files by their content: a cache made from
    anything else is computed again."""
    return {
        **model, "data_sha256": fingerprint(data_file),
        "vocab_sha256": fingerprint(flags.vocab_file),
        "do_lower_case": flags.do_lower_case, "max_seq_length": flags.max_seq_length,
        "document_context": flags.document_context, "label_list": label_list,
    }


def resolve_choices(keys, num_hidden_layers):
    """The FeatureChoices of `keys` (all six when None); ValueError for one the model is too
    shallow for."""
    choices = ([feature_based.CHOICES_BY_KEY[k] for k in keys] if keys
               else list(feature_based.FEATURE_CHOICES))
    return [choice.for_model(num_hidden_layers) for choice in choices]


def prepare(flags):
    """Checks everything `flags` (a Table7Flags) name, in the order of their cost; returns the
    Table7Run. Computes no activation.

    Raises:
      ValueError (file errors: OSError) naming the flag, file or line.
    """
    from bert_runner import results, startup
    from bert_runner.runs.model_files import model_files

    if keras.backend.backend() != "tensorflow":
        # Its taggers train batch by batch, each sentence length compiled anew by JAX.
        raise ValueError(f"run_ner_feature_based.py runs under TensorFlow only, not under "
                         f"KERAS_BACKEND={keras.backend.backend()}: unset KERAS_BACKEND")
    started = time.time()
    files = model_files(flags.bert_config_file, flags.vocab_file, flags.init_checkpoint,
                        flags.max_seq_length)
    flags = dataclasses.replace(flags, bert_config_file=files.config_file,
                                vocab_file=files.vocab_file)
    config = files.config
    tokenizer = startup.load_tokenizer(flags.vocab_file, flags.do_lower_case,
                                       flags.init_checkpoint, config, flags.bert_config_file)
    choices = resolve_choices(flags.choices, config.num_hidden_layers)
    results.check_writable_dir(flags.output_dir, "output_dir")  # table7.txt comes hours later
    cache_dir = flags.cache_dir or os.path.join(flags.output_dir, "activations")
    for split in SPLITS:
        activations.check_cache_dir(os.path.join(cache_dir, split))
    sets = {split: NerSet.read(conll.split_file(flags.data_dir, split)) for split in SPLITS}
    label_list = tags.resolve_label_list(flags.entity_types,
                                         [s.tags for s in sets["train"].sentences])
    for data in sets.values():
        data.check_labels(label_list)
    logging.info("Labels: %s", " ".join(label_list))
    model = model_identity(flags.init_checkpoint, config)
    for split, data in sets.items():
        # Tokenized now, so that a bad window setting fails before any activation; a cache that
        # will be reused needs no windows.
        settings = cache_settings(flags, data.path, model, label_list)
        if not activations.ActivationCache.reusable(os.path.join(cache_dir, split), settings,
                                                    config.num_hidden_layers):
            sets[split] = data.windowed(tokenizer, flags.max_seq_length, flags.document_context)
    bert = activations.load_frozen_encoder(config, flags.init_checkpoint)
    return Table7Run(flags, config, tokenizer, choices, sets, label_list, bert, model, cache_dir,
                     started)
