"""`stablehlo.sort` and `chlo.top_k` as TF's TopKV2 on integer keys, exactly as XLA orders.

A sort comparator is recognized as a lexicographic order over keys, the form `lax.sort` writes
(`jnp.sort`, `jnp.argsort`, `lax.sort(..., num_keys=k)`, top_k's decomposition):
`LT(k0(a), k0(b)) or (EQ(k0(a), k0(b)) and (LT(k1(a), k1(b)) or ...))`, each key a small
elementwise function of one side's operands (JAX's canonicalization of -0.0 and NaN), compared
LT (ascending) or GT (descending) with TOTALORDER for floats and SIGNED/UNSIGNED for integers.
Any other comparator is refused at conversion.

Each key becomes an integer tensor whose integer order is the comparator's order
(`elementwise.total_order_key` for floats: -NaN < -inf < ... < -0.0 < +0.0 < ... < inf < NaN),
and the permutation is built by stable sorts from the last key to the first (TopKV2 with k = n
sorts descending and puts the lower index first among ties; ascending order sorts the bitwise
complement, `key ^ -1`, which reverses the order of every signed integer type without overflow).
Keys are signed integers only (unsigned ones with their sign bit flipped) and use only ops
TFLite has as builtins (TopKV2, BitwiseXor, Bitcast, GatherV2), so a plain graph with a sort
converts to TFLite without SELECT_TF_OPS. Every operand is
then gathered with the permutation. Unstable sorts (`is_stable = false`) are sorted stably: XLA's
CPU sort gives the same order on the harness cases.
"""
from __future__ import annotations

import tensorflow as tf

from tf_ops.plain import op_rows
from tf_ops.plain import symbolic as sym
from tf_ops.plain import dtype_support as ds
from tf_ops.plain import elementwise as ew
from tf_ops.plain.program import Op, Region

_FLIP = {"LT": "GT", "GT": "LT"}


