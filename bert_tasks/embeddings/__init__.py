"""Sentence embeddings trained with in-batch negatives (run_sentence_embeddings.py): pairs files,
the retrieval metrics, the task."""
