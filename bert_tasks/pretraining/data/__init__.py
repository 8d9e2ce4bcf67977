"""Pretraining data for BERT: the original create_pretraining_data.py, record for record, faster.

Modules, in pipeline order:

* `reading`: input globs, line reading with the original's GFile semantics, chunking.
* `documents`: lines -> documents of token-id sentences (fast or faithful tokenizer).
* `instances`: `InstanceBuilder`, masked-LM / next-sentence instances in the original's exact
  random-number order (the order is documented there).
* `features`: the TFRecord schema (`name_to_features`, for input pipelines) and `ExampleEncoder`.
* `writing`: round-robin TFRecord shards that appear only when complete.
* `pipeline`: `Options`, `run` (original ordering, or chunked and parallel).
* `validation`: `check_records`, the first record of each file against the training flags and
  model (run by `run_pretraining.py` before training).
* `corpus`: plain text (e.g. Project Gutenberg books) -> one-sentence-per-line corpus.
"""
