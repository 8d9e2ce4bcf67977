"""modeling/'s layering: shared layers, a package per model family, the family contract below the
registry and the checkpoint package, and no import circle among them (docs/architecture.md).

Every import is counted, those inside functions too, and so are the names the packages load on
first use (`_PUBLIC` in a package's `__init__.py`, `lazy_names`) and `importlib.import_module`
of a literal name: each is an import that runs when the code does.
"""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELING = ROOT / "modeling"


def _module_name(path):
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in MODELING.rglob("*.py")}


def _lazy_names(tree):
    """`{public name: module}` of a package's `_PUBLIC = {name: (module, name)}`."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_PUBLIC"
                                                 for t in node.targets)):
            return {name: module for name, (module, _) in ast.literal_eval(node.value).items()}
    return {}


LAZY = {name: _lazy_names(ast.parse(path.read_text(encoding="utf-8")))
        for name, path in MODULES.items() if path.name == "__init__.py"}


def _target(module, name=None):
    """The modeling module that `from module import name` (or `import module`) runs."""
    if name is not None and f"{module}.{name}" in MODULES:
        return f"{module}.{name}"  # a submodule
    if name is not None and name in LAZY.get(module, {}):
        return LAZY[module][name]  # a name loaded on first use
    return module if module in MODULES else None


def imports(name):
    """The modeling modules that module `name` imports."""
    found = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(_target(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.update(_target(node.module, alias.name) for alias in node.names)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)):
            found.add(_target(node.args[0].value))
    found.update(LAZY.get(name, {}).values())
    return found - {None, name}


GRAPH = {name: imports(name) for name in MODULES}


def test_no_import_circle_in_modeling():
    assert len(GRAPH) > 40 and GRAPH["modeling.families"]  # the walk found the package
    circles, state = [], {}

    def visit(name, path):
        state[name] = "open"
        for child in sorted(GRAPH[name]):
            if state.get(child) == "open":
                circles.append(" -> ".join(path[path.index(child):] + [child]))
            elif child not in state:
                visit(child, path + [child])
        state[name] = "done"

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [name])
    assert circles == []


def _reaches(name):
    seen, todo = set(), [name]
    while todo:
        for child in GRAPH[todo.pop()] - seen:
            seen.add(child)
            todo.append(child)
    return seen


def test_the_families_and_the_layers_never_reach_the_checkpoint_package():
    below = [n for n in GRAPH if n.startswith(("modeling.layers", "modeling.bert",
                                               "modeling.electra"))]
    below += ["modeling.family", "modeling.families", "modeling.hf_directory",
              "modeling.json_file"]
    found = sorted(f"{n} reaches {m}" for n in below for m in _reaches(n)
                   if m.startswith("modeling.checkpoint"))
    assert found == []


def imported_modules(path):
    """Every module the file `path` imports, inside functions too, `from a import b` counted as
    `a.b` too."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def test_the_model_never_imports_the_machinery():
    """modeling/ holds the model: runs, flags and output_dirs are the machinery's
    (`bert_runner.runs`), which imports the model, never the reverse."""
    above = ("bert_runner", "bert_tasks", "experiments", "bench")
    found = sorted(f"{name} imports {module}" for name, path in MODULES.items()
                   for module in imported_modules(path) if module.split(".")[0] in above)
    assert found == []


def test_the_shared_layers_name_no_family():
    found = sorted(f"{n} imports {m}" for n in GRAPH if n.startswith("modeling.layers")
                   for m in GRAPH[n] if not m.startswith("modeling.layers"))
    assert found == []


def test_a_family_is_a_package_and_no_root_file_is_named_after_one():
    from modeling import families

    names = [family.name for family in families.families()]
    assert names == ["bert", "electra"]
    for name in names:
        assert (MODELING / name / "family.py").is_file()
    assert [p.name for p in MODELING.glob("*.py") if p.stem.startswith(tuple(names))] == []
