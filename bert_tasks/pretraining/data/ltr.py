"""The left-to-right language model's records (`create_pretraining_data.py
--pretraining_objective=ltr`): the paper's "LTR & No NSP" ablation (Table 5).

Each record is one stretch of a document, `[CLS] tokens [SEP]`, unmasked, one segment
(segment_ids all 0), with `input_ids`, `input_mask` and `segment_ids` alone: the model predicts
every next token from the ones before it (`bert_tasks.pretraining.ltr_task`), so there are no
masked positions, no sentence pairs and no next-sentence label.

The stretches are cut as the No-NSP masked-LM records' chunks are (same documents, same
`--short_seq_prob` targets, `--dupe_factor` passes, one global shuffle), so the three Table 5
objectives train on the same text: sentences are added to a chunk until it reaches the target
length or the document ends, and a chunk longer than `max_seq_length - 2` loses tokens at a
random end, as `truncate_seq_pair` trims a pair. Random numbers, per document: `random()` for a
short target (then `randint(2, max_seq_length - 2)`), one `random()` per removed token.
"""
from bert_tasks.pretraining.data.instances import (
    InstanceBuilder, TrainingInstance, truncate_seq_pair)


class LtrInstanceBuilder(InstanceBuilder):
    """`InstanceBuilder` for the left-to-right model: unmasked one-segment instances.

    Args: as `InstanceBuilder` (the masking arguments and `next_sentence` are not used).
    Instances: `TrainingInstance(input_ids=[CLS] tokens [SEP], num_a_tokens=len(tokens),
    masked_lm_positions=[], masked_lm_ids=[], is_random_next=False)`.
    """

    def create_instances_from_document(self, all_documents, document_index, rng):
        document = all_documents[document_index]
        max_num_tokens = self.max_seq_length - 2  # [CLS], [SEP]
        target_seq_length = max_num_tokens
        if rng.random() < self.short_seq_prob:
            target_seq_length = rng.randint(2, max_num_tokens)
        instances = []
        chunk = []
        for i, sentence in enumerate(document):
            chunk.extend(sentence)
            if i == len(document) - 1 or len(chunk) >= target_seq_length:
                start, stop, _, _ = truncate_seq_pair(len(chunk), 0, max_num_tokens, rng)
                tokens = chunk[start:stop]
                instances.append(TrainingInstance(
                    [self.cls_id] + tokens + [self.sep_id], len(tokens), [], [], False))
                chunk = []
        return instances
