"""Package names imported on first use (PEP 562), so that a package's light parts load without
the heavy ones (Keras, TensorFlow)."""
import importlib


def module_getattr(package, public, namespace):
    """The module-level `__getattr__` of `package` (its name) whose names `public` (`{name:
    (module, attribute)}`) are imported on first use and kept in `namespace` (its globals())."""

    def __getattr__(name):
        if name not in public:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attribute = public[name]
        value = getattr(importlib.import_module(module), attribute)
        namespace[name] = value
        return value

    return __getattr__
