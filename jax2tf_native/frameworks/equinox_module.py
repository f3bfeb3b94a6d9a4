"""Equinox modules as `FunctionalModel`s: `eqx.partition` once, `eqx.combine` inside `apply`.

Every float array leaf of the module trains (Equinox keeps state such as BatchNorm statistics
outside the module, in `eqx.nn.State`, which callers pass as an argument).
"""
from __future__ import annotations

from typing import Any

import equinox as eqx

from jax2tf_native.frameworks.functional import FunctionalModel


def functional_model(module: eqx.Module, variables: Any = None, *, method=None,
                     **call_kwargs) -> FunctionalModel:
    """`apply(arrays, *args)` == `module(*args, **call_kwargs)`.

    Example:
        >>> import jax, numpy as np
        >>> mlp = eqx.nn.MLP(4, 2, 8, 2, key=jax.random.key(0))
        >>> model = functional_model(mlp)
        >>> x = np.ones(4, np.float32)
        >>> np.allclose(model.apply(model.params, x), mlp(x))
        True
    """
    if variables is not None:
        raise TypeError("an eqx.Module holds its own arrays; pass variables= only for Linen.")
    arrays, static = eqx.partition(module, eqx.is_array)
    name = method or "__call__"

    def apply(params, *args):
        return getattr(eqx.combine(params, static), name)(*args, **call_kwargs)

    apply.__name__ = type(module).__name__
    return FunctionalModel(apply, arrays, None, "equinox")
