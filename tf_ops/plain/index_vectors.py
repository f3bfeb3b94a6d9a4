"""Start indices and index vectors for gather, scatter and dynamic slices (`indexing`,
`scatter`): clamps, int64 casts, and moving the index vector dimension last.

- index vectors of any integer type: unsigned ones are compared as unsigned (a uint64 start
  past int64's range is out of bounds, clamped to the last slice by gather).
"""
from __future__ import annotations

import tensorflow as tf

I64 = tf.int64


def clamped(start: tf.Tensor, limit: tf.Tensor) -> tf.Tensor:
    """`start` (any integer type) clamped into [0, limit] as int64, compared in its own type
    so that an unsigned start past int64's range clamps to `limit`, not to 0."""
    limit = tf.cast(limit, I64)
    if start.dtype == tf.uint64:
        start = tf.minimum(start, tf.cast(tf.maximum(limit, 0), tf.uint64))
    return tf.maximum(tf.minimum(tf.cast(start, I64), limit), 0)


def as_int64(start: tf.Tensor) -> tf.Tensor:
    """A start index as int64; a uint64 past int64's range wraps to a negative value, which
    every bounds check below treats as out of range (as it is)."""
    return tf.cast(start, I64)


def index_vectors_last(indices: tf.Tensor, index_vector_dim: int) -> tf.Tensor:
    """Start indices with their index vectors along the last axis (a trailing 1 where
    `index_vector_dim` equals the rank, StableHLO's implicit vector of one index)."""
    rank = indices.shape.rank
    if index_vector_dim == rank:
        return tf.expand_dims(indices, -1)
    if index_vector_dim != rank - 1:
        perm = [d for d in range(rank) if d != index_vector_dim] + [index_vector_dim]
        indices = tf.transpose(indices, perm)
    return indices


def batch_axis(indices_dim: int, index_vector_dim: int) -> int:
    """Where an indices dimension lands once the index vector dimension is moved last."""
    return indices_dim - 1 if indices_dim > index_vector_dim else indices_dim


def along(values: tf.Tensor, axis: int, rank: int) -> tf.Tensor:
    """A 1-D tensor reshaped to lie along `axis` of a `rank`-D broadcast."""
    return tf.reshape(values, [1] * axis + [-1] + [1] * (rank - axis - 1))


def trailing_ones(x: tf.Tensor, count: int) -> tf.Tensor:
    for _ in range(count):
        x = tf.expand_dims(x, -1)
    return x


def int64(size) -> tf.Tensor:
    return tf.cast(size, I64) if isinstance(size, tf.Tensor) else tf.constant(size, I64)
