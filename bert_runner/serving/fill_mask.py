"""The fill-mask format: raw text with `[MASK]` in, each mask's most likely word-pieces out, as
transformers' fill-mask pipeline gives them (`TFBertForMaskedLM` users' task), from any
checkpoint with a masked-LM head: the original's pre-training checkpoints, run_pretraining.py
runs, Hugging Face `...ForMaskedLM` / `...ForPreTraining` directories, ELECTRA's generator, a TF
Hub encoder with its `mlm` sub-object. The machinery's own format: no task owns it.

`[MASK]` in a text is the mask token itself, never split: the text is tokenized around it.

Signatures: `serving_default(text [N])` -> `input_ids` int32 [N, T] (the packed ids, trimmed to the
longest row), `mask_positions` int32 [N, M] (each row's masks, -1 past its last) and
`probabilities` float32 [N, M, V] (the softmax over the vocabulary at each mask); `vocabulary()`
-> `tokens` string [V], by which predict.py writes the word-pieces and the filled sequences.
"""
import numpy as np
import tensorflow as tf

from bert_runner.serving.saved_model import write_saved_model
from bert_runner.serving.text_module import TEXT, ModelExport, signature, trim_to_longest
from vocab.fast_tokenizer import FastBertTokenizer

MASK_TOKEN = "[MASK]"
# What transformers' `clean_up_tokenization` joins back when it decodes (BERT's tokenizers do).
_CLEAN_UP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
             (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


class FillMaskExport(ModelExport):
    """The raw-text signatures of a masked LM (see the module docstring): each call runs its
    texts together, trimmed to the longest (`ModelExport`'s groups are rows of fixed width).

    Args:
      model: a pre-training model with `masked_lm_logits` (`BertPretrainer`,
        `ElectraPretrainer`: its generator), with its weights.
      tokenizer: `FastBertTokenizer` of the model's vocabulary and casing.
      max_seq_length: int, texts are cut to this many word-pieces with [CLS] and [SEP].
    """

    format = "fill_mask"

    def __init__(self, model, tokenizer, max_seq_length):
        super().__init__("bert_fill_mask", model, tokenizer, max_seq_length,
                         model.config.vocab_size)
        vocab = tokenizer.vocab
        if MASK_TOKEN not in vocab:
            raise ValueError(f"the vocabulary has no {MASK_TOKEN} token: no text can be masked")
        self.mask_id = vocab[MASK_TOKEN]
        tokens = [""] * model.config.vocab_size
        for token, index in vocab.items():
            if index < len(tokens):
                tokens[index] = token
        self.tokens = tf.constant(tokens)

    def signatures(self):
        return {"serving_default": self.serve, "vocabulary": self.vocabulary}

    @tf.function(input_signature=[])
    def vocabulary(self):
        return {"tokens": self.tokens}

    @signature(TEXT)
    def serve(self, text):
        features = trim_to_longest(self._parts.tokenizer.pack(self._masked_ids(text), None,
                                                              self.max_seq_length))
        ids = features["input_ids"]
        masks = tf.cast(tf.where(ids == self.mask_id), tf.int32)
        positions = tf.RaggedTensor.from_value_rowids(masks[:, 1], masks[:, 0],
                                                      nrows=tf.shape(ids)[0]).to_tensor(-1)
        logits = self._parts.model.masked_lm_logits(
            {"input_ids": ids, "input_mask": features["input_mask"],
             "segment_ids": features["segment_ids"],
             "masked_lm_positions": tf.maximum(positions, 0)}, training=False)
        return {"input_ids": ids, "mask_positions": positions,
                "probabilities": tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)}

    def _masked_ids(self, text):
        """int32 ragged [N, (pieces)]: each text's word-pieces, `[MASK]` kept whole (the pieces
        around it tokenized apart, its id between them)."""
        parts = tf.strings.split(text, MASK_TOKEN)
        pieces = self._parts.tokenizer.tokenize(parts.flat_values)
        rows = parts.value_rowids()
        last = tf.concat([rows[1:] != rows[:-1], tf.ones([1], tf.bool)], axis=0)[:tf.size(rows)]
        mask = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(~last, tf.int32))], self.mask_id),
            tf.cast(~last, tf.int64))
        joined = tf.concat([tf.cast(pieces, tf.int32), mask], axis=1)
        return tf.RaggedTensor.from_row_splits(joined, parts.row_splits).merge_dims(1, 2)


