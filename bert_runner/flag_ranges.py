"""The ranges of the scripts' numeric (and list) flags, declared where each flag is defined and
checked when the flags are parsed.

    ranged(flags.DEFINE_integer("max_query_length", 64, "..."), at_least(1))
    cross(CrossRule(("max_seq_length", "max_query_length"), ...))   # after both flags

A bad value is refused before any work, and (for the scripts that import TensorFlow only in
their `main`) before TensorFlow is imported: absl runs the validators registered here once every
flag is parsed, and `bert_runner.cli` turns its error into one line and exit code 2:

    run_classifier.py: error: flag --learning_rate=-1.0: must be > 0

`ranged` gives one flag its `Rule` (the range and the message, one text for both) where the flag
is defined, so a flag's default, help and range are in one place, whichever script runs (no rule
depends on the script's file name). `cross` declares a `CrossRule` between flags (the SQuAD
window's room for the question, the masking rates' sum, ...), `mode` a `ModeRule` (flags that act
only in one mode of a script), each in the script (or shared flag definitions) that defines all
their flags, after them. Each appends its range to the flag's help ("(must be > 0)"), so that
`--helpfull` lists it; `declared` lists what a FlagValues was given.

A rule `.when(...)` other flags applies only when each of them that the script defines is set:
`--learning_rate` of a run without `--do_train` is never used, and is not refused.

Ranges come from how the code uses each flag. Where the code already checks a flag (the data
generators' `check_options`, SQuAD's window settings, NER's windows), the rule refuses the same
values with the same words, so that a user never sees two different messages for one value. Left
to the code, because they need more than the flags: `build_vocab.py --vocab_size` against the
reserved tokens (`building.check_options`), `max_seq_length` against the config's
`max_position_embeddings`, `--layers` against the model's layers, `--choices` and the form of
`--seeds` (the scripts' own validators).
"""
import dataclasses
import re
import weakref
from typing import Any, Callable, Tuple

from absl import flags

# NumPy's seed range: keras.utils.set_random_seed refuses anything else.
_MAX_SEED = 2**32 - 1
_LAYER_INDEX = re.compile(r"\s*-?\d+\s*")


@dataclasses.dataclass(frozen=True)
class Rule:
    """The values one flag accepts: `check(value)` is true for them, `text` says which ("must be
    > 0"), in the refusal and in the help. None (no value given) is always accepted: required
    flags are checked by absl. `only_with`: flags that must be set for the rule to apply."""

    text: str
    check: Callable[[Any], bool]
    only_with: Tuple[str, ...] = ()

    def when(self, *flag_names):
        """This rule, applied only when every flag of `flag_names` the script defines is set."""
        return dataclasses.replace(self, only_with=self.only_with + flag_names)

    def applies(self, flag_values):
        return all(flag_values[name].value for name in self.only_with if name in flag_values)

    def accepts(self, value):
        try:
            return bool(self.check(value))
        except (TypeError, ValueError):
            return False


def at_least(minimum, why=None, words=">="):
    """Integers (or floats) >= `minimum`; `why` is said after the range, in parentheses;
    `words` is how the range is said ("at least", where the code's own check says so)."""
    text = f"must be {words} {minimum}" + (f" ({why})" if why else "")
    return Rule(text, lambda value: value >= minimum)


def above(bound):
    """Values > `bound` (NaN is not)."""
    return Rule(f"must be > {bound}", lambda value: value > bound)


def within(low, high, low_open=False, high_open=False):
    """Values in the interval from `low` to `high`, each end closed unless said open."""
    text = "must be in %s%s, %s%s" % ("(" if low_open else "[", low, high, ")" if high_open else "]")
    return Rule(text, lambda value: (low < value if low_open else low <= value)
                and (value < high if high_open else value <= high))


def _seed_list(values):
    """--seeds: the integers among `values` in the seed range (run_classifier's own validator
    refuses what is not an integer, and repeated seeds)."""
    for value in values:
        try:
            seed = int(value)
        except ValueError:
            continue
        if not 0 <= seed <= _MAX_SEED:
            return False
    return True


def _layer_indexes(text):
    """--layers of extract_features: comma-separated integers, e.g. -1,-2,-3,-4 (extract_features
    reads them with int(); the model's number of layers bounds them, checked there)."""
    return all(_LAYER_INDEX.fullmatch(part) for part in text.split(","))


# The layouts a sequence length must hold, said in its range (`at_least(3, PAIR)`).
PAIR = "[CLS] A [SEP] B [SEP]"
PAIR_OF_SENTENCES = f"{PAIR} with at least one token each in A and B"
ONE_WORD = "[CLS] word [SEP]"
# Used only when training: the schedule, the training batch and the checkpoints.
TRAINING = ("do_train",)


def each(rule, convert):
    """A list flag whose every value, `convert`ed (float, int), is in `rule`'s range."""
    return Rule(f"each {convert.__name__} {rule.text}",
                lambda values: all(rule.check(convert(value)) for value in values))


