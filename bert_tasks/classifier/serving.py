"""run_classifier's format: a classifier's probabilities for raw text or text pairs (single-label,
regression or multi-label; truncated or windowed), as export_model.py --format=classifier writes it
and predict.py answers with it. Its graph: `raw_text`."""
from bert_runner.serving import registry

FORMAT_NAME = "classifier"


def _answer_rows(call, rows, metadata):
    if any(len(parts) == 2 for parts in rows):
        out = call("pairs", text_a=[p[0] for p in rows],
                   text_b=[p[1] if len(p) == 2 else "" for p in rows])
    else:
        out = call("serving_default", text_a=[p[0] for p in rows])
    if "predictions" in out:
        return [{"score": float(v)} for v in out["predictions"]]
    results = []
    for i in range(len(rows)):
        names = [n.decode("utf-8") for n in out["label_names"][i]]
        result = {"probabilities": dict(zip(names, out["probabilities"][i].tolist()))}
        if "predicted" in out:
            result["labels"] = [n for n, on in zip(names, out["predicted"][i]) if on]
        else:
            result["label"] = out["label"][i].decode("utf-8")
        results.append(result)
    return results


def _describe(result):
    if "score" in result:
        return "%.4f" % result["score"]
    chosen = result.get("label") or ",".join(result["labels"]) or "(none)"
    return "%s  %s" % (chosen, "  ".join(
        "%s=%.4f" % item for item in result["probabilities"].items()))


FORMAT = registry.register(registry.ServingFormat(
    name=FORMAT_NAME,
    help="raw text -> a run_classifier model's probabilities (SavedModel)",
    export=registry.deferred("bert_tasks.classifier.raw_text", "export_from_config"),
    hf_kinds=("classifier", "multi_label"), hf_defaults={"max_seq_length": 128},
    hf_settings=registry.deferred("bert_tasks.classifier.raw_text", "hf_settings"),
    script="run_classifier.py", head="classifier",
    # MNLI's model is evaluated on its mismatched set and on AX too.
    model_families=(frozenset({"mnli", "mnli-mm", "ax"}),),
    fields=(1, 2, "text or text_a<TAB>text_b"), answer=_answer_rows, describe=_describe,
    # A classifier answers single texts and pairs through two signatures: both are warmed up.
    warm_up_fields=(1, 2),
    convertible=registry.deferred("bert_tasks.classifier.raw_text", "convertible_from_config"),
    served_module=registry.deferred("bert_tasks.classifier.raw_text", "served_module"),
    fine_tuned=registry.deferred("bert_tasks.classifier.raw_text", "fine_tuned_from_config"),
    hf_config=registry.deferred("bert_tasks.classifier.raw_text", "hf_config_entries")))
