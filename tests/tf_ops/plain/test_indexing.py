"""Indexing in the plain lowering: gather clamps, scatter drops whole windows out of range,
dynamic slices clamp; general dimension numbers, batching dimensions (vmap), index types,
duplicates, NaN in scatter max/min, symbolic batches, scatter bodies TF has no op for."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from tests.tf_ops.plain.lowering_check import assert_lowers_like_jax

X = np.arange(15, dtype=np.float32).reshape(5, 3) - 4
# In range, negative (wrapped by jnp), past the end and past -n: gather clamps the last two.
IDX = np.array([0, 4, -1, 7, -9], np.int32)
PROMISE = lax.GatherScatterMode.PROMISE_IN_BOUNDS  # the op's own out-of-range semantics


@pytest.mark.parametrize("dtype", [np.float32, np.int32, ml_dtypes.bfloat16, np.bool_])
def test_gather_rows_clamps_out_of_range(dtype):
    assert_lowers_like_jax(lambda x, i: (x[i], x[:, i[:3]]), X.astype(dtype), IDX)


@pytest.mark.parametrize("index_dtype", [np.int8, np.uint8, np.uint32, np.int16])
def test_index_types(index_dtype):
    i = np.array([0, 2, 4, 200 if index_dtype in (np.uint8, np.uint32) else 100], index_dtype)
    assert_lowers_like_jax(
        lambda x, i: (lax.gather(x, i[:, None], lax.GatherDimensionNumbers(
            offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,)), (1, 3),
            mode=PROMISE),
            lax.dynamic_slice(x, (i[3], i[1]), (2, 2)),
            lax.dynamic_update_slice(x, -jnp.ones((2, 2)), (i[3], i[0])),
            x.at[i].add(1.0)),
        X, i)


def test_gather_general_dimension_numbers():
    """Index vectors along dimension 0, a window of 2 in an indexed dimension (clamped as a
    whole), a collapsed dimension no index moves, offset dims before the batch dims."""
    x = np.arange(2 * 6 * 4, dtype=np.float32).reshape(2, 6, 4)
    i = np.array([[5, 0, -3], [1, 3, 9]], np.int32)  # 3 index vectors (dim 0 holds them)
    dn = lax.GatherDimensionNumbers(offset_dims=(0, 1), collapsed_slice_dims=(0,),
                                    start_index_map=(1, 2))
    assert_lowers_like_jax(lambda x, i: lax.gather(x, i, dn, (1, 2, 3), mode=PROMISE), x,
                           np.ascontiguousarray(i.T))
    dn_t = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(0,),
                                      start_index_map=(1, 2))
    x_axis0 = lambda x, i: lax.gather(x, i.T, dn_t, (1, 2, 3), mode=PROMISE)  # noqa: E731
    assert_lowers_like_jax(x_axis0, x, i)


def test_take_along_axis_and_vmap_use_batching_dims():
    x = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    i = np.array([[[0, 3, 1]], [[2, 2, 0]]], np.int32)
    assert_lowers_like_jax(
        lambda x, i: (jnp.take_along_axis(x, i, axis=1),
                      jax.vmap(lambda a, j: a[j])(x, i[:, 0, :2]),
                      jax.vmap(lambda a, j, u: a.at[j].add(u))(x, i[:, 0, :2],
                                                               jnp.ones((2, 2, 3)))),
        x, i)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, ml_dtypes.bfloat16, np.uint8])
def test_scatter_combiners_with_duplicates_and_drops(dtype):
    """Duplicates accumulate (last update wins for set); updates out of range are dropped."""
    x = X.astype(dtype) if dtype != np.uint8 else (X + 4).astype(dtype)
    i = np.array([1, 3, 1, 7, -9, 1], np.int32)
    u = (np.arange(18).reshape(6, 3) % 5 + 1).astype(dtype)
    assert_lowers_like_jax(
        lambda x, i, u: (x.at[i].set(u), x.at[i].add(u), x.at[i].mul(u), x.at[i].min(u),
                         x.at[i].max(u)),
        x, i, u, rtol=1e-2 if dtype == ml_dtypes.bfloat16 else 1e-6)


def test_scatter_bool():
    x = np.array([True, False, False, True, False])
    i = np.array([1, 1, 3, 9, 2], np.int32)
    u = np.array([True, False, False, False, True])
    assert_lowers_like_jax(lambda x, i, u: (x.at[i].set(u), x.at[i].max(u), x.at[i].min(u)),
                           x, i, u)


def test_scatter_window_partly_out_of_range_is_skipped_whole():
    dn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(),
                                     scatter_dims_to_operand_dims=(0,))
    x = np.zeros(6, np.float32)
    i = np.array([[0], [4], [5], [-1], [2]], np.int32)  # windows of 2: [4] fits, [5] does not
    u = np.arange(1, 11, dtype=np.float32).reshape(5, 2)
    assert_lowers_like_jax(
        lambda x, i, u: (lax.scatter_add(x, i, u, dn, mode=PROMISE),
                         lax.scatter(x, i, u, dn, mode=PROMISE, unique_indices=True)),
        x, i, u)


def test_scatter_max_min_propagate_nan():
    x = np.array([1.0, np.nan, 3.0, 4.0], np.float32)
    i = np.array([0, 2, 2, 1, 3], np.int32)
    u = np.array([5.0, np.nan, 0.0, 2.0, -1.0], np.float32)
    assert_lowers_like_jax(lambda x, i, u: (x.at[i].max(u), x.at[i].min(u)), x, i, u)


def test_dynamic_slices_clamp():
    x = np.arange(20, dtype=np.int32).reshape(4, 5)
    for start in (np.int32(-3), np.int32(3), np.int32(1)):
        assert_lowers_like_jax(
            lambda x, s: (lax.dynamic_slice(x, (s, s + 1), (2, 3)),
                          lax.dynamic_update_slice(x, jnp.full((2, 3), -1, jnp.int32),
                                                   (s, s + 2)),
                          lax.dynamic_index_in_dim(x, s, 1)),
            x, start)


def test_symbolic_batch():
    emb = np.arange(40, dtype=np.float32).reshape(10, 4)
    tokens = np.array([[1, 9, 0], [3, 3, 12]], np.int32)
    assert_lowers_like_jax(lambda e, t: e[t], emb, tokens, polymorphic_shapes=[None, "b, 3"])
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    i = np.array([2, 0, 5], np.int32)
    assert_lowers_like_jax(
        lambda x, i: (x[:, i], x.at[i].add(1.0), x.at[:, i].set(-1.0), x[i[0]],
                      lax.dynamic_slice_in_dim(x, i[0], 1),
                      lax.dynamic_update_slice_in_dim(x, x[:1] * 2, i[2], 0),
                      jax.vmap(lambda r, j: r[j])(x, jnp.broadcast_to(i[:1], (x.shape[0],)))),
        x, i, polymorphic_shapes=["b, 3", None])


def test_general_scatter_body_runs_in_order():
    """A body that is no TF scatter (x.at[i].apply(f)) runs update by update, duplicates
    included, in XLA's order."""
    x = np.arange(5, dtype=np.int32)
    i = np.array([1, 3, 1, 9, 1], np.int32)
    assert_lowers_like_jax(lambda x, i: (x.at[i].apply(lambda v: v * 3 - 1),
                                         x.astype(np.float32).at[i].apply(jnp.sin)),
                           x, i, polymorphic_shapes=["b", None])


def test_complex_scatter_max_runs_jax_s_lexicographic_body():
    c = np.array([1 + 1j, 2 - 1j, 0, 3j], np.complex64)
    i = np.array([1, 1, 2], np.int32)
    u = np.array([2 + 1j, 2 - 3j, -1j], np.complex64)
    assert_lowers_like_jax(lambda c, i, u: (c.at[i].max(u), c.at[i].min(u)), c, i, u)
