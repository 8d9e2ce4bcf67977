"""The BERT paper's Table 7: CoNLL-2003 NER with the feature-based approach.

BERT is frozen. Its activations at every word's first sub-token (with document context, as
run_ner.py) are computed once per data file and cached; then for each of the paper's six layer
choices a two-layer BiLSTM tagger is trained on them and scored on dev with conlleval. Prints
the table beside the paper's BERT-Base figures and writes it to output_dir/table7.txt.
"""
import os

from absl import flags, logging

from bert_runner import cli, flags as run_flags

FLAGS = flags.FLAGS

run_flags.define_bert_flags("bert_config_file", "vocab_file", "output_dir", "init_checkpoint",
                            "do_lower_case")
flags.DEFINE_string(
    "data_dir", None,
    "Directory with the CoNLL-2003 files: train.txt (or eng.train) and dev.txt (or valid.txt, "
    "eng.testa).")
flags.DEFINE_integer(
    "max_seq_length", 128,
    "Word-pieces per window: the scored sentence and its document context, with [CLS]/[SEP].")
flags.DEFINE_bool("document_context", True,
                  "Surround each sentence with its document's neighbouring text (the paper).")
flags.DEFINE_list("entity_types", None,
                  "Entity types, in label order (default: those of the training file, sorted).")
flags.DEFINE_list(
    "choices", None,
    "Table 7 rows to run (default: all): embeddings, second_to_last, last, "
    "weighted_sum_last_four, concat_last_four, weighted_sum_all.")
flags.DEFINE_integer("lstm_units", 768, "BiLSTM units per direction (the paper: 768).")
flags.DEFINE_integer("num_train_epochs", 4, "Epochs of BiLSTM training per row.")
flags.DEFINE_integer("train_batch_size", 32, "Sentences per BiLSTM training batch.")
flags.DEFINE_float("learning_rate", 1e-3, "Adam learning rate of the BiLSTM tagger.")
flags.DEFINE_integer("predict_batch_size", 32, "Windows per batch when computing activations.")
flags.DEFINE_string(
    "cache_dir", None,
    "Local directory for the cached activations (default: output_dir/activations). A cache made "
    "with the same checkpoint, files and settings is reused.")
flags.DEFINE_integer("random_seed", 12345, "Seed of the taggers' initialisation and shuffling.")

for _name in ("data_dir", "bert_config_file", "vocab_file", "init_checkpoint", "output_dir"):
    flags.mark_flag_as_required(_name)


def _check_choices(values):
    from bert_tasks.ner.feature_based import CHOICES_BY_KEY

    unknown = [v for v in values or () if v not in CHOICES_BY_KEY]
    if unknown:
        raise flags.ValidationError("unknown --choices %s; known: %s"
                                    % (", ".join(unknown), ", ".join(CHOICES_BY_KEY)))
    return True


flags.register_validator("choices", _check_choices)


def main(_):
    from modeling import tf1_checkpoint
    from bert_tasks.ner import activations, conll, feature_based, tags
    from bert_tasks.ner.sets import NerSet
    from bert_runner import results, startup

    config = startup.load_config(FLAGS.bert_config_file, FLAGS.max_seq_length)
    tokenizer = startup.load_tokenizer(FLAGS.vocab_file, FLAGS.do_lower_case,
                                       FLAGS.init_checkpoint, config, FLAGS.bert_config_file)
    choices = [feature_based.CHOICES_BY_KEY[k] for k in FLAGS.choices] if FLAGS.choices else list(
        feature_based.FEATURE_CHOICES)
    for choice in choices:
        choice.layers(config.num_hidden_layers)  # a model too shallow fails now
    sets = {split: NerSet.read(conll.split_file(FLAGS.data_dir, split))
            for split in ("train", "dev")}
    label_list = tags.resolve_label_list(FLAGS.entity_types,
                                         [s.tags for s in sets["train"].sentences])
    for data in sets.values():
        data.check_labels(label_list)
    logging.info("Labels: %s", " ".join(label_list))

    bert = activations.load_frozen_encoder(config, FLAGS.init_checkpoint)
    checkpoint = tf1_checkpoint.resolve_checkpoint_prefix(FLAGS.init_checkpoint)
    cache_dir = FLAGS.cache_dir or os.path.join(FLAGS.output_dir, "activations")
    caches = {}
    for split, data in sets.items():
        # What the activations depend on: a cache made from anything else is computed again.
        settings = {
            "data_file": activations.file_fingerprint(data.path),
            "init_checkpoint": activations.file_fingerprint(checkpoint + ".index"),
            "vocab_file": activations.file_fingerprint(FLAGS.vocab_file),
            "do_lower_case": FLAGS.do_lower_case, "max_seq_length": FLAGS.max_seq_length,
            "document_context": FLAGS.document_context, "label_list": label_list,
        }
        caches[split] = activations.ActivationCache.build(
            os.path.join(cache_dir, split), settings, bert, data.documents, tokenizer,
            label_list, FLAGS.max_seq_length, FLAGS.predict_batch_size, FLAGS.document_context)

    tagger_settings = feature_based.TaggerSettings(
        FLAGS.lstm_units, FLAGS.num_train_epochs, FLAGS.train_batch_size, FLAGS.learning_rate,
        FLAGS.random_seed)
    dev_gold = [s.tags for s in sets["dev"].sentences]
    rows = [feature_based.train_and_score(choice, caches["train"], caches["dev"], dev_gold,
                                          label_list, tagger_settings) for choice in choices]
    baseline = feature_based.majority_baseline_f1(dev_gold)
    table = feature_based.format_table(rows, baseline)
    results.write_text_atomic(os.path.join(FLAGS.output_dir, "table7.txt"), table)
    print(table, end="")


if __name__ == "__main__":
    cli.run(main)
