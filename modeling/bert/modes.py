"""`EncoderModes`: how an encoder computes, never what it computes."""
import dataclasses


@dataclasses.dataclass(frozen=True)
class EncoderModes:
    """The execution modes of a `BertModel` (and of the encoder inside a task model), fixed at
    construction and saved by `get_config`: every mode gives the same values to float rounding.
    A caller that needs other modes builds a copy (`modeling.inference.copy_with`); none is set
    on a model it was handed.

    recompute: in training, each encoder layer keeps only its input for the backward pass and
      computes its activations again there (the same losses and gradients; less memory for
      about a third more compute, measured by `bench/recompute.py`).
    static_shapes: with `skip_padding`, every row is computed on the padded grid rather than
      the real-token row block, whose size depends on the data: XLA (`--jit_compile`, TPUs)
      and LiteRT's one-text graphs compile only shapes known from the inputs' shapes.
    small_row_blocks: with `skip_padding`, a small real-row block is padded to a multiple of 8
      rather than to 256 rows (`token_rows.padded_rows`): less work on a served request of a
      few rows.
    whole_last_layer: the last layer computes every row together even where a caller asks for
      the [CLS] rows apart (`BertModel`'s `first_row_apart`, which lets a graph that reads only
      `pooled_output` drop the other rows' work): LiteRT's XNNPack cannot run a dense layer on
      the two parts joined.
    fused_attention: the attention as one fused operation where rows are not packed: without
      attention dropout (a rate of 0, or not training) the backend's
      (`modeling.layers.attention.fused_attention`: cuDNN's flash attention under JAX on a GPU in
      bfloat16; input masks must be right-padded, as every record's and script's are); with it,
      under JAX on a GPU, a flash-attention kernel drawing the same hashed dropout masks
      (`modeling.layers.kernels.flash`, sequence lengths a multiple of 64); elsewhere the usual
      attention.
    """

    recompute: bool = False
    static_shapes: bool = False
    small_row_blocks: bool = False
    whole_last_layer: bool = False
    fused_attention: bool = False

    @classmethod
    def of(cls, modes):
        """`modes` as an `EncoderModes`: one already, its dict (`get_config`'s), or None (the
        defaults)."""
        if modes is None:
            return cls()
        return modes if isinstance(modes, cls) else cls(**modes)

    def to_dict(self):
        return dataclasses.asdict(self)

    def replace(self, **changes):
        """A copy with `changes` (field: value)."""
        return dataclasses.replace(self, **changes)
