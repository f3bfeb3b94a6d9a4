"""Memory mappings each converted, compiled function adds to the process (Linux /proc/self/maps).

Run: python tools/count_mappings.py. Converts 45 small distinct functions with ours (default and
with_gradient=False; each called eagerly and through tf.function(jit_compile=True)) and with
jax2tf (tf.function(jit_compile=True) only), and prints mappings per function after 5 of warm-up.
Cited in docs/compat.md (Soak) and docs/guarantees.md (Long runs).
"""
import os, sys, numpy as np, tensorflow as tf, jax, jax.numpy as jnp
import jax2tf_native
def nmaps(): return sum(1 for _ in open("/proc/self/maps"))
def one(i, **kw):
    f = lambda x: jnp.sin(x) * (i + 1.0)
    g = tf.function(jax2tf_native.convert(f, **kw), jit_compile=True, autograph=False)
    g(np.ones((3,), np.float32)).numpy()
    h = jax2tf_native.convert(f, **kw); h(np.ones((3,), np.float32)).numpy()
from jax.experimental import jax2tf
def peer(i):
    f = lambda x: jnp.sin(x) * (i + 1.0)
    g = tf.function(jax2tf.convert(f), jit_compile=True, autograph=False)
    g(np.ones((3,), np.float32)).numpy()
for name, fn in [("ours default", lambda i: one(i)), ("ours no grad", lambda i: one(i, with_gradient=False)), ("peer", peer)]:
    for i in range(5): fn(i)
    a = nmaps()
    for i in range(5, 45): fn(i)
    print(name, (nmaps() - a) / 40, "maps per function")
