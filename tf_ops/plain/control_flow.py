"""Calls, loops, conditionals and the custom calls JAX writes around them, as TF's functional
control flow (`While`, `Case`/`If` ops; no XLA), plus JAX's run-time shape assertions."""
from __future__ import annotations

import re

import tensorflow as tf

from tf_ops.plain import op_rows, symbolic as sym
from tf_ops.plain.program import Op

SHAPE_ASSERTION = "shape_assertion"


def call(ctx, op, *args):
    return ctx.call(op.attr("callee"), list(args), [ctx.splat(v) for v in op.operands])


def _invariants(types):
    return [tf.TensorShape(list(t.shape)) for t in types]


def while_(ctx, op: Op, *init):
    cond_region, body_region = op.regions

    def cond(*values):
        return tf.reshape(ctx.region(cond_region, list(values))[0], [])

    def body(*values):
        results = ctx.region(body_region, list(values))
        # A dimension the body computes at run time (a broadcast to a symbolic size) leaves
        # TF without the static size the loop type has; tf.while_loop would refuse the value
        # as less specific than its invariant. The type is StableHLO's, so it holds.
        for result, t in zip(results, op.result_types):
            result.set_shape(t.shape)
        return tuple(results)

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
    """Dispatches on the target's row in op_table.CUSTOM_CALLS."""
    row = op_rows.custom_call(op.attr("call_target_name"))
    if row is None:
        raise AssertionError("refused by check_custom_call")
    if row.operands != "symbolic":
        args = [sym.materialize(a) for a in args]
    return row.emit(ctx, op, *args)


def identity_call(ctx, op: Op, *args):
    """A custom call that only marks its operands (e.g. with their sharding)."""
    return [tf.identity(a) for a in args]


def shape_assertion(ctx, op: Op, *args):
    return _shape_assertion(op, *args)


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
    row = op_rows.custom_call(target)
    if row is None:
        return (f"custom call target {target!r} is a kernel outside StableHLO that only XLA "
                f"(or the platform it was lowered for) provides")
    return row.check(op) if row.check is not None else None