def decode(tokens):
    """Word-pieces as transformers' BERT tokenizers decode them: joined with spaces, "##"
    pieces glued to the one before, then `clean_up_tokenization`."""
    text = " ".join(tokens).replace(" ##", "").strip()
    for spaced, joined in _CLEAN_UP:
        text = text.replace(spaced, joined)
    return text


def check_rows(rows):
    """Refuses a text without `[MASK]`."""
    for i, (text,) in enumerate(rows, 1):
        if MASK_TOKEN not in text:
            raise ValueError(f"input {i} has no {MASK_TOKEN}: a fill-mask model predicts the "
                             f"word-piece of each {MASK_TOKEN} in its text ({text[:60]!r})")


def answers(call, rows, metadata):
    """`[{"predictions": ...}]`, one per text: for each mask the `top_k` (metadata's, default 5)
    word-pieces as transformers' fill-mask pipeline gives them (`score`, `token`, `token_str`,
    `sequence`): a list for a text with one mask, a list of lists for one with several."""
    top_k = int(metadata.get("top_k") or 5)
    outputs = call("serving_default", text=np.array([row[0] for row in rows], dtype=object))
    vocabulary = [t.decode("utf-8") for t in call("vocabulary")["tokens"]]
    # The pipeline drops padding from every filled text, and decodes a text with one mask
    # without its tokenizer's special tokens.
    special = {vocabulary.index(t) for t in ("[CLS]", "[SEP]", "[PAD]", "[UNK]", MASK_TOKEN)
               if t in vocabulary}
    padding = vocabulary.index("[PAD]") if "[PAD]" in vocabulary else None
    results = []
    for ids, positions, probabilities in zip(outputs["input_ids"], outputs["mask_positions"],
                                             outputs["probabilities"]):
        positions = [int(p) for p in positions if p >= 0]
        single = len(positions) == 1
        real = [int(i) for i in ids[:int(np.flatnonzero(ids).max(initial=0)) + 1]]
        per_mask = []
        for index, position in enumerate(positions):
            scores = probabilities[index]
            best = np.argsort(-scores, kind="stable")[:top_k]
            row = []
            for token in best:
                filled = list(real)
                filled[position] = int(token)
                shown = [vocabulary[i] for i in filled
                         if i != padding and not (single and i in special)]
                row.append({"score": float(scores[token]), "token": int(token),
                            "token_str": decode([vocabulary[token]]),
                            "sequence": decode(shown)})
            per_mask.append(row)
        results.append({"predictions": per_mask[0] if single else per_mask})
    return results


def describe(result):
    """One line: each mask's word-pieces with their probabilities."""
    predictions = result["predictions"]
    masks = [predictions] if predictions and isinstance(predictions[0], dict) else predictions
    return "  |  ".join(
        f"{MASK_TOKEN} {i}: " + ", ".join(f"{p['token_str']} {p['score']:.4f}" for p in mask)
        for i, mask in enumerate(masks, 1))


def load_masked_lm(config, checkpoint, config_file, flag):
    """The pre-training model of `config`'s family with `checkpoint`'s encoder and masked-LM
    head (ELECTRA's: its generator); ValueError naming `flag` where the checkpoint has no
    masked-LM head."""
    from bert_runner.runs.checkpoints import load_checkpoint
    from modeling import families

    model = families.build_model("pretrainer", config)
    report = load_checkpoint(model, checkpoint, strict=False, flag=flag, config_file=config_file)
    missing = [n for n in report.missing if n.startswith(model.masked_lm_scope)]
    if missing:
        raise ValueError(f"{flag}={checkpoint} has no masked-LM head ({missing[0]}): fill-mask "
                         "needs a pre-training checkpoint (the original's, a run_pretraining.py "
                         "run, a Hugging Face ...ForMaskedLM or ...ForPreTraining directory, an "
                         "ELECTRA generator, a TF Hub encoder with its mlm sub-object), not a "
                         "fine-tuned model or an encoder alone")
    return model


def export_from_config(export_config, files):
    """export_model.py --format=fill_mask (see the module docstring)."""
    model = load_masked_lm(files.config, export_config.checkpoint, files.config_file,
                           "--checkpoint")
    module = FillMaskExport(model, FastBertTokenizer(files.vocab_file, export_config.do_lower_case),
                            export_config.max_seq_length)
    write_saved_model(module, export_config.export_dir, "fill-mask model")


def served_module(make_model, tokenizer, metadata):
    """The `FillMaskExport` of a Hugging Face masked-LM directory (`ServingFormat.served_module`)."""
    return FillMaskExport(make_model(), tokenizer, metadata["max_seq_length"])
