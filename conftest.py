"""Runs the docstring examples of the product packages as tests, with `python -m pytest`.

Only modules of `saved_model_tools`, `jax2tf_native` and `tf_ops` are collected as doctest
modules (not `__main__.py`, which runs a program when imported): a global `--doctest-modules`
would also import the helper programs under tests/ in this process (some set XLA_FLAGS or need
KERAS_BACKEND=jax before their imports). The packages are in `testpaths` (setup.cfg), so a bare
`python -m pytest` runs their examples; `python -m pytest saved_model_tools` runs one package's.
"""
from _pytest.doctest import DoctestModule

PRODUCT_PACKAGES = ("saved_model_tools", "jax2tf_native", "tf_ops")


def pytest_collect_file(file_path, parent):
    try:
        parts = file_path.relative_to(parent.config.rootpath).parts
    except ValueError:
        return None
    if (file_path.suffix == ".py" and parts[0] in PRODUCT_PACKAGES
            and file_path.name != "__main__.py"):
        return DoctestModule.from_parent(parent, path=file_path)
    return None
