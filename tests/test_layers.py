"""The package layers (docs/architecture.md), read from every module's imports with `ast`.

- Imports flow one way: saved_model_tools -> jax2tf_native -> tf_ops. No module of a lower
  package imports a higher one, at module level or inside a function.
- Inside saved_model_tools, the reading side (no JAX) imports no writing-side module; it
  reaches the writing side only through the package's lazy attributes. No import circle
  among saved_model_tools' modules (imports for type annotations included).
- Imports inside functions exist only where FUNCTION_LEVEL_IMPORTS lists them (each with its
  reason, mirrored in docs/architecture.md).
- The reading tools import with JAX blocked and leave `jax` out of sys.modules.
- Nothing shipped uses the repository's tests/ or tools/ (back-compat generation is
  tools/backcompat).
- Nothing outside tests/ imports from tests/ (tests import tools/ and benchmarks/, never the
  reverse): no import, no `tests.x` module path in a string, no sys.path entry into tests/.
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("tf_ops", "jax2tf_native", "saved_model_tools")  # lowest first

# saved_model_tools' rooms (subpackages) and top-level modules, by side.
READING_SIDE = ("inspect", "verify", "tflite", "tfjs", "cli",
                "atomic_dir", "manifest", "reference_file", "warmup", "lazy_names")
WRITING_SIDE = ("write", "demo")

# (module path, function): why the import is deferred. docs/architecture.md lists the same.
FUNCTION_LEVEL_IMPORTS = {
    ("saved_model_tools/cli/export.py", "load_params"):
        "flax is optional; only a .msgpack parameter file needs it",
    ("saved_model_tools/cli/export.py", "run"):
        "TensorFlow only after the command's cheap checks (a bad command fails in < 1 s)",
    ("jax2tf_native/sandbox_server.py", "deserialize_artifact"):
        "jax2tf registers call_tf's effect types; the sandbox child imports it (and so TF) "
        "only for an artifact that needs them",
    ("tf_ops/module_for_tf.py", "module_bytes_for_tf"):
        "versions imports TF; reserialize runs in the artifact sandbox child without TF",
    ("tf_ops/module_for_tf.py", "reserialize"): "tf_targets imports TF (sandbox child: no TF)",
    ("tf_ops/module_for_tf.py", "_too_new_error"): "tf_targets/versions import TF (as above)",
}


def _modules():
    for package in LAYERS:
        for path in sorted((PROJECT_ROOT / package).rglob("*.py")):
            yield package, path


def _imports(tree: ast.AST):
    """(imported module name, enclosing function name or '<module>') for every import."""
    found = []

    def visit(node, function):
        for child in ast.iter_child_nodes(node):
            inner = function
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = child.name if function == "<module>" else function
            if isinstance(child, ast.Import):
                found.extend((a.name, function) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                found.extend((f"{child.module}.{a.name}", function) for a in child.names)
            elif isinstance(child, ast.Call) and getattr(child.func, "attr", None) == \
                    "import_module" and child.args and isinstance(child.args[0], ast.Constant):
                found.append((str(child.args[0].value), function))
            visit(child, inner)

    visit(tree, "<module>")
    return found


def _parse(path: Path):
    return ast.parse(path.read_text(), filename=str(path))


def test_imports_flow_one_way_saved_model_tools_jax2tf_native_tf_ops():
    upward = []
    for package, path in _modules():
        level = LAYERS.index(package)
        for name, function in _imports(_parse(path)):
            top = name.split(".")[0]
            if top in LAYERS and LAYERS.index(top) > level:
                upward.append(f"{path.relative_to(PROJECT_ROOT)} ({function}) imports {name}")
    assert upward == []


def test_shipped_packages_use_nothing_of_the_repository_tests_or_tools():
    """An installed wheel has no tests/ or tools/: no product module imports them or builds a
    path through a directory of that name."""
    found = []
    for _, path in _modules():
        tree = _parse(path)
        for name, function in _imports(tree):
            if name.split(".")[0] in ("tests", "tools"):
                found.append(f"{path.relative_to(PROJECT_ROOT)} ({function}) imports {name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in ("tests", "tools"):
                found.append(f"{path.relative_to(PROJECT_ROOT)}:{node.lineno} {node.value!r}")
    assert found == []


def _python_files_outside_tests():
    """Every tracked .py file of the repository outside tests/ (product, tools, benchmarks and
    the root conftest)."""
    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=PROJECT_ROOT, capture_output=True,
                            text=True, check=True).stdout.split()
    return [PROJECT_ROOT / f for f in listed if not f.startswith("tests/")]


def _is_sys_path_change(node: ast.AST) -> bool:
    """`sys.path.insert(...)`, `sys.path.append(...)` or `sys.path.extend(...)`."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("insert", "append", "extend")
            and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "path"
            and getattr(node.func.value.value, "id", None) == "sys")


def test_nothing_outside_tests_imports_from_tests():
    """What a tool or benchmark shares with a test lives in tools/ or benchmarks/, and the
    test imports it from there: an import of `tests`, a module path `tests.x` in a string
    (`python -m tests.x`, `importlib.import_module`) or a sys.path entry built with "tests"
    outside tests/ is a finding."""
    files = _python_files_outside_tests()
    assert any(f.parts[-2] == "tools" for f in files) and any(
        f.parts[-2] == "benchmarks" for f in files)  # the listing found the folders
    found = []
    for path in files:
        rel = path.relative_to(PROJECT_ROOT)
        tree = _parse(path)
        for name, function in _imports(tree):
            if name.split(".")[0] == "tests":
                found.append(f"{rel} ({function}) imports {name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(
                    r"tests(\.\w+)+", node.value):
                found.append(f"{rel}:{node.lineno} names the module {node.value!r}")
            if _is_sys_path_change(node) and any(
                    isinstance(c, ast.Constant) and isinstance(c.value, str) and "tests" in
                    c.value for arg in node.args for c in ast.walk(arg)):
                found.append(f"{rel}:{node.lineno} puts a tests/ folder on sys.path")
    assert found == []


