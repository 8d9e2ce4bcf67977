"""The "which novel?" task of the fine-tuning benchmarks (bench/finetuning.py, bench/lora.py):
runs of consecutive sentences of Pride and Prejudice (label 0) or Emma (1) in GLUE SST-2 layout."""
import os
import random

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOVELS = ("prideprejudice", "emma")


def _novel_sentences(novel):
    from bert_tasks.pretraining.data.corpus import gutenberg_to_corpus

    with open(os.path.join(ROOT, "data", "austen", novel + ".txt"), encoding="utf-8") as f:
        return [s.replace("\t", " ") for s in gutenberg_to_corpus(f.read()).split("\n") if s]


def _passages(sentences, rng):
    """Consecutive sentences joined until each passage holds a word count drawn from [10, 110]."""
    passages, current, target = [], [], rng.randint(10, 110)
    for sentence in sentences:
        current.append(sentence)
        if sum(len(s.split()) for s in current) >= target:
            passages.append(" ".join(current))
            current, target = [], rng.randint(10, 110)
    return passages


def write_task(data_dir, text, train_examples, dev_examples, seed, unlabeled_examples=0):
    """SST-2 layout train.tsv and dev.tsv, and with `unlabeled_examples` unlabeled.txt (more
    texts of both novels, none in train or dev, without their labels); returns {split: [(text,
    label)]}."""
    rows = {"train": [], "dev": [], "unlabeled": []}
    for label, novel in enumerate(NOVELS):
        rng = random.Random(seed + label)
        sentences = _novel_sentences(novel)
        if text == "passages":
            examples = _passages(sentences, rng)
        else:
            examples = [s for s in sentences if 8 <= len(s.split()) <= 40]
        rng.shuffle(examples)
        need = (train_examples + dev_examples + unlabeled_examples) // 2
        if len(examples) < need:
            raise ValueError(f"{novel} has {len(examples)} {text}, fewer than the {need} asked for")
        labelled = (train_examples + dev_examples) // 2
        rows["train"] += [(t, label) for t in examples[:train_examples // 2]]
        rows["dev"] += [(t, label) for t in examples[train_examples // 2:labelled]]
        rows["unlabeled"] += [(t, label) for t in examples[labelled:need]]
    os.makedirs(data_dir, exist_ok=True)
    for split, split_rows in rows.items():
        random.Random(seed).shuffle(split_rows)
        if split == "unlabeled":
            if split_rows:
                with open(os.path.join(data_dir, "unlabeled.txt"), "w", encoding="utf-8") as f:
                    f.write("".join(f"{t}\n" for t, _ in split_rows))
            continue
        with open(os.path.join(data_dir, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n" + "".join(f"{t}\t{l}\n" for t, l in split_rows))
    return rows
