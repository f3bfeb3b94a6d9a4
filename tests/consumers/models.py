"""The models the consumer tests hand to other converters: the four benchmark models
(benchmarks/handwritten_pairs.py), the framework models of tests/jax2tf_native/frameworks, and
single ops
(max with a constant, relu, max pooling), each converted with `enable_xla=False` (plain TF ops)
and served the way users save them: a `None` batch in the input signature.

keras-hub's BERT / ViT are not here: keras-hub 0.32 requires tensorflow-text, which requires the
full `tensorflow` package beside our `tensorflow-cpu`, so it cannot join the test extra.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf

import jax2tf_native
from benchmarks import handwritten_pairs


@dataclasses.dataclass(frozen=True)
class ConsumerModel:
    """One model for the consumer tests.

    Attributes:
      name: the test id.
      build: `build()` -> (tf_call, jax_call): the model converted with `enable_xla=False`
        (its parameters `tf.Variable`s) and JAX's own jitted call, both taking the model's
        arguments (the parameters are closed over). Built lazily: a framework model imports
        its framework only when a test asks for it.
      inputs: `inputs(batch)` -> the arguments after the parameters at that batch size
        (numpy, NaN-free).
      polymorphic_shapes: one spec per argument, the batch named `b`.
      polymorphic_constraints: as for `convert`.
    """
    name: str
    build: Callable[[], tuple[Callable, Callable]]
    inputs: Callable[[int], list]
    polymorphic_shapes: list
    polymorphic_constraints: tuple = ()


def _normal(shape, seed, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _function_model(name, apply, params, input_shape) -> ConsumerModel:
    """`apply(params, x)` with `x` of shape (b, *input_shape)."""
    def build():
        variables = jax.tree.map(lambda a: tf.Variable(np.asarray(a)), params)
        converted = jax2tf_native.convert(
            apply, polymorphic_shapes=[None, "(b, " + ", ".join(map(str, input_shape)) + ")"],
            enable_xla=False)
        jitted = jax.jit(apply)
        return (lambda x: converted(variables, x)), (lambda x: jitted(params, x))
    return ConsumerModel(name, build, lambda b: [_normal((b, *input_shape), b)],
                         ["(b, " + ", ".join(map(str, input_shape)) + ")"])


def _framework_model(name, make, inputs, polymorphic_shapes, constraints=(),
                     **convert_kwargs) -> ConsumerModel:
    """`make()` -> (the framework's model, extra `convert_model` keyword arguments)."""
    def build():
        from jax2tf_native import frameworks
        model, model_kwargs = make()
        converted = jax2tf_native.convert_model(
            model, polymorphic_shapes=polymorphic_shapes,
            polymorphic_constraints=list(constraints), enable_xla=False, **model_kwargs)
        functional = frameworks.functional_model(model, **model_kwargs)
        jitted = jax.jit(functional.apply)
        return converted, (lambda *args: jitted(functional.params, *args))
    return ConsumerModel(name, build, inputs, polymorphic_shapes, tuple(constraints))


def _nnx_cnn():
    from flax import nnx

    from tests.jax2tf_native.frameworks.test_flax_nnx import CNN
    model = CNN(nnx.Rngs(0))
    model.bn.mean[...] = model.bn.mean[...] + 0.3
    model.bn.var[...] = model.bn.var[...] * 2.0
    model.eval()
    return model, {}


def _nnx_list_mlp():
    from flax import nnx

    from tests.jax2tf_native.frameworks.test_flax_nnx_list import ListMLP
    return ListMLP(nnx.Rngs(0)), {}


def _equinox_cnn():
    from tests.jax2tf_native.frameworks.test_equinox import CNN
    return CNN(jax.random.key(0)), {}


def _linen_transformer():
    from tests.jax2tf_native.frameworks import test_flax_linen
    module = test_flax_linen.CausalTransformer()
    variables = module.init(jax.random.key(0), _token_inputs(1, 0)[0])
    variables = {"params": variables["params"],
                 "batch_stats": jax.tree.map(lambda s: s + 0.5, variables["batch_stats"])}
    return module, {"variables": variables}


def _token_inputs(b, seed, t=5):
    from tests.jax2tf_native.frameworks.test_flax_linen import _inputs
    return [_inputs(b, t, seed)]


def _max_pool(params, x):
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


_RELU_W = _normal((16, 8), 7)

SINGLE_OPS = [
    _function_model("maximum_0.5", lambda p, x: jnp.maximum(x, 0.5), {}, (6,)),
    _function_model("relu_dense", lambda p, x: jax.nn.relu(x @ p["w"]), {"w": _RELU_W}, (16,)),
    _function_model("max_pool", _max_pool, {}, (4, 6, 3)),
]
BENCHMARK_MODELS = [_function_model(p.name, p.apply, p.params, p.input_shape)
                    for p in handwritten_pairs.PAIRS.values()]
FRAMEWORK_MODELS = [
    _framework_model("flax_nnx_cnn", _nnx_cnn, lambda b: [_normal((b, 8, 8, 1), b)],
                     ["(b, 8, 8, 1)"]),
    _framework_model("flax_nnx_list_mlp", _nnx_list_mlp, lambda b: [_normal((b, 3), b)],
                     ["(b, 3)"]),
    _framework_model("equinox_cnn", _equinox_cnn, lambda b: [_normal((b, 1, 8, 8), b)],
                     ["(b, 1, 8, 8)"]),
    _framework_model("flax_linen_causal_transformer", _linen_transformer,
                     lambda b: _token_inputs(b, b),
                     [{"token_ids": "(b, t)", "padding_mask": "(b, t)"}], ["t <= 16"]),
]
ALL = SINGLE_OPS + BENCHMARK_MODELS + FRAMEWORK_MODELS


@dataclasses.dataclass(frozen=True)
class Served:
    """A model as one `tf.function` over flat, named inputs (what converters take).

    Attributes:
      function: the `tf.function`, input signature `specs`, returning a list of outputs.
      specs: one `tf.TensorSpec` per input leaf, named `input_0`, `input_1`, ...
      jax_call: `jax_call(*args)`, JAX's outputs for the model's arguments.
      flatten: `flatten(args)` -> the input arrays in `specs`' order.
    """
    function: Any
    specs: list
    jax_call: Callable
    flatten: Callable


def serve(model: ConsumerModel) -> Served:
    tf_call, jax_call = model.build()
    example = model.inputs(1)
    signature = jax2tf_native.input_signature(example, model.polymorphic_shapes,
                                              model.polymorphic_constraints)
    flat, treedef = jax.tree.flatten(signature, is_leaf=lambda s: isinstance(s, tf.TensorSpec))
    specs = [tf.TensorSpec(s.shape, s.dtype, name=f"input_{i}") for i, s in enumerate(flat)]

    @tf.function(input_signature=specs, autograph=False)
    def function(*tensors):
        return tf.nest.flatten(tf_call(*jax.tree.unflatten(treedef, tensors)))

    return Served(function, specs, jax_call, jax.tree.leaves)


@functools.lru_cache(maxsize=None)
def served(name: str) -> Served:
    """`serve` of the model named `name`, built once per test session: the ONNX, Core ML and
    tensorflowjs tests share it (converting a framework model costs seconds)."""
    (model,) = [m for m in ALL if m.name == name]
    return serve(model)


def by_name(names=None) -> list:
    """The models of ALL whose name is in `names` (all if None), as pytest params."""
    import pytest
    return [pytest.param(m, id=m.name) for m in ALL if names is None or m.name in names]
