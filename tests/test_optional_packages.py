"""Every test reaches an optional package through `optional_packages` and skips naming a
requirements file that exists and installs it; the large tier's file installs every one of them
(so that CI's large-tier step skips nothing for a missing package)."""
import ast
import re

import pytest

import optional_packages
from conftest import ROOT

TESTS = ROOT / "tests"
HELPER = TESTS / "optional_packages.py"
LARGE_REQUIREMENTS = TESTS / "requirements-large.txt"


def _requirement_names(path):
    """The distribution names a requirements file installs, following its -r lines
    (relative to the file), normalised as pip compares them."""
    names = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-r"):
            names |= _requirement_names(path.parent / line[2:].strip())
        else:
            names.add(re.split(r"[\s\[<>=~!;]", line, maxsplit=1)[0].lower().replace("_", "-"))
    return names


@pytest.mark.parametrize("module", sorted(optional_packages.REQUIREMENTS))
def test_each_skip_names_a_requirements_file_that_installs_the_package(module):
    reason = optional_packages.skip_reason(module + ".sub")
    file = re.fullmatch(rf"{module} is not installed \(pip install -r (\S+)\)", reason).group(1)
    installed = _requirement_names(ROOT / file)
    assert module.replace("_", "-") in installed, f"{file} does not install {module}"
    assert installed <= _requirement_names(LARGE_REQUIREMENTS), \
        f"{LARGE_REQUIREMENTS.name} does not gather {file}"


def test_a_missing_package_skips_with_its_reason(monkeypatch):
    monkeypatch.setattr(optional_packages.importlib.util, "find_spec",
                        lambda name: None if name == "onnxruntime" else object())
    with pytest.raises(pytest.skip.Exception, match=re.escape(
            "onnxruntime is not installed (pip install -r requirements-onnx.txt)")):
        optional_packages.require("onnx", "onnxruntime.quantization")
    mark = optional_packages.needs("jax", "onnxruntime")
    assert mark.args == (True,) and mark.kwargs["reason"] == optional_packages.skip_reason(
        "onnxruntime")
    with pytest.raises(KeyError, match="not an optional package"):
        optional_packages.require("numpy")


def _unguarded(tree):
    """(line, what) of each import of an optional package, importorskip or find_spec in `tree`."""
    optional = set(optional_packages.REQUIREMENTS)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, "import " + a.name) for a in node.names
                      if a.name.split(".")[0] in optional]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.split(".")[0] in optional:
                found.append((node.lineno, "from %s import" % node.module))
        elif isinstance(node, ast.Attribute) and node.attr in ("importorskip", "find_spec"):
            found.append((node.lineno, node.attr))
    return found


def test_no_test_imports_an_optional_package_itself():
    # The fixture makers (tests/fixtures/*/make_*.py) run once, in environments of their own.
    found = [f"{path.name}:{line}: {what}" for path in sorted(TESTS.rglob("*.py"))
             if path != HELPER and "fixtures" not in path.relative_to(TESTS).parts
             for line, what in _unguarded(ast.parse(path.read_text(encoding="utf-8")))]
    assert not found, "use optional_packages.require / needs: " + "; ".join(found)


def test_the_scan_finds_each_form():
    source = ("import onnx\nfrom jax import numpy\nimport pytest\npytest.importorskip('torch')\n"
              "from bert_runner.serving import onnx\nfrom .onnx import x\n")
    assert [line for line, _ in _unguarded(ast.parse(source))] == [1, 2, 4]
