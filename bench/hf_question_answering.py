"""transformers' extractive question answering as its pipeline("question-answering") did, for
transformers 5, which removed that pipeline: the peer of bench/serving.py's SQuAD figures and of
the test that our answers are transformers' (tests/test_predict_hugging_face.py). Needs torch and
transformers.
"""
import numpy as np


class HfQuestionAnswering:
    """transformers' question answering where its pipeline is gone (transformers 5): the fast
    tokenizer's windows of the context (`max_seq_length`, `doc_stride`, character offsets), the
    model, and each question's best span (highest start + end logit, start <= end, at most
    `max_answer_length` word-pieces, inside its context) over its windows, as the pipeline
    chose. Called on lists of questions and contexts: `[{"answer": text}]`."""

    def __init__(self, directory, max_seq_length, doc_stride, max_answer_length):
        import transformers

        self.tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
        self.model = transformers.AutoModelForQuestionAnswering.from_pretrained(directory).eval()
        self.max_seq_length, self.doc_stride = max_seq_length, doc_stride
        self.max_answer_length = max_answer_length

    def __call__(self, questions, contexts):
        import torch

        encoded = self.tokenizer(questions, contexts, truncation="only_second",
                                 max_length=self.max_seq_length, stride=self.doc_stride,
                                 return_overflowing_tokens=True, return_offsets_mapping=True,
                                 padding="longest", return_tensors="pt")
        owners = encoded.pop("overflow_to_sample_mapping").tolist()
        offsets = encoded.pop("offset_mapping").tolist()
        with torch.inference_mode():
            out = self.model(**encoded)
        best = [(-np.inf, "")] * len(questions)
        starts, ends = out.start_logits.numpy(), out.end_logits.numpy()
        band = np.triu(np.ones((starts.shape[1],) * 2, bool)) & ~np.triu(
            np.ones((starts.shape[1],) * 2, bool), self.max_answer_length)
        for window, owner in enumerate(owners):
            context = np.array([s == 1 for s in encoded.sequence_ids(window)])
            scores = starts[window][:, None] + ends[window][None, :]
            scores[~(band & context[:, None] & context[None, :])] = -np.inf
            i, j = np.unravel_index(np.argmax(scores), scores.shape)
            if scores[i, j] > best[owner][0]:
                best[owner] = (scores[i, j],
                               contexts[owner][offsets[window][i][0]:offsets[window][j][1]])
        return [{"answer": text} for _, text in best]
