"""Flax NNX modules as `FunctionalModel`s: `nnx.split` once, `nnx.merge` inside `apply`.

`nnx.Param` variables train; `nnx.BatchStat` and every other `nnx.Variable` restore as
non-trainable. Random-number state (`nnx.RngState`, e.g. of a Dropout) stays a constant of the
exported function: key arrays cannot be TF Variables, and a served model draws no randomness.
Call `module.eval()` first for inference behaviour (BatchNorm running statistics, no dropout).
"""
from __future__ import annotations

from typing import Any

import jax
from flax import nnx

from jax2tf_native.frameworks.functional import FunctionalModel


def functional_model(module: nnx.Module, variables: Any = None, *, method=None,
                     **call_kwargs) -> FunctionalModel:
    """`apply({"params": ..., "state": ...}, *args)` == `module(*args, **call_kwargs)`.

    Example:
        >>> import numpy as np
        >>> linear = nnx.Linear(4, 3, rngs=nnx.Rngs(0))
        >>> model = functional_model(linear)
        >>> sorted(model.params)
        ['params', 'state']
        >>> x = np.ones((2, 4), np.float32)
        >>> np.allclose(model.apply(model.params, x), linear(x))
        True
    """
    if variables is not None:
        raise TypeError("an nnx.Module holds its own variables; pass variables= only for Linen.")
    graphdef, rng_state, param_state, other_state = nnx.split(module, nnx.RngState, nnx.Param,
                                                              ...)
    name = method if isinstance(method, str) else "__call__"
    if method is not None and not isinstance(method, str):
        raise TypeError(f"method must be the name of a method of the module, got {method!r}.")

    def apply(params, *args):
        params_now = jax.tree.map(lambda x: x, param_state)
        other_now = jax.tree.map(lambda x: x, other_state)
        nnx.replace_by_pure_dict(params_now, params["params"])
        nnx.replace_by_pure_dict(other_now, params["state"])
        merged = nnx.merge(graphdef, rng_state, params_now, other_now)
        return getattr(merged, name)(*args, **call_kwargs)

    apply.__name__ = type(module).__name__
    params = {"params": nnx.to_pure_dict(param_state), "state": nnx.to_pure_dict(other_state)}
    return FunctionalModel(apply, params, {"params": True, "state": False}, "flax.nnx")
