"""The BERT paper's Table 7: CoNLL-2003 NER with the feature-based approach.

BERT is frozen. Its activations at every word's first sub-token (with document context, as
run_ner.py) are computed once per data file and cached; then for each of the paper's six layer
choices a two-layer BiLSTM tagger is trained on them and scored on dev with conlleval. Prints
the table beside the paper's BERT-Base figures and writes it to output_dir/table7.txt.

Every input (config, vocabulary, data files, layer choices, checkpoint, output and cache
directories) is checked before any activation is computed (`bert_tasks.ner.feature_based_run`);
the temporary files a killed run left in the cache are removed when it is next built.
"""
import os

from absl import flags

from bert_runner import cli, flags as run_flags
from bert_runner.flag_ranges import ONE_WORD, above, at_least, ranged, seed
from bert_tasks.ner.tags import entity_types_rule

FLAGS = flags.FLAGS

run_flags.define_bert_flags("bert_config_file", "vocab_file", "output_dir", "init_checkpoint",
                            "do_lower_case")
flags.DEFINE_string(
    "data_dir", None,
    "Directory with the CoNLL-2003 files: train.txt (or eng.train) and dev.txt (or valid.txt, "
    "eng.testa).")
ranged(flags.DEFINE_integer(
    "max_seq_length", 128,
    "Word-pieces per window: the scored sentence and its document context, with [CLS]/[SEP]."),
    at_least(3, ONE_WORD, words="at least"))
flags.DEFINE_bool("document_context", True,
                  "Surround each sentence with its document's neighbouring text (the paper).")
ranged(flags.DEFINE_list(
    "entity_types", None,
    "Entity types, in label order (default: those of the training file, sorted)."),
    entity_types_rule())
flags.DEFINE_list(
    "choices", None,
    "Table 7 rows to run (default: all): embeddings, second_to_last, last, "
    "weighted_sum_last_four, concat_last_four, weighted_sum_all.")
ranged(flags.DEFINE_integer("lstm_units", 768, "BiLSTM units per direction (the paper: 768)."),
       at_least(1))
ranged(flags.DEFINE_integer("num_train_epochs", 4, "Epochs of BiLSTM training per row."),
       at_least(1))
ranged(flags.DEFINE_integer("train_batch_size", 32, "Sentences per BiLSTM training batch."),
       at_least(1))
ranged(flags.DEFINE_float("learning_rate", 1e-3, "Adam learning rate of the BiLSTM tagger."),
       above(0))
ranged(flags.DEFINE_integer("predict_batch_size", 32,
                            "Windows per batch when computing activations."), at_least(1))
flags.DEFINE_string(
    "cache_dir", None,
    "Local directory for the cached activations (default: output_dir/activations). A cache made "
    "with the same checkpoint, files and settings is reused.")
ranged(flags.DEFINE_integer("random_seed", 12345,
                            "Seed of the taggers' initialisation and shuffling."), seed())

for _name in ("data_dir", "init_checkpoint", "output_dir"):
    flags.mark_flag_as_required(_name)
run_flags.require_model_files("bert_config_file", "vocab_file")


def _check_choices(values):
    if not values:  # The default, all six: no need to import the model code to parse flags.
        return True
    from bert_tasks.ner.feature_based import CHOICES_BY_KEY

    unknown = [v for v in values if v not in CHOICES_BY_KEY]
    if unknown:
        raise flags.ValidationError("unknown --choices %s; known: %s"
                                    % (", ".join(unknown), ", ".join(CHOICES_BY_KEY)))
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise flags.ValidationError("--choices names %s more than once" % ", ".join(twice))
    return True


flags.register_validator("choices", _check_choices)


def main(_):
    from bert_tasks.ner import feature_based, feature_based_run
    from bert_runner import output_lock
    from modeling.checkpoint.files import write_text_atomic

    # Everything the user gave is checked before the activations are computed (the long part).
    run = feature_based_run.prepare(feature_based_run.Table7Flags(
        data_dir=FLAGS.data_dir, bert_config_file=FLAGS.bert_config_file,
        vocab_file=FLAGS.vocab_file, init_checkpoint=FLAGS.init_checkpoint,
        output_dir=FLAGS.output_dir, do_lower_case=FLAGS.do_lower_case,
        max_seq_length=FLAGS.max_seq_length, document_context=FLAGS.document_context,
        entity_types=FLAGS.entity_types, choices=FLAGS.choices, cache_dir=FLAGS.cache_dir))
    with output_lock.hold(FLAGS.output_dir):
        caches = run.build_caches(FLAGS.predict_batch_size)
        tagger_settings = feature_based.TaggerSettings(
            FLAGS.lstm_units, FLAGS.num_train_epochs, FLAGS.train_batch_size,
            FLAGS.learning_rate, FLAGS.random_seed)
        dev_gold = [s.tags for s in run.sets["dev"].sentences]
        rows = [feature_based.train_and_score(choice, caches["train"], caches["dev"], dev_gold,
                                              run.label_list, tagger_settings)
                for choice in run.choices]
        baseline = feature_based.majority_baseline_f1(dev_gold)
        table = feature_based.format_table(rows, baseline)
        write_text_atomic(os.path.join(FLAGS.output_dir, "table7.txt"), table)
    print(table, end="")


if __name__ == "__main__":
    cli.run_script(main)