def _side_modules(side):
    """The .py files of a side: its rooms' modules and its top-level modules."""
    package = PROJECT_ROOT / "saved_model_tools"
    for name in side:
        yield from sorted((package / name).rglob("*.py")) if (package / name).is_dir() \
            else [package / f"{name}.py"]


def test_reading_side_imports_no_writing_side_module():
    crossing = []
    for path in _side_modules(READING_SIDE):
        for name, function in _imports(_parse(path)):
            parts = name.split(".")
            if parts[0] == "saved_model_tools" and len(parts) > 1 and parts[1] in WRITING_SIDE:
                crossing.append(f"{path.relative_to(PROJECT_ROOT)} ({function}) imports {name}")
    assert crossing == []


def test_every_saved_model_tools_module_is_on_one_side():
    package = PROJECT_ROOT / "saved_model_tools"
    placed = set(_side_modules(READING_SIDE + WRITING_SIDE)) | {
        package / "__init__.py", package / "__main__.py"}
    assert all(path.is_file() for path in placed)
    assert sorted(str(p.relative_to(package)) for p in set(package.rglob("*.py")) - placed) == []


def _module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of `graph` (module -> modules it imports), [] when there is none."""
    state: dict[str, str] = {}

    def visit(node, stack):
        state[node] = "open"
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return stack[stack.index(target):] + [target]
            if target not in state:
                found = visit(target, stack + [target])
                if found:
                    return found
        state[node] = "done"
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return []


@pytest.mark.parametrize("package", ["saved_model_tools", "jax2tf_native", "tf_ops"])
def test_no_import_circle(package):
    """Module-to-module imports inside each package, `if TYPE_CHECKING:` ones included
    (`from saved_model_tools.inspect import report` imports the module `report`; a name from a
    package's `__init__` imports the `__init__`). A room's `__init__` re-exporting its modules
    is the one kind of edge left out: importing a room's module runs that `__init__` first.
    (Between packages, imports flow one way: test_imports_flow_one_way_...)."""
    modules = {_module_name(p): p for p in (PROJECT_ROOT / package).rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        targets = set()
        for imported, _ in _imports(_parse(path)):
            target = imported if imported in modules else imported.rpartition(".")[0]
            if target in modules and target != name and not (
                    path.name == "__init__.py" and target.startswith(name + ".")):
                targets.add(target)
        graph[name] = targets
    assert _cycle(graph) == []
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_function_level_imports_are_the_documented_ones():
    found = set()
    for _, path in _modules():
        rel = str(path.relative_to(PROJECT_ROOT))
        for name, function in _imports(_parse(path)):
            if function != "<module>" and not (rel.endswith("__init__.py")
                                               and function == "__getattr__"):
                found.add((rel, function))
    documented = {key for key in FUNCTION_LEVEL_IMPORTS if key[1] != "<module>"}
    assert found - documented == set(), "function-level imports not in FUNCTION_LEVEL_IMPORTS"
    assert documented - found == set(), "FUNCTION_LEVEL_IMPORTS lists imports that are gone"
    text = (PROJECT_ROOT / "docs" / "architecture.md").read_text()
    assert [k for k in FUNCTION_LEVEL_IMPORTS if f"`{k[0]}` `{k[1]}`" not in text] == []


_NO_JAX = r"""
import importlib, json, sys

class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("jax", "jaxlib"):
            raise ImportError(f"{name} is blocked in this test")
        return None

sys.meta_path.insert(0, _Block())
result = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
        result[name] = sorted(m for m in sys.modules if m.split(".")[0] in ("jax", "jaxlib"))
    except ImportError as e:
        result[name] = str(e)
print(json.dumps(result))
"""

# Every module of the reading side (its rooms and top-level modules), each imported in turn.
READING_TOOLS = ["saved_model_tools"] + [_module_name(p) for p in _side_modules(READING_SIDE)]


def test_reading_tools_import_without_jax():
    """One process with `import jax` blocked imports each reading tool in turn; after each,
    no jax module is loaded (an attempt would fail the import and show here)."""
    proc = subprocess.run([sys.executable, "-c", _NO_JAX, *READING_TOOLS], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {m: [] for m in READING_TOOLS}


def test_the_artifact_sandbox_server_imports_without_tensorflow():
    """The sandbox server (and so every forked check) starts without TF: with `tensorflow`
    blocked, its module imports and then checks a real artifact end to end."""
    script = _NO_JAX.replace('("jax", "jaxlib")', '("tensorflow",)').split("result = {}")[0] + r"""
import jax, numpy as np
from jax2tf_native import sandbox_server
good = jax.export.export(jax.jit(jax.numpy.sin))(np.zeros(3, np.float32)).serialize()
print(json.dumps([sandbox_server._child_checks(good, "1.0.0"),
                  sandbox_server._child_checks(b"not an artifact", "1.0.0")[:39],
                  sorted(m for m in sys.modules if m.startswith("tensorflow"))]))
"""
    proc = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [
        None, "Could not deserialize the 15 bytes as a", []]
