"""Answer raw text with a model exported by export_model.py, without a server.

    python predict.py --model=/tmp/mrpc_serving/1 $'He said so.\tSo he said.'
    python predict.py --model=/tmp/squad_serving/1 $'Who wrote it?\tIt was written by Jane.'
    python predict.py --model=/tmp/ner_serving/1 --output_format=json < sentences.txt
    python predict.py --model=/tmp/ner_serving/1 --input_file=sentences.txt
    python predict.py --model=/tmp/reranker/1 --rerank --input_file=candidates.tsv
    python predict.py --model=/tmp/squad_onnx $'Who wrote it?\tIt was written by Jane.'  # ONNX
    python predict.py --model=/tmp/ner_hf "Jane Austen lived in Bath."  # Hugging Face directory
    python predict.py --model=/tmp/fill_mask --top_k=3 "Paris is the [MASK] of France."

Fields within an input are tab-separated (a classifier's text_a<TAB>text_b, SQuAD's
question<TAB>context, SWAG's context<TAB>ending<TAB>...); see `bert_runner.serving.predictor` and
docs/export.md. Without texts or --input_file, the inputs are standard input's lines.
"""
import sys

from absl import flags

from bert_runner import cli
from bert_runner.flag_ranges import at_least, ranged

FLAGS = flags.FLAGS

flags.DEFINE_string("model", None, "The directory export_model.py wrote: a SavedModel (any "
                    "--format of one), an ONNX export (--format=onnx), a LiteRT export "
                    "(--format=litert; its directory or its .tflite), or a Hugging Face "
                    "directory with a task head (--format=huggingface of a fine-tuning run, or "
                    "any BertForSequenceClassification, ...ForTokenClassification, "
                    "...ForQuestionAnswering or ...ForMultipleChoice directory, or a "
                    "...ForMaskedLM or ...ForPreTraining one, served as --format=fill_mask).")
flags.DEFINE_string("input_file", None,
                    "A UTF-8 text file, one input per line (`-`: standard input); a blank "
                    "line is answered with a blank line, so the output lines match the input's.")
flags.DEFINE_enum("output_format", "text", ["text", "json"],
                  "text: one readable line per input. json: one JSON object per line.")
ranged(flags.DEFINE_integer(
    "top_k", 5, "A fill-mask model (export_model.py --format=fill_mask): the most likely "
    "word-pieces given for each [MASK], best first."), at_least(1))
flags.DEFINE_bool(
    "rerank", False,
    "Rerank: each input is query<TAB>passage, a query's candidates on consecutive lines (the "
    "first stage's order); a classifier export (--task_name=rerank) scores them and each query "
    "is answered with its candidates in score order (text: the query, then one line per "
    "candidate; json: one object per query).")


def main(argv):
    from bert_runner.serving import predictor
    from bert_tasks.serving import register_all

    register_all()

    texts = argv[1:]
    if texts and FLAGS.input_file:
        raise ValueError("give the inputs as arguments or as --input_file, not both")
    if FLAGS.rerank:
        from bert_tasks.classifier import reranking

        inputs = predictor.read_inputs(texts, FLAGS.input_file, sys.stdin)
        reranking.print_reranked(FLAGS.model, inputs, FLAGS.output_format, sys.stdout)
        return
    predictor.predict(FLAGS.model, texts, FLAGS.input_file, sys.stdin, FLAGS.output_format,
                      sys.stdout, FLAGS.top_k)


if __name__ == "__main__":
    flags.mark_flag_as_required("model")
    cli.run_script(main)
