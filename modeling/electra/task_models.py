"""ELECTRA's task models: BERT's heads over ELECTRA's encoder (`ElectraModel`); its SQuAD model,
the original's own head, is `modeling.electra.squad.ElectraSquadModel`.

The original ELECTRA's fine-tuning heads read what BERT's read, with no pooler: a sequence's
vector is its first token's (`get_pooled_output`), which `ElectraModel` returns as
`pooled_output`, so each model here is its BERT counterpart with `encoder_class` changed; heads,
variable names and losses are BERT's.
"""
from modeling.electra.encoder import ElectraModel
from modeling.bert.multiple_choice import BertMultipleChoice
from modeling.bert.sentence_encoder import BertSentenceEncoder
from modeling.bert.task_models import BertClassifier, BertMultiLabelClassifier
from modeling.bert.token_classifier import BertTokenClassifier


class ElectraClassifier(BertClassifier):
    """`BertClassifier` over the discriminator: dropout and a dense layer on the first token."""

    encoder_class = ElectraModel


class ElectraMultiLabelClassifier(BertMultiLabelClassifier):
    """`BertMultiLabelClassifier` over the discriminator."""

    encoder_class = ElectraModel


class ElectraMultipleChoice(BertMultipleChoice):
    """`BertMultipleChoice` over the discriminator: one score per choice's first token."""

    encoder_class = ElectraModel


class ElectraTokenClassifier(BertTokenClassifier):
    """`BertTokenClassifier` over the discriminator: a label per token."""

    encoder_class = ElectraModel


class ElectraSentenceEncoder(BertSentenceEncoder):
    """`BertSentenceEncoder` over the discriminator: the last layer pooled."""

    encoder_class = ElectraModel
