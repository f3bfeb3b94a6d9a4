"""`stablehlo.rng_bit_generator` as TF integer ops, bit for bit as XLA's CPU backend.

XLA expands the op (`RngBitGeneratorExpander`, algorithms in `xla/hlo/builder/lib/prng.cc`) into
integer arithmetic; this module writes the same arithmetic with TF's uint32/uint64 kernels
(add, multiply, shifts and xor wrap modulo 2**32 or 2**64 as XLA's do):

- the state is `u64[n]`: `state[0]` is the key, the rest the counter;
- THREE_FRY (state `u64[2]`): Threefry-2x32 with 20 rounds over counters `state[1] + i`;
  32-bit and narrower outputs split the shape in two halves on the first even dimension (else
  the largest) and interleave the two output words along it; 64-bit outputs join the words;
- PHILOX and DEFAULT (PHILOX on XLA's CPU and GPU backends), state `u64[2]`: Philox-4x32
  with 10 rounds over the 128-bit counter (low word `state[1]`, high word `state[0]`) plus
  `i`, outputs interleaved round-robin;
- outputs narrower than 32 bits keep the low bits of 32-bit words.

Refused at conversion: other state types or lengths, non-unsigned outputs, symbolic output
shapes (JAX writes those as a custom call). `stablehlo.rng` (XLA's own nondeterministic
uniform/normal) is refused too: no graph can reproduce its values.
"""
from __future__ import annotations

import math

import tensorflow as tf

from tf_ops.plain.program import Op

_THREEFRY_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
_THREEFRY_PARITY = 0x1BD11BDA
_PHILOX_W32A, _PHILOX_W32B = 0x9E3779B9, 0xBB67AE85
_PHILOX_M4X32A, _PHILOX_M4X32B = 0xD2511F53, 0xCD9E8D57
_UNSIGNED_OUTPUTS = {"ui8": 8, "ui16": 16, "ui32": 32, "ui64": 64}


def _u32(value: int) -> tf.Tensor:
    return tf.constant(value, tf.uint32)


def _u64(value: int) -> tf.Tensor:
    return tf.constant(value, tf.uint64)


def _low32(u64: tf.Tensor) -> tf.Tensor:
    return tf.cast(tf.bitwise.bitwise_and(u64, _u64(0xFFFFFFFF)), tf.uint32)


def _high32(u64: tf.Tensor) -> tf.Tensor:
    return tf.cast(tf.bitwise.right_shift(u64, _u64(32)), tf.uint32)


def _join64(low: tf.Tensor, high: tf.Tensor) -> tf.Tensor:
    return tf.bitwise.bitwise_or(tf.cast(low, tf.uint64),
                                 tf.bitwise.left_shift(tf.cast(high, tf.uint64), _u64(32)))


def _counters(n: int) -> tf.Tensor:
    return tf.cast(tf.range(n, dtype=tf.int64), tf.uint64)  # no uint64 Range kernel in TF


# ------------------------------------------------------------------------ Threefry

def _rotate_left(v: tf.Tensor, distance: int) -> tf.Tensor:
    return tf.bitwise.bitwise_or(tf.bitwise.left_shift(v, _u32(distance)),
                                 tf.bitwise.right_shift(v, _u32(32 - distance)))


def _threefry2x32(x0, x1, k0, k1):
    k2 = tf.bitwise.bitwise_xor(tf.bitwise.bitwise_xor(_u32(_THREEFRY_PARITY), k0), k1)
    keys = (k0, k1, k2)
    x0, x1 = x0 + k0, x1 + k1
    for block in range(5):
        rotations = _THREEFRY_ROTATIONS[:4] if block % 2 == 0 else _THREEFRY_ROTATIONS[4:]
        for rotation in rotations:
            x0 = x0 + x1
            x1 = tf.bitwise.bitwise_xor(x0, _rotate_left(x1, rotation))
        x0 = x0 + keys[(block + 1) % 3]
        x1 = x1 + keys[(block + 2) % 3] + _u32(block + 1)
    return x0, x1


def _split_dimension(shape: tuple[int, ...]) -> int:
    """XLA's SplitShapeIntoHalves: the first even dimension, else the first largest."""
    for i, d in enumerate(shape):
        if d % 2 == 0:
            return i
    return max(range(len(shape)), key=lambda i: (shape[i], -i))


def _threefry_words(key, counter, n: int):
    """Threefry of counters `counter + [0, n)` under the u64 `key`: two u32 words each."""
    inputs = counter + _counters(n)
    return _threefry2x32(_low32(inputs), _high32(inputs), _low32(key), _high32(key))


