"""`ElectraModel`: the encoder of the original ELECTRA's `model/modeling.BertModel`, as Keras 3."""
from modeling.bert.encoder import BertModel
from modeling.electra.config import ElectraConfig


class ElectraModel(BertModel):
    """ELECTRA's encoder: BERT's (`BertModel`: the same embeddings, post-LN blocks, packed rows,
    kernels) with embedding tables of width `config.embedding_size`, projected to `hidden_size`
    by `embeddings_project` when the two differ, and no pooler: `pooled_output` is the first
    token's vector of the last layer, as the original's `get_pooled_output`
    (`sequence_output[:, 0]`), which its fine-tuning heads read.

    Args: as `BertModel`; `config` an `ElectraConfig` (the discriminator's) or the generator's
    (`ElectraConfig.generator_config()`), whose `embeddings` are the discriminator's.
    Returns: as `BertModel`, `embedding_output` after the projection `[B, S, hidden_size]`.
    """

    config_class = ElectraConfig
    has_pooler = False

    def __init__(self, config, name="electra", **kwargs):
        super().__init__(config, name=name, **kwargs)
