"""Imported at start-up by the Python processes a test starts with this folder on PYTHONPATH
(conftest.run_quickstart_command: the README's `python demo.py`, run through bash): the scripts
they start with subprocess.Popen are forked from a process that has imported TensorFlow
(tests/forked_scripts.py), as the tests' own subprocess.run calls are."""
import importlib.util
import os

_spec = importlib.util.spec_from_file_location(
    "forked_scripts", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                   "forked_scripts.py"))
_forked_scripts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_forked_scripts)
_forked_scripts.install_popen()
