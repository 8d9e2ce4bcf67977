"""The BERT family (Devlin et al. 2018): its config (`config`), encoder (`encoder.BertModel`),
task models (`task_models`, `multiple_choice`, `token_classifier`, `sentence_encoder`), its
variables' names in the original release's layout (`checkpoint_names`) and the family's
declaration (`family.BERT`: Hugging Face names, `config.json`), which `modeling.families` lists.
"""
