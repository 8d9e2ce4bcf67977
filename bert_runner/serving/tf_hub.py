"""export_model.py --format=tfhub: any checkpoint this project reads as the two SavedModels of TF
Hub's text API (https://www.tensorflow.org/hub/common_saved_model_apis/text), as TF Model
Garden's `export_tfhub.py` writes them, in `--export_dir`:

  encoder/        `__call__({"input_word_ids", "input_mask", "input_type_ids"}, training)` ->
                  `sequence_output [B, S, H]`, `pooled_output [B, H]` (also `default`),
                  `encoder_outputs` (every layer's [B, S, H]); `vocab_file` (an asset) and
                  `do_lower_case`; `variables`, `trainable_variables` and
                  `regularization_losses`, so `hub.KerasLayer(encoder, trainable=True)`
                  fine-tunes it; an `mlm` sub-object where the checkpoint has BERT's masked-LM
                  head (`masked_lm_positions [B, P]` in, `mlm_logits [B, P, V]` out);
  preprocessing/  `__call__(strings [N])` -> the encoder's inputs at --max_seq_length;
                  `tokenize(strings)` -> int32 word-pieces [N, words, pieces];
                  `bert_pack_inputs([segment, ...], seq_length=...)`: the same
                  `tensorflow_text` steps as Model Garden's (its `BertTokenizer`,
                  `RoundRobinTrimmer`, `combine_segments`, `pad_model_inputs`).

A fine-tuning run's checkpoint exports its encoder: its task's head has no place in this API.
The encoder also holds `assets/encoder.json` (`modeling.checkpoint.TF_HUB_DESCRIPTION`):
its config and the original names of its variables, by which this project reads it back.
"""
import json
import os

import tensorflow as tf
from absl import logging

from bert_runner.serving import provenance
from bert_runner.runs.checkpoints import load_checkpoint
from modeling import families
from modeling.checkpoint import TF_HUB_DESCRIPTION, variables_by_name

ENCODER, PREPROCESSING = "encoder", "preprocessing"
_INPUTS = {name: tf.TensorSpec([None, None], tf.int32, name=name)
           for name in ("input_word_ids", "input_mask", "input_type_ids")}
_POSITIONS = tf.TensorSpec([None, None], tf.int32, name="masked_lm_positions")
# Model Garden's special tokens (`BertTokenizer.get_special_tokens_dict`).
_SPECIAL_TOKENS = {"start_of_sequence_id": "[CLS]", "end_of_segment_id": "[SEP]",
                   "padding_id": "[PAD]", "mask_id": "[MASK]"}


def _outputs(encoder_outputs):
    """The API's output dict of our encoder's."""
    pooled = encoder_outputs["pooled_output"]
    return {"sequence_output": encoder_outputs["sequence_output"], "pooled_output": pooled,
            "default": pooled, "encoder_outputs": list(encoder_outputs["all_encoder_layers"])}


def _model_inputs(inputs):
    return {"input_ids": inputs["input_word_ids"], "input_mask": inputs["input_mask"],
            "token_type_ids": inputs["input_type_ids"]}


def _reusable(obj, variables, trainable):
    """Gives `obj` the Reusable SavedModel API's variable lists (`hub.KerasLayer` reads them)."""
    obj.variables = list(variables)
    obj.trainable_variables = list(trainable)
    obj.regularization_losses = []


