"""(sentence, the passage around it) pairs from the bundled novels: a retrieval task for sentence
embeddings (run_sentence_embeddings.py, bench/sentence_embeddings.py).

The query is one sentence of a chapter; its positive is the `context` sentences before it and the
`context` after it, without the sentence itself, so that no words are shared by construction: a
model has to know what text goes around a sentence. Each passage is used once (windows do not
overlap), and a held-out novel gives queries and passages no training pair had.

    pairs = sentence_passage_pairs(["emma", "persuasion"], count=1000)   # [{"query", "positive"}]
"""
import random

from bert_tasks.pretraining.data.corpus import gutenberg_to_corpus
from demo_data import read_novel

# Queries of 8 to 60 words: shorter ones ("Yes.") fit anywhere.
QUERY_WORDS = (8, 60)


def sentence_passage_pairs(novels, count, context=1, seed=12345):
    """`count` pairs drawn (seeded) from every non-overlapping window of 2 * `context` + 1
    sentences of the chapters of `novels`: {"query": the middle sentence, "positive": the others,
    joined}. Raises ValueError when the novels have fewer windows."""
    windows = []
    width = 2 * context + 1
    for novel in novels:
        for chapter in gutenberg_to_corpus(read_novel(novel)).split("\n\n"):
            sentences = [s.replace("\t", " ") for s in chapter.split("\n") if s.strip()]
            for start in range(0, len(sentences) - width + 1, width):
                window = sentences[start:start + width]
                query = window[context]
                if QUERY_WORDS[0] <= len(query.split()) <= QUERY_WORDS[1]:
                    windows.append({"query": query,
                                    "positive": " ".join(window[:context] + window[context + 1:])})
    if len(windows) < count:
        raise ValueError(f"{', '.join(novels)} have {len(windows)} sentence windows, "
                         f"{count} asked for")
    random.Random(seed).shuffle(windows)
    return windows[:count]
