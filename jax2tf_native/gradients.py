"""TF gradients for converted functions.

Until the exported-VJP machinery lands, a converted function with `with_gradient=True` carries a
`tf.custom_gradient` whose backward pass raises NotImplementedError, so a gradient request fails
with a clear message instead of silently returning None. With `with_gradient=False` the outputs
go through `PreventGradient`, which also survives in SavedModels.
"""
from __future__ import annotations

from typing import Callable, Sequence

import tensorflow as tf

PREVENT_GRADIENT_MESSAGE = (
    "The function was converted by jax2tf_native.convert with with_gradient=False, so it has no "
    "gradient. Fix: convert with with_gradient=True (the default).")


def prevent_gradient(outputs: Sequence[tf.Tensor]) -> list[tf.Tensor]:
    """Marks outputs so that any TF gradient through them fails with a message saying the fix."""
    return [tf.raw_ops.PreventGradient(input=o, message=PREVENT_GRADIENT_MESSAGE) for o in outputs]


def with_unimplemented_gradient(forward: Callable[[Sequence[tf.Tensor]], list[tf.Tensor]],
                                values: Sequence[tf.Tensor]) -> list[tf.Tensor]:
    """Runs `forward` under a custom gradient that raises NotImplementedError when requested."""

    @tf.custom_gradient
    def run(*inputs):
        outputs = forward(inputs)

        def grad(*unused_cotangents):
            raise NotImplementedError(
                "Gradients of jax2tf_native-converted functions are not implemented in this "
                "version. Fix: compute gradients in JAX, or use "
                "jax.experimental.jax2tf.convert for now.")

        return outputs, grad

    result = run(*values)
    return list(result) if isinstance(result, (list, tuple)) else [result]