def encoder_module(pretrainer, encoder, vocab_file, do_lower_case, description_file):
    """The encoder SavedModel's root object: `encoder` (a `BertModel` or `ElectraModel`), and
    `pretrainer` (a `BertPretrainer` around it, or None) as its `mlm` sub-object;
    `description_file` (a path) is where its `encoder.json` asset is written."""
    root = tf.train.Checkpoint()
    root.vocab_file = tf.saved_model.Asset(vocab_file)
    names = {id(v): name for name, v in variables_by_name(
        pretrainer if pretrainer is not None else encoder).items()}
    head = pretrainer.masked_lm.variables if pretrainer is not None else []
    with open(description_file, "w", encoding="utf-8") as f:
        json.dump({"config": encoder.config.to_dict(),
                   "variables": [names.get(id(v)) for v in encoder.variables],
                   "mlm_variables": [names.get(id(v)) for v in head]}, f, indent=1)
    root.description = tf.saved_model.Asset(description_file)
    root.do_lower_case = tf.Variable(do_lower_case, trainable=False, name="do_lower_case")
    weights = [v.value for v in encoder.variables]
    _reusable(root, weights + [root.do_lower_case],
              [v.value for v in encoder.trainable_variables])

    @tf.function
    def call(inputs, training=False):
        return _outputs(encoder(_model_inputs(inputs), training=training))

    root.__call__ = call
    for training in (False, True):
        call.get_concrete_function(_INPUTS, training)
    if pretrainer is not None:
        head = pretrainer.masked_lm
        root.mlm = tf.train.Checkpoint()
        _reusable(root.mlm, weights + [v.value for v in head.variables],
                  [v.value for v in encoder.trainable_variables + head.trainable_variables])

        @tf.function
        def mlm(inputs, training=False):
            outputs = encoder(_model_inputs(inputs), training=training)
            logits = head(outputs["sequence_output"], inputs["masked_lm_positions"],
                          encoder.embedding_table)
            found = _outputs(outputs)
            del found["default"]
            return {**found, "mlm_logits": logits}

        root.mlm.__call__ = mlm
        for training in (False, True):
            mlm.get_concrete_function({**_INPUTS, "masked_lm_positions": _POSITIONS}, training)

    @tf.function(input_signature=list(_INPUTS.values()))
    def serving_default(input_word_ids, input_mask, input_type_ids):
        outputs = call({"input_word_ids": input_word_ids, "input_mask": input_mask,
                        "input_type_ids": input_type_ids})
        layers = outputs.pop("encoder_outputs")
        return {**outputs, **{f"encoder_outputs_{i}": layer for i, layer in enumerate(layers)}}

    return root, {"serving_default": serving_default}


def pack_inputs(segments, seq_length, special):
    """Model Garden's `BertPackInputs.bert_pack_inputs`: word-pieces of 1 or 2 segments (ragged
    [N, (words), (pieces)] or [N, (pieces)]) trimmed round-robin to `seq_length` with [CLS] and
    one [SEP] each, then padded."""
    import tensorflow_text as text

    segments = [s.merge_dims(1, -1) if s.shape.rank > 2 else s for s in segments]
    trimmed = text.RoundRobinTrimmer(seq_length - len(segments) - 1).trim(segments)
    combined, segment_ids = text.combine_segments(
        trimmed, start_of_sequence_id=special["start_of_sequence_id"],
        end_of_segment_id=special["end_of_segment_id"])
    word_ids, _ = text.pad_model_inputs(combined, seq_length, pad_value=special["padding_id"])
    type_ids, mask = text.pad_model_inputs(segment_ids, seq_length, pad_value=0)
    shape = tf.stack([segments[0].nrows(out_type=tf.int32), tf.cast(seq_length, tf.int32)])
    return {"input_word_ids": tf.reshape(word_ids, shape), "input_mask": tf.reshape(mask, shape),
            "input_type_ids": tf.reshape(type_ids, shape)}


