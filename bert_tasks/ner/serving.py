"""run_ner's format: text in, its entities with their types and character offsets out. Its
graph: `raw_text`."""
from bert_runner.serving import registry

FORMAT_NAME = "ner"


def _answer_rows(call, rows, metadata):
    out = call("serving_default", text=[p[0] for p in rows])
    results = []
    for i in range(len(rows)):
        count = int(out["entity_count"][i])
        results.append({"entities": [
            {"text": out["entity_text"][i, k].decode("utf-8"),
             "label": out["entity_label"][i, k].decode("utf-8"),
             "start": int(out["entity_start"][i, k]), "end": int(out["entity_end"][i, k])}
            for k in range(count)]})
    return results


def _describe(result):
    return "  ".join("%s/%s [%d:%d]" % (e["text"], e["label"], e["start"], e["end"])
                     for e in result["entities"]) or "(no entities)"


FORMAT = registry.register(registry.ServingFormat(
    name=FORMAT_NAME,
    help="text -> a run_ner model's entities with character offsets",
    export=registry.deferred("bert_tasks.ner.raw_text", "export_from_config"),
    convertible=registry.deferred("bert_tasks.ner.raw_text", "convertible_from_config"),
    served_module=registry.deferred("bert_tasks.ner.raw_text", "served_module"), litert=True,
    fine_tuned=registry.deferred("bert_tasks.ner.raw_text", "fine_tuned_from_config"),
    hf_kinds=("token",), hf_defaults={"max_seq_length": 128},
    script="run_ner.py", head="token classifier",
    fields=(1, 1, "text"), answer=_answer_rows, describe=_describe,
    signatures=("serving_default",)))