def seed():
    """A random seed in NumPy's range (keras.utils.set_random_seed refuses anything else)."""
    return within(0, _MAX_SEED)


def seed_list():
    """--seeds: each integer among the values in the seed range."""
    return Rule(f"each seed must be in [0, {_MAX_SEED}]", _seed_list)


def layer_indexes():
    """--layers: comma-separated layer indexes."""
    return Rule("must be comma-separated layer indexes, e.g. -1,-2,-3,-4 (-1: the last layer)",
                _layer_indexes)


@dataclasses.dataclass(frozen=True)
class CrossRule:
    """A rule between flags: `check(*values)` of `flag_names`; `message(*values)` says what is
    wrong (absl puts the flags and their values before it); `help` is appended to the help of
    the first flag."""

    flag_names: Tuple[str, ...]
    check: Callable[..., bool]
    message: Callable[..., str]
    help: str


@dataclasses.dataclass(frozen=True)
class ModeRule:
    """Flags that act only in one mode of a script (`mode_flags`' values, `active(*values)`):
    given on the command line outside it, each is refused, as it would silently do nothing.
    `mode` says the mode ("with --pooling"), `why` what runs without it; "only <mode>" is
    appended to the help of each flag of `flag_names`. `anyway(name, value)`: whether a flag's
    value says what the script does outside the mode anyway (`extract_features.py --pooling
    --layers=-1`, the layer it pools): taken, not refused."""

    flag_names: Tuple[str, ...]
    mode_flags: Tuple[str, ...]
    active: Callable[..., bool]
    mode: str
    why: str
    anyway: Callable[[str, object], bool] = lambda name, value: False


def _single_checker(rule, flag_values):
    def check(value):
        if value is None or not rule.applies(flag_values) or rule.accepts(value):
            return True
        raise flags.ValidationError(rule.text)

    return check


def _cross_checker(rule):
    def check(values):
        args = [values[name] for name in rule.flag_names]
        if any(value is None for value in args) or rule.check(*args):
            return True
        raise flags.ValidationError(rule.message(*args))

    return check


def _mode_checker(rule, flag_values):
    def check(values):
        if rule.active(*[values[name] for name in rule.mode_flags]):
            return True
        given = [name for name in rule.flag_names if flag_values[name].present
                 and not rule.anyway(name, values[name])]
        if not given:
            return True
        raise flags.ValidationError(
            "%s only %s (%s): leave %s out" % (", ".join("--" + name for name in given),
                                              rule.mode, rule.why,
                                              "it" if len(given) == 1 else "them"))

    return check


# What each FlagValues was given, in order: (kind, flag names, text), for `declared`.
_DECLARED = weakref.WeakKeyDictionary()
# Each flag's help as defined, before the ranges were appended to it.
_HELP = weakref.WeakKeyDictionary()


def _declare(flag_values, kind, names, help_name, text):
    _DECLARED.setdefault(flag_values, []).append((kind, tuple(names), text))
    flag = flag_values[help_name]
    texts = _HELP.setdefault(flag_values, {}).setdefault(help_name, [flag.help, []])
    texts[1].append(text)
    suffix = "(%s)" % "; ".join(texts[1])
    flag.help = f"{texts[0]} {suffix}" if texts[0] else suffix


def ranged(holder, rule):
    """The flag `holder` (what `flags.DEFINE_*` returned) refused outside `rule` when its script
    parses its flags, and its help ending with the range: a flag's range is declared where the
    flag is defined. Returns `holder`."""
    flag_values = holder._flagvalues  # noqa: SLF001 (absl keeps the FlagValues there)
    flags.register_validator(holder.name, _single_checker(rule, flag_values),
                             flag_values=flag_values)
    _declare(flag_values, "range", (holder.name,), holder.name, rule.text)
    return holder


def cross(rule, flag_values=flags.FLAGS):
    """`rule` (a `CrossRule`) checked once every flag is parsed; its help is appended to its
    first flag's. Declared by the script that defines all of its flags, after them."""
    flags.register_multi_flags_validator(list(rule.flag_names), _cross_checker(rule),
                                         flag_values=flag_values)
    _declare(flag_values, "cross", rule.flag_names, rule.flag_names[0], rule.help)


def mode(rule, flag_values=flags.FLAGS):
    """`rule` (a `ModeRule`): its flags refused when given outside its mode. Declared by the
    script that defines its flags, after them."""
    flags.register_multi_flags_validator(list(rule.flag_names + rule.mode_flags),
                                         _mode_checker(rule, flag_values),
                                         flag_values=flag_values)
    for name in rule.flag_names:
        _declare(flag_values, "mode", rule.flag_names + rule.mode_flags, name,
                 "only " + rule.mode)


def declared(flag_values=flags.FLAGS):
    """[(kind, flag names, text)] of every rule declared on `flag_values`, in order; kind is
    "range", "cross" or "mode" (a mode rule once per flag it holds)."""
    return list(_DECLARED.get(flag_values, []))
