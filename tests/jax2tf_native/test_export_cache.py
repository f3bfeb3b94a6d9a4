"""The eager export cache: reuse per abstract signature, config in the key, bounded, thread-safe."""
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

import jax2tf_native
from jax2tf_native.export_cache import LruCache


def test_repeated_calls_reuse_the_export(rng):
    f_tf = jax2tf_native.convert(lambda x: jnp.sin(x) * 2)
    x = rng.standard_normal(5).astype(np.float32)
    for _ in range(5):
        np.testing.assert_allclose(f_tf(x).numpy(), np.sin(x) * 2, rtol=1e-6)
    info = f_tf.cache_info
    assert info["exports"] == 1 and info["call_hits"] == 4
    f_tf(np.ones(6, np.float32))  # new static shape: a new export
    f_tf(np.ones(5, np.int32))    # new dtype: a new export
    assert f_tf.cache_info["exports"] == 3


def test_config_is_part_of_the_key():
    f_tf = jax2tf_native.convert(lambda x: x * 2)
    x = np.ones(3, np.float64)
    assert f_tf(x).dtype == tf.float32
    with jax.enable_x64(True):
        assert f_tf(x).dtype == tf.float64
    assert f_tf(x).dtype == tf.float32
    assert f_tf.cache_info["exports"] == 2


def test_cache_is_bounded():
    f_tf = jax2tf_native.convert(lambda x: x + 1, cache_size=3)
    for n in range(1, 8):
        np.testing.assert_allclose(f_tf(np.zeros(n, np.float32)).numpy(), np.ones(n))
    assert f_tf.cache_info["size"] == 3
    with pytest.raises(ValueError, match="positive int"):
        LruCache(0)


def test_lru_evicts_least_recent():
    cache = LruCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3


def test_threads_share_one_cache_safely(rng):
    f_tf = jax2tf_native.convert(lambda x: jnp.cos(x) - x, polymorphic_shapes=["b"])
    inputs = [rng.standard_normal(n).astype(np.float32) for n in range(1, 9)]
    failures = []

    def work(i):
        for j in range(10):
            x = inputs[(i + j) % len(inputs)]
            got = f_tf(x).numpy()
            if not np.allclose(got, np.cos(x) - x, rtol=1e-6, atol=1e-6):
                failures.append((i, j))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert f_tf.cache_info["exports"] <= 4  # one symbolic export, at most raced a few times