class _Comparator:
    """A comparator region read as keys: [(lhs value id, "LT" | "GT", compare type)]."""

    def __init__(self, region: Region):
        self.region = region
        self.args = list(region.args)
        self.producers = {r: op for op in region.ops for r in op.results}
        self._terms = {}
        self.keys = None
        self.why = None
        if len(region.returns) != 1:
            self.why = "the comparator does not return one boolean"
            return
        self.keys = self._lexicographic(region.returns[0])
        if self.keys is None:
            self.why = ("the comparator is not a lexicographic LT/GT order over keys (the form "
                        "lax.sort writes)")
            return
        for value, _, kind in self.keys:
            self.why = self._key_problem(value, kind)
            if self.why:
                self.keys = None
                return

    # -- structure
    def term(self, value):
        """`value` as a nested tuple of op names, attributes and operand terms."""
        if value in self._terms:
            return self._terms[value]
        if value in self.args:
            result = ("arg", self.args.index(value))
        elif value not in self.producers:
            result = ("outer", value)
        else:
            op = self.producers[value]
            attrs = tuple(sorted((k, repr(v)) for k, v in op.attrs.items()))
            children = tuple(self.term(v) for v in op.operands)
            if op.name in ("stablehlo.and", "stablehlo.or"):
                children = tuple(sorted(children, key=repr))
            elements = tuple(t.element for t in op.result_types + op.operand_types)
            result = (op.name, attrs, elements) + children
        self._terms[value] = result
        return result

    def _compare(self, value):
        """(direction, compare type, lhs value, rhs value) if `value` is a compare, else None."""
        op = self.producers.get(value)
        if op is None or op.name != "stablehlo.compare":
            return None
        kind = op.attr("compare_type") or _default_compare_type(op.operand_types[0].element)
        return op.attr("comparison_direction"), kind, op.operands[0], op.operands[1]

    def _sides(self, term) -> set:
        if term[0] == "outer":
            return set()  # a value captured from around the comparator: the same for a and b
        if term[0] == "arg":
            return {term[1] % 2}
        found = set()
        for child in term[3:]:
            found |= self._sides(child)
        return found

    def arg_operands(self, term) -> set:
        """The operand indices a term reads."""
        if term[0] == "arg":
            return {term[1] // 2}
        if term[0] == "outer":
            return set()
        found = set()
        for child in term[3:]:
            found |= self.arg_operands(child)
        return found

    def _mirror(self, term):
        if term[0] == "arg":
            return ("arg", term[1] ^ 1)
        if term[0] == "outer":
            return term
        children = tuple(self._mirror(c) for c in term[3:])
        if term[0] in ("stablehlo.and", "stablehlo.or"):
            children = tuple(sorted(children, key=repr))
        return term[:3] + children

    def _key(self, a, b, direction):
        """(lhs value, direction) if `a`, `b` are one key's two sides, else None."""
        ta, tb = self.term(a), self.term(b)
        if self._sides(ta) == {0} and tb == self._mirror(ta):
            return a, direction
        if self._sides(ta) == {1} and ta == self._mirror(tb):
            return b, _FLIP[direction]
        return None

    def _lexicographic(self, value):
        compared = self._compare(value)
        if compared is not None:
            direction, kind, a, b = compared
            if direction not in _FLIP:
                return None
            key = self._key(a, b, direction)
            return [(key[0], key[1], kind)] if key else None
        op = self.producers.get(value)
        if op is None or op.name != "stablehlo.or" or len(op.operands) != 2:
            return None
        for first, rest in (op.operands, op.operands[::-1]):
            head = self._lexicographic_head(first)
            tie_op = self.producers.get(rest)
            if head is None or tie_op is None or tie_op.name != "stablehlo.and":
                continue
            for eq, tail in (tie_op.operands, tie_op.operands[::-1]):
                if self._is_tie(eq, head):
                    tail_keys = self._lexicographic(tail)
                    if tail_keys:
                        return [head] + tail_keys
        return None

    def _lexicographic_head(self, value):
        compared = self._compare(value)
        if compared is None or compared[0] not in _FLIP:
            return None
        direction, kind, a, b = compared
        key = self._key(a, b, direction)
        return (key[0], key[1], kind) if key else None

    def _is_tie(self, value, head) -> bool:
        compared = self._compare(value)
        if compared is None or compared[0] != "EQ" or compared[1] != head[2]:
            return False
        _, _, a, b = compared
        key = self._key(a, b, "LT")
        return key is not None and self.term(key[0]) == self.term(head[0])

    # -- what can be computed
    def _key_problem(self, value, kind):
        term = self.term(value)
        problem = self._unsupported_op(term)
        if problem:
            return problem
        element = self._element(value)
        if element.startswith("complex"):
            return "a sort key of complex numbers has no TF order"
        if element.startswith(("f", "bf")) and kind != "TOTALORDER":
            return (f"the comparator compares floats with {kind} (a partial order): XLA's "
                    f"placement of NaNs is then undefined")
        return None

    def _unsupported_op(self, term):
        if term[0] in ("arg", "outer"):
            return None
        if not op_rows.sort_key(term[0]):
            return f"a sort key applies {term[0]}, which the plain sort does not evaluate"
        for child in term[3:]:
            problem = self._unsupported_op(child)
            if problem:
                return problem
        return None

    def _element(self, value) -> str:
        if value in self.args:
            return self.region.arg_types[self.args.index(value)].element
        return self.producers[value].result_types[
            list(self.producers[value].results).index(value)].element

    # -- evaluation on whole operands
    def evaluate(self, ctx, op_record: Op, value, operands, cache):
        """The key `value` computed on the whole (transposed) operands."""
        if value in cache:
            return cache[value]
        if value in self.args:
            result = operands[self.args.index(value) // 2]
        elif value not in self.producers:
            result = ctx.value(value)
        else:
            op = self.producers[value]
            inputs = [self.evaluate(ctx, op_record, v, operands, cache) for v in op.operands]
            # Its op_table row's lowering, on whole operands (not the comparator's scalars).
            result = op_rows.row(op.name).emit(ctx, op, *inputs)
            result = sym.materialize(result[0] if isinstance(result, (list, tuple))
                                     else result)
        cache[value] = result
        return result


def _default_compare_type(element: str) -> str:
    if element.startswith(("f", "bf")):
        return "FLOAT"
    if element.startswith("ui") or element == "i1":
        return "UNSIGNED"
    return "SIGNED"


def check_sort(op: Op) -> str | None:
    comparator = _Comparator(op.regions[0])
    if comparator.why:
        return comparator.why
    if not op.attr("is_stable", False):
        used = set()
        for value, _, _ in comparator.keys:
            used |= comparator.arg_operands(comparator.term(value))
        if used != set(range(len(op.operands))):
            return ("an unstable sort (is_stable=false) carrying operands that are not keys: "
                    "XLA's CPU sort leaves equal keys in an order TF cannot reproduce; sort "
                    "with is_stable=True (lax.sort's default)")
    return None


def ordering_key(x: tf.Tensor, kind: str) -> tf.Tensor:
    """An integer tensor whose order is `kind`'s order of `x` (a compare type)."""
    if x.dtype == tf.bool:
        return tf.cast(x, tf.int8)
    if x.dtype in ds.FLOATS:
        return ew.total_order_key(x)  # TOTALORDER, the only float order check_sort accepts
    if kind == "UNSIGNED":
        # Flipping the sign bit of the same-width signed bits keeps the unsigned order: TFLite's
        # TOPK_V2 and BITWISE_XOR take no uint16/uint32/uint64, and every key stays signed.
        signed = ds.as_signed(x)
        return tf.bitwise.bitwise_xor(signed, tf.constant(signed.dtype.min, signed.dtype))
    return ds.as_signed(x)


def _stable_order(key: tf.Tensor, direction: str, n) -> tf.Tensor:
    """Positions along the last axis that sort `key` stably, ascending for LT."""
    if direction == "LT":
        # x ^ -1 is the bitwise complement; tf.bitwise.invert (TF's Invert) has no TFLite
        # builtin, BITWISE_XOR has.
        key = tf.bitwise.bitwise_xor(key, tf.constant(-1, key.dtype))
    return tf.math.top_k(key, k=n, sorted=True).indices


def _take(x, positions, rank):
    return tf.gather(x, positions, batch_dims=rank - 1, axis=rank - 1)


def sort(ctx, op: Op, *operands):
    comparator = _Comparator(op.regions[0])
    if comparator.keys is None:
        raise AssertionError("refused by check_sort")
    rank = op.operand_types[0].rank
    dim = int(op.attr("dimension")) % rank
    order = [d for d in range(rank) if d != dim] + [dim]
    moved = order != list(range(rank))
    xs = [tf.transpose(x, order) if moved else x for x in operands]
    n = ctx.dims(xs[0])[-1]
    cache = {}
    positions = None
    for value, direction, kind in reversed(comparator.keys):
        key = ordering_key(comparator.evaluate(ctx, op, value, xs, cache), kind)
        key = tf.broadcast_to(key, tf.shape(xs[0]))  # a key of constants only
        if positions is not None:
            key = _take(key, positions, rank)
        step = _stable_order(key, direction, n)
        positions = step if positions is None else _take(positions, step, rank)
    inverse = [order.index(d) for d in range(rank)]
    results = []
    for x in xs:
        y = _take(x, positions, rank)
        results.append(tf.transpose(y, inverse) if moved else y)
    return results


def top_k(ctx, op: Op, x):
    """`chlo.top_k`: the k largest along the last axis in TOTALORDER, ties to the lower index.

    Takes the op itself or JAX's `stablehlo.composite "chlo.top_k"` (k in its
    composite_attributes), whose decomposition is a full stable sort and a slice: the same
    result, but TopKV2 with k = n is ~50x slower for k << n (a 32x50000 top-5: 550 vs 10 ms).
    """
    k = op.attr("k")
    if k is None:
        k = op.attr("composite_attributes")["k"]
    k = int(k)
    positions = tf.math.top_k(ordering_key(x, _default_compare_type(
        op.operand_types[0].element)), k=k, sorted=True).indices
    rank = op.operand_types[0].rank
    return [_take(x, positions, rank), tf.cast(positions, op.result_types[1].dtype)]


def check_top_k(op: Op) -> str | None:
    if op.operand_types[0].element.startswith("complex"):
        return "top_k of complex numbers has no TF order"
    return None
