"""Symbolic result shapes of a `call_tf` under polymorphic shapes, from TF's shape inference.

jax2tf's `call_tf` gives its results the shapes TF infers for the function at the argument
shapes with every symbolic dimension replaced by None, and refuses when one comes out None.
Here TF is asked again at concrete argument shapes: each dimension variable set to a few
values in turn, and every result dimension TF reports is fitted as an integer linear expression
of the variables (`c + a1*v1 + ...`), then checked at one more assignment. A dimension TF
cannot say even at concrete shapes, or that is not such an expression, ends in
`CallTfShapeError` with the fix (declare `output_shape_dtype`).
"""
from __future__ import annotations

from typing import Sequence

import jax
import numpy as np
import tensorflow as tf

from jax2tf_native import _jax_internals
from jax2tf_native.errors import CallTfShapeError

# Variable values TF is asked at: multiples of 64 (so that reshapes into blocks of a power of two
# divide evenly) and large (so that constraints such as "b >= 16" usually hold).
_STEP = 64


def _fully_known(shape: tf.TensorShape) -> bool:
    return shape.rank is not None and all(d is not None for d in shape.as_list())


def _jax_dtype(tf_dtype: tf.DType) -> np.dtype:
    return jax.dtypes.canonicalize_dtype(np.dtype(tf_dtype.as_numpy_dtype))


def _describe(avals) -> str:
    return ", ".join(f"{a.dtype}[{', '.join(map(str, a.shape))}]" for a in avals)


def _in_scope(avals, scope) -> tuple:
    """Declared result shapes with their dimension variables read in the arguments' scope.

    `output_shape_dtype` is written with `jax.export.symbolic_shape("b")`, a scope of its own;
    "b" there means the converted function's "b".
    """
    def dim(d):
        return d if isinstance(d, int) else jax.export.symbolic_shape(str(d), scope=scope)[0]

    return tuple(jax.core.ShapedArray(tuple(map(dim, a.shape)), a.dtype) for a in avals)


def _converted_function_avals(params: dict, avals) -> tuple | None:
    """For a call_tf of a jax2tf_native-converted function (TF -> JAX -> TF -> JAX), its JAX
    function's result shapes at the symbolic arguments: its XlaCallModule op reports a None
    batch to TF's shape inference even at concrete shapes, JAX knows the expressions."""
    jax_function = getattr(_jax_internals.call_tf_user_function(params), "jax_function", None)
    treedef = _jax_internals.call_tf_args_treedef(params)
    if not callable(jax_function) or treedef is None:
        return None
    structs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]
    out = jax.eval_shape(lambda *flat: jax_function(*treedef.unflatten(flat)), *structs)
    return tuple(jax.core.ShapedArray(o.shape, o.dtype) for o in jax.tree_util.tree_leaves(out))


class OutputShapeResolver:
    """The resolver for `_jax_internals.resolving_call_tf_output_avals`.

    Counts the call_tf calls it resolves, so that an error names which one failed.
    """

    def __init__(self):
        self.calls = 0

    def __call__(self, avals: Sequence, params: dict):
        self.calls += 1
        user = _jax_internals.call_tf_user_function(params)
        self._name = getattr(user, "__name__", None) or type(user).__name__
        dims = [d for a in avals for d in a.shape if not isinstance(d, int)]
        if not dims:
            return None  # Static arguments: the peer's own evaluation applies.
        scope = dims[0].scope
        call = _jax_internals.call_tf_params(params)
        if call.output_avals is not None:
            return _in_scope(call.output_avals, scope)
        function = call.function_flat_tf
        concrete = function.get_concrete_function(*call.args_signature)
        if all(_fully_known(s) for s in concrete.output_shapes):
            return None
        from_jax = _converted_function_avals(params, avals)
        if from_jax is not None:
            return from_jax
        names = sorted(set().union(*(_jax_internals.dimension_variables(d) for d in dims)))
        base = {v: _STEP * (2 + i) for i, v in enumerate(names)}
        bumped = [dict(base, **{v: base[v] + _STEP}) for v in names]
        check = {v: base[v] + _STEP * (3 + 2 * i) for i, v in enumerate(names)}
        shapes = [self._output_shapes(function, params, avals, env)
                  for env in [base, *bumped, check]]
        variables = [jax.export.symbolic_shape(v, scope=scope)[0] for v in names]
        results = []
        for k, (shape, dtype) in enumerate(zip(concrete.output_shapes, concrete.output_dtypes)):
            ranks = {len(s[k]) for s in shapes}
            if len(ranks) != 1 or (shape.rank is not None and ranks != {shape.rank}):
                self._fail(avals, k, None, f"its rank changes with the argument shapes "
                           f"({sorted(ranks)})")
            out = []
            for j in range(len(shapes[0][k])):
                values = [s[k][j] for s in shapes]
                # Each variable was bumped by _STEP alone: the slopes are whole when linear.
                coeffs = [(b - values[0]) // _STEP for b in values[1:1 + len(names)]]
                constant = values[0] - sum(a * base[v] for a, v in zip(coeffs, names))
                predicted = constant + sum(a * check[v] for a, v in zip(coeffs, names))
                if predicted != values[-1] or any((b - values[0]) % _STEP
                                                  for b in values[1:1 + len(names)]):
                    self._fail(avals, k, j, f"TF gives {values} at the variable values "
                               f"{[base, *bumped, check]}, not an integer linear function "
                               f"of {names}")
                out.append(constant + sum(a * v for a, v in zip(coeffs, variables)))
            results.append(jax.core.ShapedArray(tuple(out), _jax_dtype(dtype)))
        return tuple(results)

    def _output_shapes(self, function, params, avals, env) -> list[list[int]]:
        specs = [tf.TensorSpec([_jax_internals.evaluate_dimension(d, env) for d in a.shape],
                               sig.dtype)
                 for a, sig in zip(avals, _jax_internals.call_tf_params(params).args_signature)]
        # A fresh tf.function: the peer's own one would reuse its trace at the None shapes.
        fresh = tf.function(_jax_internals.call_tf_params(params).callable_flat_tf,
                            autograph=False)
        concrete = fresh.get_concrete_function(*specs)
        for k, shape in enumerate(concrete.output_shapes):
            if not _fully_known(shape):
                dims = shape.as_list() if shape.rank is not None else []  # unknown rank: []
                j = next((j for j, d in enumerate(dims) if d is None), None)
                self._fail(avals, k, j, f"TF's shape inference gives {shape} even at the "
                           f"concrete argument shapes {[s.shape.as_list() for s in specs]} "
                           f"(the shape depends on values, e.g. tf.unique or a boolean mask, "
                           f"or passes an op that reports none, e.g. the XlaCallModule of a "
                           f"converted function in a reloaded SavedModel)")
        return [s.as_list() for s in concrete.output_shapes]

    def _fail(self, avals, k: int, j: int | None, why: str):
        where = f"result {k}" + ("" if j is None else f", dimension {j}")
        raise CallTfShapeError(
            f"call_tf cannot call functions whose output has dynamic shape: "
            f"call_tf({self._name}), call #{self.calls} in order, with arguments "
            f"{_describe(avals)} under polymorphic shapes: its {where} has no symbolic shape: "
            f"{why}. Expected a dimension TF can infer from the argument shapes. Fix: declare "
            f"it, call_tf(f, output_shape_dtype=jax.ShapeDtypeStruct(shape, dtype)) with the "
            f"symbolic dimensions named as in polymorphic_shapes (jax.export.symbolic_shape"
            f"(\"b\")), "
            f"or convert with static shapes.")
