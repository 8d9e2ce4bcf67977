"""run_squad's format: a question and its context in, run_squad's answer out (predict.py runs the
post-processing on the exported windows' logits: `answers`). Its graph: `raw_text`."""
from bert_runner.serving import registry

FORMAT_NAME = "squad"


def _answer_rows(call, rows, metadata):
    from bert_tasks.squad.answers import answers  # TensorFlow-free declarations: loaded at use

    questions, contexts = [p[0] for p in rows], [p[1] for p in rows]
    out = call("serving_default", question=questions, context=contexts)
    return [{"answer": a.text, "start": a.start, "end": a.end,
             "probability": a.probability, "score": a.score}
            for a in answers(questions, contexts, out, metadata)]


def _describe(result):
    return "%r  characters %d-%d  probability %.4f" % (
        result["answer"], result["start"], result["end"], result["probability"])


FORMAT = registry.register(registry.ServingFormat(
    name=FORMAT_NAME,
    help="question and context -> run_squad's windows' logits, answered by predict.py",
    export=registry.deferred("bert_tasks.squad.raw_text", "export_from_config"),
    convertible=registry.deferred("bert_tasks.squad.raw_text", "convertible_from_config"),
    served_module=registry.deferred("bert_tasks.squad.raw_text", "served_module"), litert=True,
    fine_tuned=registry.deferred("bert_tasks.squad.raw_text", "fine_tuned_from_config"),
    hf_kinds=("span",),
    hf_defaults={"max_seq_length": 384, "doc_stride": 128, "max_query_length": 64},
    hf_settings=registry.deferred("bert_tasks.squad.raw_text", "hf_settings"),
    script="run_squad.py", head="SQuAD span",
    fields=(2, 2, "question<TAB>context"), answer=_answer_rows, describe=_describe,
    signatures=("serving_default",)))
