"""Learning a WordPiece `vocab.txt` from text, in the original release's layout (`build_vocab.py`).

* `words`: text -> word counts, split into words exactly like the original BasicTokenizer.
* `word_table`: the word-count table, bounded in size (memory does not grow with the corpus).
* `learner`: tensorflow-text's WordPiece learner, with a faster threshold search and an exact size.
* `layout`: `[PAD]`, `[unused*]`, `[UNK] [CLS] [SEP] [MASK]` at the original's ids.
* `building`: the whole run (inputs checked, text streamed, vocab written atomically).
* `quality`: `[UNK]` rate and word-pieces per word of a vocab on a text; the random-subset baseline.
* `add_words`: your words into a checkpoint's vocabulary, its `[unused*]` slots first, then
  appended rows (`add_vocab_words.py`).

This package imports no TensorFlow at module level, so worker processes start quickly.
"""
