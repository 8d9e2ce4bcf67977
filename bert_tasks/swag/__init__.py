"""SWAG (Situations With Adversarial Generations) multiple choice for run_swag.py (paper 4.4).

Modules:
* `bert_tasks.swag.examples`: the SWAG CSV files -> `SwagExample`s (`read_swag_examples`), columns found by
  header name, bad rows reported as `file:line`.
* `bert_tasks.swag.features`: four `[CLS] sent1 [SEP] sent2 ending_i [SEP]` sequences per example
  (`convert_example`), written to TFRecord by `write_features`; `name_to_features` decodes them
  to [4, max_seq_length] per example.
* `bert_tasks.swag.task`: `SwagTask`, the `bert_runner.task.Task` (model `modeling.BertMultipleChoice`, loss,
  eval_results.txt values and baselines, test_results.tsv).

What run_swag.py does with them:

    examples = read_swag_examples(os.path.join(data_dir, "val.csv"), "dev", require_label=True)
    write_features(examples, max_seq_length, tokenizer, "dev.tf_record")
    task = SwagTask(max_seq_length)
    bert_runner.driver.run_task(task, run, config, eval_split=Split(["dev.tf_record"], len(examples), 8))
"""
