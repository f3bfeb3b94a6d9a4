"""tests/parallel.py: how the suite is spread over pytest-xdist workers."""
import pathlib
import types

from tests import parallel

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_units_are_files_except_split_files_and_grouped_folders():
    assert parallel.unit_of("tests/a/test_x.py::test_y[1]") == "tests/a/test_x.py"
    split = "tests/jax2tf_native/test_linalg_primitives.py::test_every[primitive_checks.py]"
    assert parallel.unit_of(split) == split
    assert parallel.unit_of("tests/consumers/test_onnx.py::test_z") == "tests/consumers/"


def test_longest_units_first_and_the_rest_in_collection_order():
    ids = ["tests/z/test_a.py::t1", "tests/consumers/test_onnx.py::t", "tests/z/test_a.py::t2",
           "tests/docs/test_doc_examples.py::t", "tests/b/test_c.py::t"]
    items = [types.SimpleNamespace(nodeid=i) for i in ids]
    parallel.longest_first(items)
    assert [i.nodeid for i in items] == [
        "tests/docs/test_doc_examples.py::t", "tests/consumers/test_onnx.py::t",
        "tests/z/test_a.py::t1", "tests/z/test_a.py::t2", "tests/b/test_c.py::t"]


def test_every_named_unit_exists():
    """A file moved or renamed must be renamed here too, or it silently loses its place."""
    for unit in (*parallel.LONGEST_FIRST, *parallel.SPLIT_FILES, *parallel.GROUPED_DIRS):
        assert (ROOT / unit).exists(), unit
