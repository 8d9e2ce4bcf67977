"""run_ner.py's serving declaration (`registry.ServingFormat`): what export_model.py
--format=ner exports and how predict.py answers with it. The raw-text graph and the export are
in `raw_text`, beside the Python code they mirror; this module loads no TensorFlow, so that
export_model.py lists the formats before it parses its flags.
"""
from bert_runner.serving import registry

FORMAT_NAME = "ner"


def _export(flag_values, files):
    from bert_tasks.ner import raw_text

    raw_text.export_from_flags(flag_values, files)


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
    export=_export, script="run_ner.py", head="token classifier",
    fields=(1, 1, "text"), answer=_answer_rows, describe=_describe,
    signatures=("serving_default",)))
