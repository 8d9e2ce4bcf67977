"""Fine-tune BERT for named-entity recognition on CoNLL-2003 (BERT paper section 5.3), with the
flags of the original release's fine-tuning scripts.

Each word's first sub-token is classified (no CRF) with the maximal document context around its
sentence; the dev and test sets are scored with conlleval and written back in CoNLL format with a
predicted column. The paper used a cased model for NER: pass a cased checkpoint and
--do_lower_case=False (the default stays True, as in the original scripts).
"""
import os

from absl import app, flags, logging

from bert_runner import flags as run_flags

FLAGS = flags.FLAGS

run_flags.define_bert_flags("bert_config_file", "vocab_file", "output_dir", "init_checkpoint",
                            "do_lower_case")
flags.DEFINE_string(
    "data_dir", None,
    "The CoNLL-2003 directory: train.txt, dev.txt, test.txt (or the original eng.train, "
    "eng.testa, eng.testb; valid.txt for dev). Columns `word ... NER-tag`, IOB1 or IOB2.")
flags.DEFINE_integer(
    "max_seq_length", 128,
    "Word-pieces per window: [CLS], the scored sentence with its document context, [SEP]. "
    "Longer sentences are split over several windows.")
run_flags.define_split_flags(test="the test set (predicted and scored)")
flags.DEFINE_list(
    "entity_types", None,
    "Entity types in label order, e.g. PER,ORG,LOC,MISC; the labels are O, B-<type>, I-<type>. "
    "Default: the types of the training file, sorted (or the list recorded in output_dir).")
flags.DEFINE_bool(
    "document_context", True,
    "Surround each sentence with its document's neighbouring text up to max_seq_length (the "
    "paper's maximal document context); false: each sentence alone.")
run_flags.define_finetuning_flags()
run_flags.define_tpu_flags()
run_flags.define_run_flags()

LABEL_LIST_FILE = "label_list.txt"
# Script split -> (CoNLL split, TFRecord name, batch size flag).
_SPLITS = {"train": ("train", "train", "train_batch_size"),
           "eval": ("dev", "eval", "eval_batch_size"),
           "predict": ("test", "predict", "predict_batch_size")}


def _label_list(run, sets):
    """--entity_types, else the training file's types; checked against output_dir's record."""
    from bert_tasks.ner import conll, tags
    from bert_tasks.ner.sets import NerSet

    train = sets.get("train")
    if train is None and not FLAGS.entity_types:
        try:
            train = NerSet.read(conll.split_file(FLAGS.data_dir, "train"))
        except FileNotFoundError:
            pass
    recorded_path = os.path.join(run.output_dir, LABEL_LIST_FILE)
    recorded = None
    if os.path.exists(recorded_path):
        with open(recorded_path, encoding="utf-8") as f:
            recorded = f.read().split()
    return tags.resolve_label_list(
        FLAGS.entity_types, [s.tags for s in train.sentences] if train else None, recorded,
        recorded_path)


def main(_):
    from bert_tasks.ner import conll, conlleval
    from bert_tasks.ner.sets import NerSet
    from bert_tasks.ner.task import NerTask
    from bert_runner import driver, results, startup
    from bert_runner.run_config import RunConfig

    run = RunConfig.from_flags()
    wanted = [name for name, on in (("train", run.do_train), ("eval", run.do_eval),
                                    ("predict", run.do_predict)) if on]
    if not wanted:
        raise ValueError("At least one of `do_train`, `do_eval` or `do_predict' must be True.")
    config = startup.load_config(run.bert_config_file, FLAGS.max_seq_length)
    tokenizer = startup.load_tokenizer(
        run.vocab_file, run.do_lower_case, run.init_checkpoint, config, run.bert_config_file)
    # Every file is read and checked before any work.
    sets = {name: NerSet.read(conll.split_file(FLAGS.data_dir, _SPLITS[name][0]))
            for name in wanted}
    label_list = _label_list(run, sets)
    for data in sets.values():
        data.check_labels(label_list)
    logging.info("Labels: %s", " ".join(label_list))
    task = NerTask(label_list, FLAGS.max_seq_length, run.output_dir)
    strategy = driver.prepare(task, run, config)
    results.write_text_atomic(os.path.join(run.output_dir, LABEL_LIST_FILE),
                              "\n".join(label_list) + "\n")

    splits = {}
    for name, data in sets.items():
        _, record_name, batch_flag = _SPLITS[name]
        batch_size = FLAGS[batch_flag].value
        path = os.path.join(run.output_dir, record_name + ".tf_record")
        num_windows, num_padding = data.write_records(
            path, label_list, tokenizer, FLAGS.max_seq_length, FLAGS.document_context,
            pad_to_multiple=batch_size if run.use_tpu and name != "train" else 1)
        splits[name] = driver.Split([path], num_windows, batch_size, num_padding=num_padding)
    task.eval_set = sets.get("eval")
    task.predict_set = sets.get("predict")
    num_train_steps, num_warmup_steps = (
        run.training_steps(splits["train"].num_examples, "training windows")
        if "train" in splits else (0, 0))
    result = driver.run_task(
        task, run, config, splits.get("train"), num_train_steps, num_warmup_steps,
        eval_split=splits.get("eval"), predict_split=splits.get("predict"), strategy=strategy)
    # The paper's BERT-Base figures on CoNLL-2003, for comparison (Table 3).
    if result.eval_results:
        logging.info("dev F1 %.2f (the paper's BERT-Base on CoNLL-2003: 96.4)",
                     result.eval_results["eval_f1"])
    if result.predictions:
        logging.info("test F1 %.2f (the paper's BERT-Base on CoNLL-2003: 92.4)",
                     conlleval.metrics(result.predictions)["overall"]["f1"])


if __name__ == "__main__":
    for _name in ("data_dir", "vocab_file", "bert_config_file", "output_dir"):
        flags.mark_flag_as_required(_name)
    app.run(main)
