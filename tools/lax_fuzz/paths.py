"""Running programs on the three paths: `jax.jit` (the reference), `convert(f)` (one
XlaCallModule op) and `convert(f, enable_xla=False)` (plain TF ops).

Many independent programs are packed into one function (their results one tuple), so that one
export, one XLA compile and one plain trace serve them all; a path that fails on a pack is
re-run on halves until the failing programs stand alone (`attribute`). Checks:
- "value": the programs' results, and "jvp": `jax.jvp` tangents of the programs that have
  them, both outputs of the packed forward function;
- "grad1", "grad2": first- and second-order `tf.GradientTape` gradients with respect to the
  float inputs, against `jax.vjp` (second order: the VJP of the VJP).
Symbolic programs are converted with `polymorphic_shapes` and called in a `tf.function` whose
input signature has None for each symbolic dimension.
"""
from __future__ import annotations

import dataclasses

import jax
import numpy as np
import tensorflow as tf

import jax2tf_native
from tools.lax_fuzz import scales
from tools.lax_fuzz.program import Program

PATHS = ("xla", "plain")
REFUSED = "refused"


@dataclasses.dataclass
class Pack:
    """Programs packed into one function, and where each one's results sit in its tuple."""
    programs: list[Program]

    def forward(self):
        fns = [(p.function(), p) for p in self.programs]

        def packed(*flat):
            outs, at = [], 0
            for fn, p in fns:
                args = flat[at:at + len(p.inputs)]
                at += len(p.inputs)
                outs.extend(fn(*args))
                if p.jvp:
                    tangents = flat[at:at + len(p.float_inputs())]
                    at += len(tangents)
                    by_name = dict(zip(p.inputs, args))
                    primals = [by_name[k] for k in p.float_inputs()]
                    outs.extend(jax.jvp(_with_fixed(p, args), primals, list(tangents))[1])
            return tuple(outs)
        return packed

    def forward_args(self) -> list[np.ndarray]:
        flat = []
        for p in self.programs:
            flat.extend(p.inputs.values())
            if p.jvp:
                flat.extend(p.tangents)
        return flat

    def forward_specs(self) -> list[str | None]:
        specs = []
        for k, p in enumerate(self.programs):
            shapes = p.polymorphic_shapes(prefix=f"p{k}")
            specs.extend(shapes)
            if p.jvp:
                specs.extend(s for name, s in zip(p.inputs, shapes) if name in p.float_inputs())
        return specs

    def split_forward(self, outs) -> list[dict[str, list]]:
        """Per program: {"value": [...], "jvp": [...]} out of the packed results."""
        per, at = [], 0
        for p in self.programs:
            n = len(p.outputs)
            entry = {"value": list(outs[at:at + n])}
            at += n
            if p.jvp:
                m = sum(o.differentiable for o in p.outputs)
                entry["jvp"] = list(outs[at:at + m])
                at += m
            per.append(entry)
        return per

    # ------------------------------------------------------------ gradients
    def primal(self):
        """The float32/64 outputs of the gradient programs as a function of all their inputs
        (derivatives are taken for the float ones, `is_float` marks them)."""
        fns = [(p.function(), p) for p in self.programs]

        def packed(*flat):
            outs, at = [], 0
            for fn, p in fns:
                results = fn(*flat[at:at + len(p.inputs)])
                at += len(p.inputs)
                outs.extend(r for r, o in zip(results, p.outputs) if o.differentiable)
            return tuple(outs)
        return packed

    def primal_args(self) -> list[np.ndarray]:
        return [a for p in self.programs for a in p.inputs.values()]

    def is_float(self) -> list[bool]:
        return [name in p.float_inputs() for p in self.programs for name in p.inputs]

    def primal_specs(self) -> list[str | None]:
        return [s for k, p in enumerate(self.programs)
                for s in p.polymorphic_shapes(prefix=f"p{k}")]

    def split_inputs(self, flat) -> list[list]:
        """The gradients (one per float input, in order) split per program."""
        per, at = [], 0
        for p in self.programs:
            n = len(p.float_inputs())
            per.append(list(flat[at:at + n]))
            at += n
        return per


def _with_fixed(p: Program, args):
    """`p.float_function()` takes the program's own fixed (non-float) inputs from its values;
    in a pack they are the packed function's arguments instead."""
    names = list(p.inputs)
    floats = p.float_inputs()
    fn = p.function()
    keep = [i for i, o in enumerate(p.outputs) if o.differentiable]

    def restricted(*xs):
        by_name = dict(zip(names, args))
        by_name.update(zip(floats, xs))
        outs = fn(*[by_name[n] for n in names])
        return tuple(outs[i] for i in keep)
    return restricted


def _numpy(tensors) -> list[np.ndarray]:
    # .numpy() first: np.asarray of a 0-d bfloat16 EagerTensor raises in TF 2.21.
    return [np.asarray(t.numpy() if hasattr(t, "numpy") else t) for t in tensors]


def _signature(args, specs) -> list[tf.TensorSpec]:
    out = []
    for a, spec in zip(args, specs):
        shape = list(a.shape)
        if spec:
            dims = [d.strip() for d in spec.strip("()").split(",") if d.strip()]
            shape = [s if d.isdigit() else None for d, s in zip(dims, shape)]
        out.append(tf.TensorSpec(shape, tf.as_dtype(a.dtype)))
    return out


def _caller(fn, args, specs, polymorphic: bool):
    if not polymorphic:
        return fn
    return tf.function(fn, input_signature=_signature(args, specs), autograph=False)


def _convert(fn, path: str, specs, polymorphic: bool):
    return jax2tf_native.convert(fn, enable_xla=path == "xla",
                                 polymorphic_shapes=specs if polymorphic else None)


