"""The one `__getattr__` of a package that imports nothing until a name is used.

`verify/` and `write/` import nothing at package level (the verify child imports its JAX
blocker first; `jax2tf-native export` checks its inputs before TensorFlow is imported). Their
public names and submodules resolve on first use through the function this builds. Imports
only importlib.

Example:
    >>> __getattr__ = lazy_names("json", {"JSONEncoder": "encoder"}, {"decoder"})
    >>> __getattr__("JSONEncoder")().encode({"a": 1}), __getattr__("decoder").__name__
    ('{"a": 1}', 'json.decoder')
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_names(package: str, public: Mapping[str, str],
               submodules: frozenset[str] | set[str]) -> Callable[[str], object]:
    """A module `__getattr__` for `package`: a name in `public` is read from the submodule it
    maps to, a name in `submodules` is that submodule, anything else is an AttributeError."""
    def __getattr__(name: str):
        if name in public:
            return getattr(importlib.import_module(f"{package}.{public[name]}"), name)
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return __getattr__
