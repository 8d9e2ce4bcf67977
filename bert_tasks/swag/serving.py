"""run_swag's format: a context and its candidate endings in, the endings' probabilities out. Its
graph: `raw_text`."""
import numpy as np

from bert_runner.serving import registry

FORMAT_NAME = "swag"


def _check_rows(rows):
    if len({len(parts) for parts in rows}) > 1:
        raise ValueError("the inputs have different numbers of endings: give each context the "
                         "same number (run them separately otherwise)")


def _answer_rows(call, rows, metadata):
    out = call("serving_default", context=[p[0] for p in rows],
               endings=np.array([p[1:] for p in rows], dtype=object))
    return [{"choice": int(choice), "probabilities": probabilities.tolist()}
            for choice, probabilities in zip(out["choice"], out["probabilities"])]


def _describe(result):
    return "ending %d  %s" % (result["choice"], "  ".join(
        "%.4f" % p for p in result["probabilities"]))


FORMAT = registry.register(registry.ServingFormat(
    name=FORMAT_NAME,
    help="context and endings -> a run_swag model's probabilities",
    export=registry.deferred("bert_tasks.swag.raw_text", "export_from_config"),
    convertible=registry.deferred("bert_tasks.swag.raw_text", "convertible_from_config"),
    served_module=registry.deferred("bert_tasks.swag.raw_text", "served_module"), litert=True,
    fine_tuned=registry.deferred("bert_tasks.swag.raw_text", "fine_tuned_from_config"),
    hf_kinds=("multiple_choice",), hf_defaults={"max_seq_length": 128},
    script="run_swag.py", head="multiple-choice",
    fields=(2, None, "context<TAB>ending<TAB>ending..."), answer=_answer_rows, describe=_describe,
    check_rows=_check_rows, signatures=("serving_default",)))
