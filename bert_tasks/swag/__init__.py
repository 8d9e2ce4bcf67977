"""SWAG (Situations With Adversarial Generations) multiple choice for run_swag.py (paper 4.4).

Modules:
* `bert_tasks.swag.examples`: the SWAG CSV files -> `SwagExample`s (`read_swag_examples`), columns found by
  header name, bad rows reported as `file:line`.
* `bert_tasks.swag.features`: four `[CLS] sent1 [SEP] sent2 ending_i [SEP]` sequences per example
  (`convert_example`), as TFRecord examples by `tf_examples`; `name_to_features` decodes them
  to [4, max_seq_length] per example.
* `bert_tasks.swag.task`: `SwagTask`, the `bert_runner.task.Task` (which file each split reads, its
  records, model `modeling.BertMultipleChoice`, loss, eval_results.txt values and baselines,
  test_results.tsv).

What run_swag.py does with them:

    bert_runner.driver.run_command(SwagTask(max_seq_length, data_dir), RunConfig.from_flags())
    # reads val.csv (SwagTask.read_examples), writes dev.tf_record (SwagTask.records), evaluates
"""
