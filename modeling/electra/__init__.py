"""The ELECTRA family (Clark et al. 2020, google-research/electra): its config and size table
(`config`, the original's `--hparams`), encoder (`encoder.ElectraModel`, BERT's with the
embedding projection), pre-training model (`pretrainer`: generator and discriminator), its own
SQuAD head (`squad`), task models (`task_models`) and the family's declaration (`family.ELECTRA`:
original and Hugging Face names), which `modeling.families` lists.
"""
