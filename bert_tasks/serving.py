"""Every serving format registered: the machinery's (`bert_runner.serving.formats`: embedding,
huggingface, litert, onnx) and the one each task declares in its own `serving` module, found by
package, so that a new task's format needs no list to be added to. export_model.py and predict.py
call `register_all()` before they look a format up (`bert_runner.serving.registry`). The
declarations load no TensorFlow: each export imports its graph when it runs.
"""
import importlib.util
import pkgutil


def register_all():
    """Imports every serving module (each registers its format); returns the format names."""
    import bert_tasks
    from bert_runner.serving import formats, registry  # noqa: F401

    for package in pkgutil.iter_modules(bert_tasks.__path__):
        name = "bert_tasks.%s.serving" % package.name
        if package.ispkg and importlib.util.find_spec(name) is not None:
            importlib.import_module(name)
    return registry.names()
