"""Fine-tune BERT for named-entity recognition on CoNLL-2003 (BERT paper section 5.3), with the
flags of the original release's fine-tuning scripts.

Each word's first sub-token is classified (no CRF) with the maximal document context around its
sentence; the dev and test sets are scored with conlleval and written back in CoNLL format with a
predicted column. The paper used a cased model for NER: pass a cased checkpoint and
--do_lower_case=False (the default stays True, as in the original scripts).
"""
from absl import flags

from bert_runner import cli, flags as run_flags
from bert_runner.flag_ranges import ONE_WORD, at_least, ranged
from bert_tasks.ner.tags import SCHEMES, entity_types_rule

FLAGS = flags.FLAGS

run_flags.define_bert_flags("bert_config_file", "vocab_file", "output_dir", "init_checkpoint",
                            "do_lower_case")
flags.DEFINE_string(
    "data_dir", None,
    "The CoNLL-2003 directory: train.txt, dev.txt, test.txt (or the original eng.train, "
    "eng.testa, eng.testb; valid.txt for dev). Columns `word ... NER-tag`, IOB1 or IOB2.")
ranged(flags.DEFINE_integer(
    "max_seq_length", 128,
    "Word-pieces per window: [CLS], the scored sentence with its document context, [SEP]. "
    "Longer sentences are split over several windows."), at_least(3, ONE_WORD, words="at least"))
run_flags.define_split_flags(test="the test set (predicted and scored)")
ranged(flags.DEFINE_list(
    "entity_types", None,
    "Entity types in label order, e.g. PER,ORG,LOC,MISC; the labels are O, B-<type>, I-<type>. "
    "Default: the types of the training file, sorted (or the list recorded in output_dir)."),
    entity_types_rule())
flags.DEFINE_bool(
    "document_context", True,
    "Surround each sentence with its document's neighbouring text up to max_seq_length (the "
    "paper's maximal document context); false: each sentence alone.")
flags.DEFINE_enum(
    "label_scheme", "IOB1", SCHEMES,
    "The tags the model learns, whatever the files' scheme (predictions are written in each "
    "file's own): IOB1, B- only between two adjacent chunks of one type, so a tagger without a "
    "CRF does not split a name by predicting B- inside it; IOB2, B- at every chunk start (this "
    "script's default before IOB1).")
run_flags.define_finetuning_flags()
run_flags.define_tpu_flags()
run_flags.define_run_flags()
run_flags.define_seeds_flag()


def main(_):
    from bert_runner import driver
    from bert_runner.run_config import RunConfig
    from bert_tasks.ner.task import NerTask

    driver.run_command(NerTask(FLAGS.data_dir, FLAGS.max_seq_length, FLAGS.entity_types,
                               FLAGS.document_context, FLAGS.label_scheme),
                       RunConfig.from_flags(), seeds=run_flags.seeds_of(FLAGS))


if __name__ == "__main__":
    for _name in ("data_dir", "output_dir"):
        flags.mark_flag_as_required(_name)
    run_flags.require_model_files("vocab_file", "bert_config_file")
    cli.run_script(main)
