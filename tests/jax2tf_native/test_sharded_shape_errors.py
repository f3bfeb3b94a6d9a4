"""A polymorphic dimension that a sharding splits must be a multiple of its shards: JAX raises
its IndivisibleError (a private type, matched by its message), which `convert` turns into our
PolymorphicShapeError naming the argument, the dimension and the fix. The full path on 8 host
devices runs in docs/guides/sharded.md (tests/docs); here JAX's own error, made on an abstract
mesh in this one-device process, pins the message the translation reads."""
import types

import jax
import pytest
from jax.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec as P

from jax2tf_native import PolymorphicShapeError, shardings


def _jax_indivisible_error(shape_spec: str, spec: P) -> ValueError:
    mesh = AbstractMesh((8,), ("x",), axis_types=(AxisType.Explicit,))
    shape = jax.export.symbolic_shape(shape_spec)
    with pytest.raises(ValueError) as raised:
        NamedSharding(mesh, spec).shard_shape(shape)
    return raised.value


def test_jax_error_for_an_input_becomes_ours_naming_the_argument_and_fix():
    error = _jax_indivisible_error("b, 4", P("x"))
    specs = [types.SimpleNamespace(path="args[0]['x']",
                                   shape=jax.export.symbolic_shape("b, 4")),
             types.SimpleNamespace(path="args[1]", shape=(4, 8))]
    ours = shardings.indivisible_dimension_error(error, specs)
    assert isinstance(ours, PolymorphicShapeError) and isinstance(ours, ValueError)
    message = str(ours)
    assert message.startswith("args[0]['x'] (shape (b, 4)): dimension 0 is sharded 8 ways")
    assert "'8*b' for 'b'" in message


def test_shape_of_no_input_is_named_as_an_array_of_that_shape():
    error = _jax_indivisible_error("4, n", P(None, "x"))
    ours = shardings.indivisible_dimension_error(
        error, [types.SimpleNamespace(path="args[0]", shape=(4, 4))])
    assert "an array of shape (4, n)" in str(ours) and "dimension 1 is sharded 8 ways" in str(ours)


def test_other_value_errors_are_left_alone():
    assert shardings.indivisible_dimension_error(ValueError("something else"), []) is None
