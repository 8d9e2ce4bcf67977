"""The registry of model families: which families there are, and which one a config, a model, a
config file, a Hugging Face `model_type` or a checkpoint's names belong to.

A family is one package (`modeling/bert/`, `modeling/electra/`) whose `family.py` declares it
(`modeling.family.ModelFamily`); it is registered by its line below. The checkpoint package and
the tasks find families here, and build models with `build_model(kind, config, ...)`, so nothing
in `bert_runner/` or `bert_tasks/` changes for a new family (docs/adding_a_model_family.md).
"""
from modeling.bert.family import BERT
from modeling.electra.family import ELECTRA

# Registration order matters where one family's files extend another's (`of_config_file`).
_FAMILIES = {family.name: family for family in (BERT, ELECTRA)}


def families():
    """Every registered family, in registration order."""
    return list(_FAMILIES.values())


def get(name):
    """The family named `name`; ValueError listing the known ones."""
    if name not in _FAMILIES:
        raise ValueError(f"unknown model family {name!r} (known: {', '.join(_FAMILIES)})")
    return _FAMILIES[name]


def of_config(config):
    """The family of a config object: the family of its class, else of the nearest class it
    derives from (`ElectraConfig` is a `BertConfig`)."""
    for cls in type(config).__mro__:
        for family in _FAMILIES.values():
            if family.config_class is cls:
                return family
    raise TypeError(f"{type(config).__name__} is the config of no registered model family")


def of_model(model):
    """The family of a model the families build (its `config`)."""
    return of_config(model.config)


def of_config_file(data):
    """The family whose config file holds `data` (`claims_config`): of several, the last
    registered (a family whose file extends another's, as ELECTRA's bert_config.json adds keys
    to BERT's, registers after it); the first family (BERT) when none claims it (its reader then
    says what the file lacks)."""
    return next((f for f in reversed(_FAMILIES.values()) if f.claims_config(data)),
                next(iter(_FAMILIES.values())))


def of_hf_model_type(model_type, source):
    """The family reading Hugging Face `config.json` files of `model_type`; ValueError naming
    `source` (the file) for a model type no family reads."""
    for family in _FAMILIES.values():
        if model_type in family.hf_model_types:
            return family
    known = ", ".join(t for f in _FAMILIES.values() for t in f.hf_model_types)
    raise ValueError(f"{source}: model_type {model_type!r} is not a model this project reads "
                     f"({known})")


def of_original_names(names):
    """The family whose encoder original-layout `names` hold; the first family (BERT) when no
    family's is there (the checks of the load then say what is missing)."""
    for family in _FAMILIES.values():
        if family.holds_encoder(names):
            return family
    return next(iter(_FAMILIES.values()))


def build_model(kind, config, *args, **options):
    """The `kind` model of `config`'s family: how a task builds its model."""
    return of_config(config).build(kind, config, *args, **options)

