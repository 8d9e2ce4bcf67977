"""The "which sentence comes next?" task in SWAG CSV layout, and its word-overlap baseline."""
import csv
import io
import random
import re

from demo_data import TASK_NOVELS, read_novel
from bert_tasks.pretraining.data.corpus import gutenberg_to_corpus

# The next-sentence choice task: SWAG's CSV columns, sentences of 6 to 40 words, two of them as
# the context. Chapters go to a split by their index (8 of every 10 to train, then one to val
# and one to test): a model that remembers the sentences it was trained on gains nothing on dev.
SWAG_HEADER = ["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
               "ending0", "ending1", "ending2", "ending3", "label"]
_SWAG_WORDS = (6, 40)
_SWAG_CONTEXT_SENTENCES = 2
_SWAG_CHAPTER_SPLITS = ("train",) * 8 + ("val", "test")


def csv_text(rows):
    """Rows (lists of str) as CSV text, quoted where needed."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def next_sentence_choice_csvs(per_split, exclude=frozenset(), seed=12345):
    """"Which sentence comes next?" in the SWAG CSV layout: {"train.csv": text, "val.csv": ...,
    "test.csv": ...} and the test labels (ints 0..3, which test.csv does not hold, as SWAG's
    test file does not).

    Each example is three consecutive sentences of one chapter of a task novel: `sent1` is the
    first two, the true ending the third. The three other endings are sentences of the other
    novel from chapters of the same split, each used once before any is used again; a true
    ending is also a distractor elsewhere, so an ending's identity tells nothing. The true one is
    at a random position. `sent2` (the start that SWAG's endings share) is empty: every ending
    is a whole sentence.
    Sentences in `exclude` (those the classifier stage trains on) are not used. `per_split` =
    (train, val, test) examples, drawn at random (seeded).
    """
    examples = {split: [] for split in ("train", "val", "test")}
    sentences = {split: {novel: [] for novel in TASK_NOVELS} for split in examples}
    for novel in TASK_NOVELS:
        chapters = gutenberg_to_corpus(read_novel(novel)).split("\n\n")
        for index, chapter in enumerate(chapters):
            split = _SWAG_CHAPTER_SPLITS[index % len(_SWAG_CHAPTER_SPLITS)]
            lines = [s if _SWAG_WORDS[0] <= len(s.split()) <= _SWAG_WORDS[1] and s not in exclude
                     else None for s in chapter.split("\n")]
            sentences[split][novel] += filter(None, lines)
            n = _SWAG_CONTEXT_SENTENCES
            examples[split] += [(novel, lines[i - n:i], lines[i]) for i in range(n, len(lines))
                                if all(lines[i - n:i + 1])]
    rng = random.Random(seed)
    files = {}
    for split, count in zip(examples, per_split):
        if count > len(examples[split]):
            raise ValueError(f"the novels have {len(examples[split])} next-sentence examples for "
                             f"{split}, {count} asked for")
        rng.shuffle(examples[split])
        chosen = examples[split][:count]
        distractors = {novel: [] for novel in TASK_NOVELS}
        rows = []
        for i, (novel, context, ending) in enumerate(chosen):
            other = TASK_NOVELS[1 - TASK_NOVELS.index(novel)]
            endings = []
            while len(endings) < 3:
                if not distractors[other]:
                    distractors[other] = list(sentences[split][other])
                    rng.shuffle(distractors[other])
                candidate = distractors[other].pop()
                if candidate not in endings:
                    endings.append(candidate)
            label = rng.randrange(4)
            endings.insert(label, ending)
            sent1 = " ".join(context)
            rows.append([f"austen-{split}-{i}", str(i), sent1, sent1, "", "gold", *endings, label])
        files[f"{split}.csv"] = rows
    test_labels = [row[-1] for row in files["test.csv"]]
    texts = {name: csv_text([SWAG_HEADER] + rows) for name, rows in files.items()}
    texts["test.csv"] = csv_text([SWAG_HEADER[:-1]] + [row[:-1] for row in files["test.csv"]])
    return texts, test_labels



def word_overlap_accuracy(rows, labels):
    """The accuracy of choosing the ending that shares the most words of 4 letters or more with
    the context (ties shared out evenly): what the word-matching signal alone gives."""
    def words(text):
        return set(re.findall(r"[a-z]{4,}", text.lower()))

    total = 0.0
    for row, label in zip(rows, labels):
        shared = [len(words(row["sent1"]) & words(row[f"ending{i}"])) for i in range(4)]
        best = [i for i in range(4) if shared[i] == max(shared)]
        total += (label in best) / len(best)
    return total / len(labels)
