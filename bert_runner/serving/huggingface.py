"""The Hugging Face format: the encoder of any checkpoint as config.json, model.safetensors and
vocab.txt, for `transformers`' `BertModel.from_pretrained` (`modeling.hf_checkpoint`)."""
from absl import logging

from bert_runner.serving import provenance, registry


def _export(flag_values, files):
    """export_model.py --format=huggingface."""
    from modeling.hf_checkpoint import save_hf_model

    model = provenance.load_encoder(files.config, flag_values.checkpoint,
                                    config_file=files.config_file)
    save_hf_model(model, flag_values.export_dir, files.vocab_file, flag_values.do_lower_case)
    logging.info("Wrote the encoder in Hugging Face's layout to %s", flag_values.export_dir)


FORMAT = registry.register(registry.ServingFormat(
    name="huggingface",
    help="the encoder as config.json, model.safetensors and vocab.txt, for transformers' "
         "BertModel.from_pretrained",
    # The layout has no sequence length: any the config's positions allow.
    export=_export, needs_sequence_length=False))