def _threefry(key, counter, shape: tuple[int, ...], width: int):
    if width == 64:
        n = math.prod(shape)
        low, high = _threefry_words(key, counter, n)
        return tf.reshape(_join64(low, high), shape), counter + _u64(n)
    if not shape:
        word, _ = _threefry_words(key, counter, 1)
        return tf.reshape(word, []), counter + _u64(1)
    split = _split_dimension(shape)
    half = list(shape)
    half[split] = -(-shape[split] // 2)
    n = math.prod(half)
    first, second = _threefry_words(key, counter, n)
    # Word j of counter i lands at index 2 * i + j along the split dimension.
    halves = [tf.reshape(w, half[:split + 1] + [1] + half[split + 1:]) for w in (first, second)]
    joined = list(shape)
    joined[split] = 2 * half[split]
    words = tf.reshape(tf.concat(halves, axis=split + 1), joined)
    if joined[split] != shape[split]:
        words = tf.slice(words, [0] * len(shape), list(shape))
    return words, counter + _u64(n)


# ------------------------------------------------------------------------ Philox

def _mul_high_low(x: tf.Tensor, k: int):
    product = tf.cast(x, tf.uint64) * _u64(k)  # exact: both factors are below 2**32
    return _high32(product), _low32(product)


def _philox4x32(x, k0, k1):
    for _ in range(10):
        high0, low0 = _mul_high_low(x[0], _PHILOX_M4X32A)
        high1, low1 = _mul_high_low(x[2], _PHILOX_M4X32B)
        x = [tf.bitwise.bitwise_xor(tf.bitwise.bitwise_xor(high1, x[1]), k0), low1,
             tf.bitwise.bitwise_xor(tf.bitwise.bitwise_xor(high0, x[3]), k1), low0]
        k0, k1 = k0 + _u32(_PHILOX_W32A), k1 + _u32(_PHILOX_W32B)
    return x


def _add_128(low, high, delta):
    """(low, high) + delta as a 128-bit number of two u64 words."""
    new_low = low + delta
    carry = tf.cast(tf.less(new_low, low), tf.uint64)
    return new_low, high + carry


def _philox(key, low, high, shape: tuple[int, ...], width: int):
    n = math.prod(shape)
    words_needed = 2 * n if width == 64 else n
    blocks = -(-words_needed // 4)
    in_low, in_high = _add_128(low, high, _counters(blocks))
    x = [_low32(in_low), _high32(in_low), _low32(in_high), _high32(in_high)]
    bits = _philox4x32(x, _low32(key), _high32(key))
    if width == 64:
        lanes = [_join64(bits[0], bits[1]), _join64(bits[2], bits[3])]
    else:
        lanes = bits
    numbers = tf.reshape(tf.stack(lanes, axis=1), [-1])[:n]  # round-robin over the lanes
    return tf.reshape(numbers, shape), _add_128(low, high, _u64(blocks))


# ------------------------------------------------------------------------ the op

def _algorithm(op: Op) -> str:
    algorithm = op.attr("rng_algorithm", "DEFAULT")
    return "PHILOX" if algorithm == "DEFAULT" else algorithm  # XLA CPU/GPU's default


def rng_bit_generator(ctx, op: Op, state):
    shape = tuple(op.result_types[1].shape)
    width = _UNSIGNED_OUTPUTS[op.result_types[1].element]
    key = state[0]
    if _algorithm(op) == "THREE_FRY":
        words, counter = _threefry(key, state[1], shape, width)
        new_state = tf.stack([key, counter])
    else:
        # A two-word state's 128-bit counter is (state[1], state[0]) (XLA reverses it); the
        # new state keeps only the counter's low word.
        words, (new_low, _) = _philox(key, state[1], state[0], shape, width)
        new_state = tf.stack([key, new_low])
    if width < 32:
        words = tf.cast(tf.bitwise.bitwise_and(words, _u32((1 << width) - 1)),
                        tf.as_dtype(op.result_types[1].dtype))
    return [new_state, words]


def check_rng_bit_generator(op: Op):
    state, output = op.operand_types[0], op.result_types[1]
    algorithm = _algorithm(op)
    if algorithm not in ("THREE_FRY", "PHILOX"):
        return f"unknown algorithm {algorithm}"
    if state.element != "ui64" or state.rank != 1:
        return f"a {state} state (XLA's generators take u64[2] or u64[3])"
    if state.shape[0] != 2:
        # PHILOX also takes u64[3] in XLA, but JAX never writes one and no test here can
        # compare it with XLA: refused rather than unverified.
        return f"{algorithm} with a {state} state (JAX writes u64[2])"
    if output.element not in _UNSIGNED_OUTPUTS:
        return f"{output.element} outputs (only unsigned integer bits are lowered)"
    if not output.is_static:
        return "an output of symbolic shape"
    return None


def check_rng(op: Op):
    return ("XLA's `rng` draws from its own unspecified generator, so no graph reproduces its "
            "values; use jax.random (a counter-based PRNG of plain integer ops)")


def rng(ctx, op: Op, *args):
    raise AssertionError("refused by check_rng")

