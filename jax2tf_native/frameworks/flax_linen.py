"""Flax Linen modules as `FunctionalModel`s: `module.apply(variables, *args)`.

The `params` collection trains; the others (`batch_stats`, ...) restore as non-trainable.
"""
from __future__ import annotations

from typing import Any

import flax.linen as nn

from jax2tf_native.frameworks.functional import FunctionalModel


def functional_model(module: nn.Module, variables: Any = None, *, method=None,
                     **call_kwargs) -> FunctionalModel:
    """`apply(variables, *args)` == `module.apply(variables, *args, method=method, **kw)`.

    Example:
        >>> import jax, numpy as np
        >>> dense = nn.Dense(3)
        >>> x = np.ones((2, 4), np.float32)
        >>> variables = dense.init(jax.random.key(0), x)
        >>> model = functional_model(dense, variables)
        >>> np.allclose(model.apply(model.params, x), dense.apply(variables, x))
        True
    """
    if variables is None or not hasattr(variables, "keys"):
        raise TypeError(f"a Linen module needs its variables (the dict `module.init` returns), "
                        f"got {type(variables).__name__}. Fix: functional_model(module, "
                        f"variables).")
    variables = {k: v for k, v in variables.items()}  # FrozenDict -> dict: one pytree kind

    def apply(variables, *args):
        return module.apply(variables, *args, method=method, **call_kwargs)

    apply.__name__ = type(module).__name__
    return FunctionalModel(apply, variables, {k: k == "params" for k in variables},
                           "flax.linen")
