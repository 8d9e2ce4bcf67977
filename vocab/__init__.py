"""WordPiece tokenization and the bundled vocabularies.

* `vocab.tokenization`: the original `tokenization.py` API, output-identical (faithful, pure Python).
* `vocab.fast_tokenizer`: a tensorflow-text path with the same word-pieces, usable in `tf.data`
  and SavedModels, plus `tokenize_batch` for fast offline use.

Bundled vocabularies (folder names mirror the original release's zip files):

| name                       | entries | do_lower_case |
|----------------------------|---------|---------------|
| `uncased_L-12_H-768_A-12`  | 30522   | True          |
| `chinese_L-12_H-768_A-12`  | 21128   | True          |
"""
import os

_HERE = os.path.dirname(os.path.abspath(__file__))

# name -> the do_lower_case the released model was trained with.
BUNDLED_VOCABS = {
    "uncased_L-12_H-768_A-12": True,
    "chinese_L-12_H-768_A-12": True,
}


def bundled_vocab_file(name="uncased_L-12_H-768_A-12"):
    """Path of the `vocab.txt` shipped for the released model `name` (see BUNDLED_VOCABS)."""
    if name not in BUNDLED_VOCABS:
        raise ValueError("unknown bundled vocab %r; available: %s"
                         % (name, ", ".join(sorted(BUNDLED_VOCABS))))
    return os.path.join(_HERE, name, "vocab.txt")
