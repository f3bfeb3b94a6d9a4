"""The user's source line in an MLIR location: the one reader, for every message that names it.

JAX records where each op came from in its MLIR location: JAX's op path as a name
(`"jit(f)/tanh"`) and the Python frames as file positions (`"model.py":12:7`), nested in
name, call-site and fused locations. The MLIR Python bindings cannot take a location apart, so
its printed form is read here. The user's line is the first file position outside JAX, TF,
Keras, Flax, installed packages and this project's own packages. Used by the plain lowering's
`PlainLoweringError` (`plain.program`), the StableHLO-version check (`module_for_tf`) and the
custom-call check (`custom_call_check`). Imports neither JAX nor TF.

Example:
    >>> loc = 'loc("jit(f)/tanh"("/home/me/model.py":12:7))'
    >>> user_line(loc), op_path(loc), describe(loc)
    ('/home/me/model.py:12', 'jit(f)/tanh', 'jit(f)/tanh at /home/me/model.py:12')
"""
from __future__ import annotations

import os
import re

# A quoted file position "path":line (MLIR adds :col), and a quoted name (JAX's op path).
_FILE_POSITION = re.compile(r'"([^"]+)":(\d+)')
_NAME = re.compile(r'"([^"]*)"(?!:\d)')
_JAX_OP_PATH = re.compile(r'"([^"]*(?:jit|pjit)\([^"]*\)/[^"]*)"')

# Frames inside this project's packages are never "the user's line", nor frames of the
# frameworks the user's function calls into.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PRODUCT_DIRS = tuple(os.path.join(_ROOT, p) + os.sep
                      for p in ("tf_ops", "jax2tf_native", "saved_model_tools"))
_LIBRARY_PARTS = ("/jax/", "/tensorflow/", "/keras/", "/flax/", "site-packages/",
                  "dist-packages/")


def _is_library(path: str) -> bool:
    return path.startswith(_PRODUCT_DIRS) or any(part in path for part in _LIBRARY_PARTS)


def user_line(location: str) -> str:
    """The user's "file.py:line" in a printed MLIR location, or "" if it holds none."""
    for path, line in _FILE_POSITION.findall(str(location)):
        if path.endswith(".py") and not _is_library(path):
            return f"{path}:{line}"
    return ""


def _jax_op_path(text: str) -> str:
    found = _JAX_OP_PATH.search(text)
    return found.group(1) if found else ""


def op_path(location: str) -> str:
    """JAX's op path ("jit(f)/tanh") in a printed MLIR location; else its first name, or ""."""
    text = str(location)
    found = _NAME.search(text)
    return _jax_op_path(text) or (found.group(1) if found else "")


def source(location: str) -> str:
    """The user's line, or else JAX's op path ("jit(f)/tanh"), or "": what an op's error
    message and a plain model's op sources cite. Not any other name: the ops of a region carry
    only their parent's bare name ("reduce_window:"), which says less than the parent's line,
    recorded for the parent op."""
    text = str(location)
    return user_line(text) or _jax_op_path(text)


def describe(location: str) -> str:
    """'jit(f)/qr at model.py:12': the op path and the user's line (else the innermost frame),
    or "unknown location"."""
    text = str(location)
    line = user_line(text)
    if not line:
        first = _FILE_POSITION.search(text)
        line = f"{first.group(1)}:{first.group(2)}" if first else ""
    parts = [op_path(text), f"at {line}" if line else ""]
    return " ".join(p for p in parts if p) or "unknown location"