def run_forward(pack: Pack, path: str) -> list[dict[str, list]]:
    """The packed forward results on `path` ("jit", "xla" or "plain"), split per program.
    On "jit", also each result's magnitude companion (None where it has none; they size the
    tolerated reassociations, docs/exactness.md), computed in the same compiled function."""
    args = pack.forward_args()
    fn = pack.forward()
    if path == "jit":
        return _reference_forward(pack, args)
    polymorphic = any(p.polymorphic for p in pack.programs)
    specs = pack.forward_specs()
    converted = _convert(fn, path, specs, polymorphic)
    call = _caller(converted, args, specs, polymorphic)
    return pack.split_forward(_numpy(call(*[tf.constant(a) for a in args])))


def _reference_forward(pack: Pack, args) -> list[dict]:
    """`jax.jit`'s results, each result's magnitude companion (None where it has none; they
    size the tolerated reassociations, docs/exactness.md), the jvp tangents and their scale
    (`scales.largest_term`), in one compiled function."""
    parts = [(p.function(), p.function(mags=True), p) for p in pack.programs]

    def reference(*flat):
        per, at = [], 0
        for fn, mags_fn, p in parts:
            inputs = flat[at:at + len(p.inputs)]
            at += len(p.inputs)
            entry = {"value": fn(*inputs), "mags": mags_fn(*inputs)}
            if p.jvp:
                tangents = flat[at:at + len(p.float_inputs())]
                at += len(tangents)
                by_name = dict(zip(p.inputs, inputs))
                primals = [by_name[k] for k in p.float_inputs()]
                g, n = _with_fixed(p, inputs), len(primals)
                entry["jvp"], entry["jvp_scale"] = scales.largest_term(
                    lambda *ab, g=g, n=n: jax.jvp(g, ab[:n], ab[n:])[1], *primals, *tangents)
            per.append(entry)
        return per
    per = jax.jit(reference)(*args)
    return [{key: (float(v) if key == "jvp_scale" else
                   [None if x is None else np.asarray(x) for x in v])
             for key, v in entry.items()} for entry in per]


def run_gradients(pack: Pack, path: str, order: int) -> list:
    """Per program, the gradients (order 1 or 2) with respect to its float inputs; on "jit",
    per program {"grads": [...], "scale": the largest term, `scales.largest_term`}."""
    args = pack.primal_args()
    is_float = pack.is_float()
    fn = pack.primal()
    cts = [c for p in pack.programs for c in p.cts]
    cts2 = [c for p in pack.programs for c in p.cts2]
    if path == "jit":
        return _reference_gradients(pack, args, order)
    polymorphic = any(p.polymorphic for p in pack.programs)
    specs = pack.primal_specs()
    converted = _convert(fn, path, specs, polymorphic)
    ct_tensors = [tf.constant(c) for c in cts]
    ct2_tensors = [tf.constant(c) for c in cts2]

    def tf_grads(*flat):
        xs = [x for x, f in zip(flat, is_float) if f]
        with tf.GradientTape(watch_accessed_variables=False) as outer:
            outer.watch(xs)
            with tf.GradientTape(watch_accessed_variables=False) as inner:
                inner.watch(xs)
                outs = converted(*flat)
            grads = inner.gradient(list(outs), xs, output_gradients=ct_tensors)
            grads = [tf.zeros_like(x) if g is None else g for g, x in zip(grads, xs)]
        if order == 1:
            return grads
        second = outer.gradient(grads, xs, output_gradients=ct2_tensors)
        return [tf.zeros_like(x) if g is None else g for g, x in zip(second, xs)]

    call = _caller(tf_grads, args, specs, polymorphic)
    return pack.split_inputs(_numpy(call(*[tf.constant(a) for a in args])))


def _reference_gradients(pack: Pack, args, order: int) -> list[dict]:
    parts = [(p.function(), p) for p in pack.programs]

    def reference(*flat):
        per, at = [], 0
        for fn, p in parts:
            inputs = flat[at:at + len(p.inputs)]
            at += len(p.inputs)
            by_name = dict(zip(p.inputs, inputs))
            floats = [by_name[k] for k in p.float_inputs()]
            g = _with_fixed(p, inputs)

            def first(*xs, g=g, p=p):
                return jax.vjp(g, *xs)[1](tuple(p.cts))
            if order == 1:
                grads, scale = scales.largest_term(first, *floats)
            else:
                grads, scale = scales.largest_term(
                    lambda *xs, first=first, p=p: jax.vjp(first, *xs)[1](tuple(p.cts2)),
                    *floats)
            per.append({"grads": grads, "scale": scale})
        return per
    per = jax.jit(reference)(*args)
    return [{"grads": [np.asarray(x) for x in e["grads"]], "scale": float(e["scale"])}
            for e in per]


def is_refusal(exc: BaseException) -> bool:
    """A conversion-time refusal with our error (the contract's "refused at conversion")."""
    return isinstance(exc, jax2tf_native.PlainLoweringError)


def attribute(run, programs: list[Program]):
    """Runs `run(pack)` on all programs at once; where it raises, on halves, down to single
    programs. Returns (per-program results or None, per-program exception or None)."""
    if not programs:
        return [], []
    try:
        results = run(Pack(programs))
        return list(results), [None] * len(programs)
    except Exception as exc:  # narrowed below: which program raised
        if len(programs) == 1:
            return [None], [exc]
    half = len(programs) // 2
    left = attribute(run, programs[:half])
    right = attribute(run, programs[half:])
    return left[0] + right[0], left[1] + right[1]
