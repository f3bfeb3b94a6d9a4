"""A mismatch as a standalone script: the program, its inputs, `jax.jit` and the converted
function on the failing path and check, and the contract's comparison of the two."""
from __future__ import annotations

from tools.lax_fuzz.check import Mismatch
from tools.lax_fuzz.program import Program, array_source

_HEADER = '''"""lax_fuzz reproducer ({title}).

{path_name} vs jax.jit, {check} check, {kind}: {detail}
Run: python {{this file}} (prints both results and the contract's verdict).
"""
import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf
from jax import lax

import jax2tf_native
from tf_ops import exactness

{x64}inf, nan = np.inf, np.nan


def complex_array(real, imag):
    z = np.empty(real.shape, np.result_type(real.dtype, np.complex64))
    z.real, z.imag = real, imag
    return z


def wide(x):  # magnitudes (for the contract's scale), in the widest float enabled
    return jnp.abs(x).astype(jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)


'''

_PATH_NAMES = {"xla": "convert(f) (XlaCallModule)", "plain": "convert(f, enable_xla=False)"}


def script(program: Program, mismatch: Mismatch, title: str) -> str:
    """The reproducer's source text."""
    text = _HEADER.format(
        title=title, path_name=_PATH_NAMES.get(mismatch.path, mismatch.path),
        check=mismatch.check, kind=mismatch.kind, detail=mismatch.detail,
        x64='jax.config.update("jax_enable_x64", True)\n' if program.x64 else "")
    text += program.source("f") + "\n\n"
    text += program.source("f_scale", mags=True) + "\n\n"
    text += "args = [\n" + "".join(f"    {array_source(v)},  # {k}\n"
                                   for k, v in program.inputs.items()) + "]\n"
    shapes = program.polymorphic_shapes()
    options = [f"enable_xla={mismatch.path != 'plain'}"]
    if program.polymorphic:
        options.append(f"polymorphic_shapes={shapes!r}")
    if mismatch.check != "value":
        return text + _derivative(program, mismatch.check, mismatch.path != "plain")
    text += f"converted = jax2tf_native.convert(f, {', '.join(options)})\n"
    if program.polymorphic:
        text += ("signature = [tf.TensorSpec([None if not d.strip().isdigit() else int(d) for "
                 "d in s.strip('()').split(',') if d.strip()] if s else a.shape, "
                 "tf.as_dtype(a.dtype)) for s, a in zip(" + repr(shapes) + ", args)]\n")
    families = [o.families for o in program.outputs]
    text += _call(program, "converted")
    text += (f"want = jax.jit(f)(*args)\nscales = jax.jit(f_scale)(*args)\n"
             f"families = {families!r}\n"
             "for w, g, s, fam in zip(want, got, scales, families):\n"
             "    w, g = np.asarray(w), np.asarray(g)\n"
             "    print('jax.jit:', w)\n    print('converted:', g)\n"
             "    print(exactness.compare(g, w, exactness.tolerance(*fam), "
             "None if s is None else np.asarray(s)).detail or 'equal under the contract')\n")
    return text


def _call(program: Program, fn: str) -> str:
    if program.polymorphic:
        return (f"call = tf.function({fn}, input_signature=signature, autograph=False)\n"
                "got = [t.numpy() for t in call(*[tf.constant(a) for a in args])]\n")
    return f"got = [t.numpy() for t in {fn}(*[tf.constant(a) for a in args])]\n"


def _derivative(program: Program, check: str, enable_xla: bool) -> str:
    floats = program.float_inputs()
    names = list(program.inputs)
    keep = [i for i, o in enumerate(program.outputs) if o.differentiable]
    positions = [names.index(k) for k in floats]
    text = (f"FLOATS = {positions}  # the arguments derivatives are taken for\n"
            f"KEEP = {keep}  # the float32/64 results\n\n\n"
            "def g(*xs):  # f of its float arguments, the others fixed\n"
            "    full = list(args)\n"
            "    for i, x in zip(FLOATS, xs):\n        full[i] = x\n"
            "    outs = f(*full)\n    return tuple(outs[i] for i in KEEP)\n\n\n"
            "primals = [args[i] for i in FLOATS]\n")
    text += "tangents = [\n" + "".join(f"    {array_source(t)},\n" for t in program.tangents)
    text += "]\ncts = [\n" + "".join(f"    {array_source(c)},\n" for c in program.cts)
    text += "]\ncts2 = [\n" + "".join(f"    {array_source(c)},\n" for c in program.cts2) + "]\n"
    if check == "jvp":
        text += ("want = jax.jit(lambda *a: jax.jvp(g, a[:len(a) // 2], a[len(a) // 2:])[1])"
                 "(*primals, *tangents)\n"
                 "converted = jax2tf_native.convert(lambda *a: jax.jvp(g, a[:len(a) // 2], "
                 "a[len(a) // 2:])[1], enable_xla=ENABLE_XLA)\n"
                 "got = [t.numpy() for t in converted(*[tf.constant(a) for a in primals + "
                 "tangents])]\n")
    else:
        order = int(check[-1])
        text += ("first = lambda *xs: jax.vjp(g, *xs)[1](tuple(cts))\n"
                 + ("want = jax.jit(first)(*primals)\n" if order == 1 else
                    "want = jax.jit(lambda *xs: jax.vjp(first, *xs)[1](tuple(cts2)))(*primals)\n")
                 + "converted = jax2tf_native.convert(g, enable_xla=ENABLE_XLA)\n"
                 "xs = [tf.constant(p) for p in primals]\n"
                 "with tf.GradientTape() as outer:\n    outer.watch(xs)\n"
                 "    with tf.GradientTape() as inner:\n        inner.watch(xs)\n"
                 "        outs = converted(*xs)\n"
                 "    grads = inner.gradient(list(outs), xs, output_gradients=[tf.constant(c) "
                 "for c in cts])\n"
                 "    grads = [tf.zeros_like(x) if d is None else d for d, x in zip(grads, xs)]\n")
        if order == 2:
            text += ("grads = outer.gradient(grads, xs, output_gradients=[tf.constant(c) for c in "
                     "cts2])\ngrads = [tf.zeros_like(x) if d is None else d "
                     "for d, x in zip(grads, xs)]\n")
        text += "got = [d.numpy() for d in grads]\n"
    text += ("for w, g_ in zip(want, got):\n    w = np.asarray(w)\n"
             "    print('jax:', w)\n    print('converted:', g_)\n"
             "    scale = float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0))\n"
             "    print(exactness.compare(g_, w, exactness.tolerance('derivative'), scale).detail"
             " or 'equal under the contract')\n")
    return text.replace("ENABLE_XLA", str(enable_xla))