def preprocessing_module(vocab_file, do_lower_case, seq_length):
    """The preprocessing SavedModel's root object (see the module docstring)."""
    import tensorflow_text as text

    root = tf.train.Checkpoint()
    # The initializer tracks the file as the SavedModel's asset (`assets/vocab.txt`).
    root.table = tf.lookup.StaticHashTable(tf.lookup.TextFileInitializer(
        vocab_file, key_dtype=tf.string, key_index=tf.lookup.TextFileIndex.WHOLE_LINE,
        value_dtype=tf.int64, value_index=tf.lookup.TextFileIndex.LINE_NUMBER), default_value=-1)
    tokenizer = text.BertTokenizer(root.table, lower_case=do_lower_case)
    ids = root.table.lookup(tf.constant(list(_SPECIAL_TOKENS.values())))
    special = {name: int(i) for name, i in zip(_SPECIAL_TOKENS, ids.numpy()) if i >= 0}
    vocab_size = int(root.table.size())

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(strings):
        tokens = tf.cast(tokenizer.tokenize(strings), tf.int32)
        splits = tf.reshape(tokens.row_splits, [tf.shape(strings)[0] + 1])
        return tf.RaggedTensor.from_row_splits(tokens.values, splits)

    root.tokenize = tf.train.Checkpoint()
    root.tokenize.__call__ = tokenize
    root.tokenize.get_special_tokens_dict = tf.train.Checkpoint()
    root.tokenize.get_special_tokens_dict.__call__ = tf.function(
        lambda: {"vocab_size": tf.constant(vocab_size),
                 **{name: tf.constant(i) for name, i in special.items()}}, input_signature=[])

    @tf.function(autograph=False)
    def bert_pack_inputs(inputs, seq_length=seq_length):
        return pack_inputs(list(inputs), seq_length, special)

    root.bert_pack_inputs = tf.train.Checkpoint()
    root.bert_pack_inputs.__call__ = bert_pack_inputs
    for ragged_rank in (1, 2):
        for count in (1, 2):
            bert_pack_inputs.get_concrete_function(
                [tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32)] * count,
                seq_length=tf.TensorSpec([], tf.int32))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
    def preprocess(sentences):
        return pack_inputs([tokenize(sentences)], seq_length, special)

    root.__call__ = preprocess
    return root, {"serving_default": preprocess}


def _models_of(export_config, files):
    """(the pre-training model holding BERT's masked-LM head, or None; the encoder) of
    --checkpoint."""
    checkpoint = export_config.checkpoint
    if families.of_config(files.config).name == "bert":
        pretrainer = families.build_model("pretrainer", files.config)
        report = load_checkpoint(pretrainer, checkpoint, strict=False, flag="--checkpoint",
                                 config_file=files.config_file)
        if "cls/predictions/output_bias" in report.loaded:
            return pretrainer, pretrainer.encoder
    task = provenance.recorded_script_task(checkpoint)
    if task:
        logging.info("%s is a %s run: its encoder is exported (its head has no place in the TF "
                     "Hub text API; --format=huggingface or the task's own format keep it)",
                     checkpoint, task)
    return None, provenance.load_encoder(files.config, checkpoint,
                                         config_file=files.config_file)


def export_from_config(export_config, files):
    """export_model.py --format=tfhub: `encoder/` and `preprocessing/` in --export_dir (written
    beside it first, then moved in: nothing half-written is left)."""
    import tempfile

    export_dir = os.fspath(export_config.export_dir).rstrip("/")
    if os.path.exists(export_dir):
        raise FileExistsError(f"{export_dir} already exists: choose a new --export_dir")
    pretrainer, encoder = _models_of(export_config, files)
    parent = os.path.dirname(os.path.abspath(export_dir))
    os.makedirs(parent, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=parent, prefix=".tfhub-") as tmp:
        root, signatures = encoder_module(pretrainer, encoder, files.vocab_file,
                                          export_config.do_lower_case,
                                          os.path.join(tmp, TF_HUB_DESCRIPTION))
        tf.saved_model.save(root, os.path.join(tmp, ENCODER), signatures=signatures)
        os.remove(os.path.join(tmp, TF_HUB_DESCRIPTION))
        root, signatures = preprocessing_module(files.vocab_file, export_config.do_lower_case,
                                                export_config.max_seq_length)
        tf.saved_model.save(root, os.path.join(tmp, PREPROCESSING), signatures=signatures)
        os.rename(tmp, export_dir)
        os.makedirs(tmp)  # for the context manager to remove
    logging.info("Wrote the TF Hub encoder%s and preprocessing (seq_length %d) to %s",
                 " with its mlm sub-object" if pretrainer is not None else "",
                 export_config.max_seq_length, export_dir)
