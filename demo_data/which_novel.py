"""The "which novel?" task: Pride and Prejudice (0) or Emma (1), in GLUE SST-2 layout."""
import random

from demo_data import TASK_NOVELS, read_novel
from bert_tasks.pretraining.data.corpus import gutenberg_to_corpus


def novel_task_tsvs(per_label, seed=12345):
    """"Which novel?" in SST-2 layout: {"train.tsv": text, "dev.tsv": ..., "test.tsv": ...}
    and the test labels (list of "0"/"1", which the test file does not hold).

    Sentences of 8 to 40 words, `per_label` = (train, dev, test) of each novel, drawn at random.
    """
    rows = {"train": [], "dev": [], "test": []}
    for label, novel in enumerate(TASK_NOVELS):
        sentences = [s for s in gutenberg_to_corpus(read_novel(novel)).split("\n")
                     if 8 <= len(s.split()) <= 40]
        random.Random(seed + label).shuffle(sentences)
        start = 0
        for split, count in zip(rows, per_label):
            rows[split] += [(s, str(label)) for s in sentences[start:start + count]]
            start += count
    for split_rows in rows.values():
        random.Random(seed).shuffle(split_rows)
    files = {f"{split}.tsv": "sentence\tlabel\n" + "".join(f"{s}\t{l}\n" for s, l in rows[split])
             for split in ("train", "dev")}
    files["test.tsv"] = "index\tsentence\n" + "".join(
        f"{i}\t{s}\n" for i, (s, _) in enumerate(rows["test"]))
    return files, [label for _, label in rows["test"]]

