"""lax_fuzz reproducer (TF's XLA: max/min drop NaN (fast min/max)).

convert(f) (XlaCallModule) vs jax.jit, jvp check, value: 1 element(s) outside the bound; worst at (): got -0.25, expected 0 (1.78e+44 ulps)
Run: python {this file} (prints both results and the contract's verdict).
"""
import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf
from jax import lax

import jax2tf_native
from tf_ops import exactness

inf, nan = np.inf, np.nan


def complex_array(real, imag):
    z = np.empty(real.shape, np.result_type(real.dtype, np.complex64))
    z.real, z.imag = real, imag
    return z


def wide(x):  # magnitudes (for the contract's scale), in the widest float enabled
    return jnp.abs(x).astype(jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)


def f(x0):
    v1 = lax.log(x0)
    v3 = lax.max(x0, v1)
    return (v3,)


def f_scale(x0):
    v1 = lax.log(x0)
    v3 = lax.max(x0, v1)
    return (None,)


args = [
    np.array(-2.5, np.float32),  # x0
]
FLOATS = [0]  # the arguments derivatives are taken for
KEEP = [0]  # the float32/64 results


def g(*xs):  # f of its float arguments, the others fixed
    full = list(args)
    for i, x in zip(FLOATS, xs):
        full[i] = x
    outs = f(*full)
    return tuple(outs[i] for i in KEEP)


primals = [args[i] for i in FLOATS]
tangents = [
    np.array(-0.25, np.float32),
]
cts = [
    np.array(0.25, np.float32),
]
cts2 = [
    np.array(0.5, np.float32),
]
want = jax.jit(lambda *a: jax.jvp(g, a[:len(a) // 2], a[len(a) // 2:])[1])(*primals, *tangents)
converted = jax2tf_native.convert(lambda *a: jax.jvp(g, a[:len(a) // 2], a[len(a) // 2:])[1], enable_xla=True)
got = [t.numpy() for t in converted(*[tf.constant(a) for a in primals + tangents])]
for w, g_ in zip(want, got):
    w = np.asarray(w)
    print('jax:', w)
    print('converted:', g_)
    scale = float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0))
    print(exactness.compare(g_, w, exactness.tolerance('derivative'), scale).detail or 'equal under the contract')
