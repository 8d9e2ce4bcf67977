"""run_squad.py's serving declaration (`registry.ServingFormat`): what export_model.py
--format=squad exports and how predict.py answers with it. The raw-text graph and the export are
in `raw_text`, beside the Python code they mirror; this module loads no TensorFlow, so that
export_model.py lists the formats before it parses its flags.
"""
from bert_runner.serving import registry

FORMAT_NAME = "squad"


def _export(flag_values, files):
    from bert_tasks.squad import raw_text

    raw_text.export_from_flags(flag_values, files)


def _answer_rows(call, rows, metadata):
    from bert_tasks.squad.raw_text import answers

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
    export=_export, script="run_squad.py", head="SQuAD span",
    fields=(2, 2, "question<TAB>context"), answer=_answer_rows, describe=_describe,
    signatures=("serving_default",)))
