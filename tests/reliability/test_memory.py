"""Bounded memory: 10,000 eager calls over 50 distinct shapes keep the process RSS bounded.

What is bounded, and the numbers asserted (RSS read from /proc/self/status, VmRSS):

- Each distinct input shape of an eager call costs one export (static shapes: one per shape)
  plus TF's compiled XLA executable for it: measured ~1-4 MB per shape for a tiny function on
  CPU. The exports a converted function keeps are bounded by its LRU,
  `convert(..., cache_size=N)` (default `export_cache.DEFAULT_CACHE_SIZE` = 64), so 50 shapes
  all stay cached by default. We assert the first pass over the 50 shapes grows RSS by less
  than WARMUP_LIMIT_MB (8 MB per shape: a generous ceiling that still catches, say, every
  export keeping its MLIR text and a copy of its arguments many times over).
- Once every shape has been seen, further calls are cache hits that must not grow memory: the
  remaining 9,950 calls may grow RSS by at most STEADY_LIMIT_MB. A leak of 2 KB per call (one
  small tensor kept per call) would add ~20 MB and fail.
- With a cache smaller than the number of shapes (cache_size=4 over 16 shapes, round robin)
  every call evicts one export and makes another. Evicted exports must be freed: weak
  references show that only the 4 exports the LRU holds are alive, and after the first pass
  three more passes (48 more exports) may grow RSS by at most STEADY_LIMIT_MB. (TF keeps its
  own compiled executable per distinct module, and the same shape gives the same module, so
  memory settles after the first pass.)

Results are checked against numpy along the way, so the calls did real work. The functions
are converted with with_gradient=False (inference calls: one export per shape, ~0.7 ms a call);
with gradients each cached entry also holds its residual forward, bounded by the same LRU.
"""
import gc
import weakref

import jax.numpy as jnp
import numpy as np

import jax2tf_native
from jax2tf_native import export_cache

CALLS = 10_000
SHAPES = 50
WARMUP_LIMIT_MB = 8.0 * SHAPES
STEADY_LIMIT_MB = 16.0


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise AssertionError("no VmRSS line in /proc/self/status")


def affine_sin(x):
    # One module-level function for both tests: JAX's tracing caches and TF's executables are
    # then shared, so the second test's exports are fast.
    return jnp.sin(x) * 2.0 + 1.0


def _inputs():
    return [np.linspace(-1, 1, n * 3, dtype=np.float32).reshape(n, 3) for n in range(1, SHAPES + 1)]


def _expected(xs):
    return [np.sin(x) * 2.0 + 1.0 for x in xs]


def test_default_cache_size_is_documented_value():
    assert export_cache.DEFAULT_CACHE_SIZE == 64
    assert jax2tf_native.convert(affine_sin).cache_info["maxsize"] == 64


def test_10000_eager_calls_over_50_shapes_keep_rss_bounded():
    converted = jax2tf_native.convert(affine_sin, with_gradient=False)
    xs = _inputs()
    want = _expected(xs)
    gc.collect()
    start = rss_mb()
    for x, w in zip(xs, want):
        np.testing.assert_allclose(converted(x).numpy(), w, rtol=1e-6, atol=1e-6)
    gc.collect()
    warm = rss_mb()
    assert converted.cache_info["exports"] == SHAPES
    wrong = 0
    for i in range(CALLS - SHAPES):
        k = i % SHAPES
        wrong += not np.allclose(converted(xs[k]).numpy(), want[k], rtol=1e-6, atol=1e-6)
    gc.collect()
    end = rss_mb()
    print(f"RSS: start {start:.1f} MB, after {SHAPES} shapes {warm:.1f} MB "
          f"(+{warm - start:.1f}), after {CALLS} calls {end:.1f} MB (+{end - warm:.1f})")
    assert wrong == 0
    info = converted.cache_info
    assert info == {"call_hits": CALLS - SHAPES, "call_misses": SHAPES, "exports": SHAPES,
                    "size": SHAPES, "maxsize": export_cache.DEFAULT_CACHE_SIZE}, info
    assert warm - start < WARMUP_LIMIT_MB
    assert end - warm < STEADY_LIMIT_MB


def test_evicting_cache_frees_exports():
    """cache_size=4 over 16 shapes, round robin: every call evicts one export and makes one."""
    converted = jax2tf_native.convert(affine_sin, with_gradient=False, cache_size=4)
    xs = _inputs()[:16]
    want = _expected(xs)
    made = []   # weak references to every export the cache ever held

    def one_pass():
        for x, w in zip(xs, want):
            np.testing.assert_allclose(converted(x).numpy(), w, rtol=1e-6, atol=1e-6)
            made.extend(weakref.ref(node) for node in converted._by_export_signature._data.values()
                        if all(r() is not node for r in made))

    one_pass()
    gc.collect()
    settled = rss_mb()
    for _ in range(3):
        one_pass()
    gc.collect()
    end = rss_mb()
    alive = [r for r in made if r() is not None]
    print(f"RSS with cache_size=4 over 16 shapes: {settled:.1f} MB after 1 pass, {end:.1f} MB "
          f"after 4 (+{end - settled:.1f}); {len(made)} exports made, {len(alive)} alive")
    info = converted.cache_info
    assert info["exports"] == 4 * len(xs) and info["call_hits"] == 0, info
    assert info["size"] == 4
    assert len(made) == 4 * len(xs)
    # Only what the LRU still holds survives: evicted exports were freed.
    assert len(alive) == 4
    assert end - settled < STEADY_LIMIT_MB
