"""Calls, loops, conditionals and the custom calls JAX writes around them, as TF's functional
control flow (`While`, `Case`/`If` ops; no XLA), plus JAX's run-time shape assertions."""
from __future__ import annotations

import re

import tensorflow as tf

from tf_ops.plain import lapack_kernels, linalg_ops, symbolic as sym, windows
from tf_ops.plain.program import Op

SHAPE_ASSERTION = "shape_assertion"
# Single-device modules carry sharding annotations as custom calls: they only mark a value.
_IDENTITY_TARGETS = ("Sharding",)
# Custom calls that stand for ops, as (emit, check or None): StableHLO ops JAX writes as custom
# calls when a size is symbolic, XLA's Householder kernels the portable QR writes, and
# jaxlib's LAPACK calls that TF has kernels for (lapack_kernels).
_LOWERED_TARGETS = {"stablehlo.dynamic_reduce_window": (windows.dynamic_reduce_window, None),
                    **linalg_ops.CUSTOM_CALLS, **lapack_kernels.CUSTOM_CALLS}
_SUPPORTED_TARGETS = (SHAPE_ASSERTION,) + _IDENTITY_TARGETS + tuple(_LOWERED_TARGETS)


def call(ctx, op, *args):
    return ctx.call(op.attr("callee"), list(args))


def _invariants(types):
    return [tf.TensorShape(list(t.shape)) for t in types]


def while_(ctx, op: Op, *init):
    cond_region, body_region = op.regions

    def cond(*values):
        return tf.reshape(ctx.region(cond_region, list(values))[0], [])

    def body(*values):
        return tuple(ctx.region(body_region, list(values)))

    if not init:
        raise AssertionError("refused by check_while")
    results = tf.while_loop(cond, body, list(init),
                            shape_invariants=_invariants(op.result_types),
                            parallel_iterations=1)
    return list(results) if isinstance(results, (list, tuple)) else [results]


def check_while(op):
    return "a loop that carries no values" if not op.operands else None


def case(ctx, op: Op, index):
    branches = [(lambda region=region: tuple(ctx.region(region, [])))
                for region in op.regions]
    # Out-of-range indices run the last branch in StableHLO and in tf.switch_case alike.
    results = tf.switch_case(tf.reshape(index, []), branches)
    return list(results)


def if_(ctx, op: Op, pred):
    true_region, false_region = op.regions
    results = tf.cond(tf.reshape(pred, []),
                      lambda: tuple(ctx.region(true_region, [])),
                      lambda: tuple(ctx.region(false_region, [])))
    return list(results)


def custom_call(ctx, op: Op, *args):
    target = op.attr("call_target_name")
    if target == SHAPE_ASSERTION:
        return _shape_assertion(op, *args)
    args = [sym.materialize(a) for a in args]
    if target in _LOWERED_TARGETS:
        return _LOWERED_TARGETS[target][0](ctx, op, *args)
    if target in _IDENTITY_TARGETS:
        return [tf.identity(a) for a in args]
    raise AssertionError("refused by check_custom_call")


def _shape_assertion(op: Op, ok, *values):
    """JAX's check of the dimension variables (`b >= 1`, `d` divisible by 2, ...), at trace
    time where the sizes are known then. No op is built for sizes known only at run time: the
    graph's consumers (TF.js's converters, Core ML) refuse `Assert`/`StringFormat`, so plain
    graphs are checked where they are called (the converted function checks every call's
    shapes against its polymorphic shapes) and not inside."""
    if isinstance(ok, sym.DimSize) and ok.is_static and not ok.value:
        message = op.attr("error_message", "shape assertion failed")
        sizes = [v.value if isinstance(v, sym.DimSize) else "?" for v in values]
        text = re.sub(r"\{(\d+)\}", lambda m: str(sizes[int(m.group(1))]),
                      message.replace("{{", "(").replace("}}", ")"))
        raise ValueError(text)
    return []


def check_custom_call(op):
    target = op.attr("call_target_name")
    if target not in _SUPPORTED_TARGETS:
        return (f"custom call target {target!r} is a kernel outside StableHLO that only XLA "
                f"(or the platform it was lowered for) provides")
    check = _LOWERED_TARGETS.get(target, (None, None))[1]
    return check(op) if check is not None else None
