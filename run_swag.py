"""Fine-tune BERT on SWAG (multiple choice, paper section 4.4): four `[CLS] sent1 [SEP] sent2
ending_i [SEP]` sequences per example, one score vector on the pooled output, softmax over the
four. The paper's settings are the defaults (learning rate 2e-5, batch 16, 3 epochs, 128 tokens);
flags, output files and checkpoints in the style of the original run_classifier.py."""
import os
import random

from absl import app, flags

from bert_runner import flags as run_flags

FLAGS = flags.FLAGS

run_flags.define_bert_flags("bert_config_file", "vocab_file", "output_dir", "init_checkpoint",
                            "do_lower_case")
flags.DEFINE_string(
    "data_dir", None,
    "The input data dir. Should contain the SWAG .csv files: train.csv (--do_train), val.csv "
    "(--do_eval), test.csv (--do_predict).")
flags.DEFINE_integer(
    "max_seq_length", 128,
    "The maximum total input sequence length after WordPiece tokenization, per choice. Sequences "
    "longer than this will be truncated, and sequences shorter than this will be padded.")
# The paper's SWAG batch size and learning rate (section 4.4); a batch holds examples of four
# sequences each.
run_flags.define_split_flags(
    train_batch_size=16, dev="the dev set (val.csv)", test="the test set (test.csv)")
run_flags.define_finetuning_flags(learning_rate=2e-5)
run_flags.define_tpu_flags()
run_flags.define_run_flags()

# Training examples are shuffled once with this seed before they are written: the input pipeline
# shuffles only within 100 records, so a file ordered by source would train in runs of one source.
TRAIN_SHUFFLE_SEED = 12345


def _read_splits(run):
    """{split: (examples, batch size)} for every split the do_* flags ask for, all read (and
    checked) before any is converted, so bad val.csv or test.csv input fails in seconds."""
    from bert_tasks.swag.examples import SPLIT_FILES, read_swag_examples

    wanted = [(run.do_train, "train", run.train_batch_size),
              (run.do_eval, "dev", run.eval_batch_size),
              (run.do_predict, "test", run.predict_batch_size)]
    return {split: (read_swag_examples(os.path.join(FLAGS.data_dir, SPLIT_FILES[split]), split,
                                       require_label=split != "test"), batch_size)
            for needed, split, batch_size in wanted if needed}


def _write_split(run, tokenizer, split, examples, batch_size):
    """`output_dir/<split>.tf_record` and its `bert_runner.driver.Split`; on TPU, eval and predict
    records are padded to full batches (`is_real_example=0`)."""
    from bert_runner.driver import Split
    from bert_tasks.swag import features

    num_padding = -len(examples) % batch_size if run.use_tpu and split != "train" else 0
    path = os.path.join(run.output_dir, f"{split}.tf_record")
    features.write_features(examples, FLAGS.max_seq_length, tokenizer, path, num_padding)
    return Split([path], len(examples), batch_size, num_padding=num_padding)


def main(_):
    from bert_runner import driver, startup
    from bert_runner.run_config import RunConfig
    from bert_tasks.swag.task import SwagTask

    run = RunConfig.from_flags()
    if not run.do_train and not run.do_eval and not run.do_predict:
        raise ValueError("At least one of `do_train`, `do_eval` or `do_predict' must be True.")
    config = startup.load_config(run.bert_config_file, FLAGS.max_seq_length)
    tokenizer = startup.load_tokenizer(
        run.vocab_file, run.do_lower_case, run.init_checkpoint, config, run.bert_config_file)
    task = SwagTask(FLAGS.max_seq_length)
    strategy = driver.prepare(task, run, config)
    examples = _read_splits(run)

    num_train_steps, num_warmup_steps = 0, 0
    if run.do_train:
        num_train_steps, num_warmup_steps = run.training_steps(len(examples["train"][0]))
        random.Random(TRAIN_SHUFFLE_SEED).shuffle(examples["train"][0])
    splits = {split: _write_split(run, tokenizer, split, split_examples, batch_size)
              for split, (split_examples, batch_size) in examples.items()}
    driver.run_task(task, run, config, splits.get("train"), num_train_steps, num_warmup_steps,
                    eval_split=splits.get("dev"), predict_split=splits.get("test"),
                    strategy=strategy)


if __name__ == "__main__":
    for name in ("data_dir", "vocab_file", "bert_config_file", "output_dir"):
        flags.mark_flag_as_required(name)
    app.run(main)
