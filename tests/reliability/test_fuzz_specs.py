"""Fuzzing `polymorphic_shapes` with hypothesis.

1. Random shape strings and pytrees of specs against random argument pytrees and shapes: the
   converted function either returns JAX's result, or raises a ValueError/TypeError (normally
   one of jax2tf_native.errors) with a short message; never IndexError, KeyError,
   AssertionError, a TF/XLA error or a crash. Examples generated consistent (no mutation) must
   succeed.
2. Random concrete shapes through one polymorphic converted function, eagerly and inside a
   tf.function with a None-dimension input_signature, equal JAX's results; shapes that break
   the spec fail with our error naming the dimension variable.

Reproducible: derandomize=True (examples derived from the test itself, no database) and a
bounded number of examples, so CI sees the same cases every run.
"""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jax2tf_native
from jax2tf_native import errors
from tests.conftest import assert_tree_allclose

FUZZ_SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                         suppress_health_check=[HealthCheck.too_slow,
                                                HealthCheck.data_too_large],
                         print_blob=True)
VARIABLES = ("a", "b", "c")
GARBAGE = ["", "(", ")", "b!", "a a", "1.5", "-1", "0", "a*b", "max(a, 2)", "a // 2",
           "mod(a, 3)", "a^2", "?", "None", "...", "a,,b", "[a]", "a - 5", "-a", "2*", "a+b"]
# The errors a bad spec may end in: our own (ValueError/TypeError subclasses) first; JAX's
# ValueError for specs JAX itself cannot solve (e.g. "max(a, b)" as the only use of `a`).
ALLOWED = (ValueError, TypeError)
MUTATIONS = ["shape", "drop_entry", "add_entry", "garbage", "prefix_short", "prefix_long",
             "leaf_type", "dict_key", "single_string", "arg_type"]
RAW_DUMP = re.compile(r"stablehlo\.|func\.func|module @|Traceback")


def fuzz_fun(*args):
    """Elementwise per leaf, a reduction, and a concatenation whose size is a polynomial in the
    dimension variables: valid for any shapes, and sensitive to every dimension."""
    leaves = jax.tree_util.tree_leaves(args)
    flat = jnp.concatenate([jnp.reshape(x, (-1,)) for x in leaves])
    return {"each": jax.tree.map(lambda x: jnp.sin(x) * 2.0 + jnp.sum(x), args),
            "flat": jnp.cumsum(flat)}


@st.composite
def dimension(draw, env):
    """(spec entry, actual size) consistent with the dimension variables `env`."""
    kind = draw(st.sampled_from(["const", "known", "var", "var", "twice", "plus_one"]))
    var = draw(st.sampled_from(VARIABLES))
    if kind == "const":
        size = draw(st.integers(1, 4))
        return str(size), size
    if kind == "known":
        return "_", draw(st.integers(1, 4))
    if kind == "var":
        return var, env[var]
    if kind == "twice":
        return f"2*{var}", 2 * env[var]
    return f"{var} + 1", env[var] + 1


@st.composite
def leaf(draw, env):
    """(spec string or None, shape) of one array."""
    rank = draw(st.sampled_from([2, 1, 3, 0]))
    entries = [draw(dimension(env)) for _ in range(rank)]
    shape = [size for _, size in entries]
    texts = [text for text, _ in entries]
    if texts and draw(st.booleans()):
        # Trailing known dimensions may be written as "...".
        keep = draw(st.integers(0, len(texts) - 1))
        texts = texts[:keep] + ["..."]
    if draw(st.integers(0, 4)) == 0:
        return None, tuple(shape)
    text = ", ".join(texts)
    if not texts or draw(st.booleans()):
        text = f"({text})"
    return text, tuple(shape)


@st.composite
def case(draw, mutation):
    """Arguments and polymorphic_shapes, consistent, then changed by `mutation`."""
    env = {v: draw(st.integers(1, 3)) for v in VARIABLES}
    args, specs = [], []
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            spec, shape = draw(leaf(env))
            args.append(shape)
            specs.append(spec)
        elif draw(st.booleans()):
            (sp, p), (sq, q) = draw(leaf(env)), draw(leaf(env))
            args.append({"p": p, "q": q})
            specs.append({"p": sp, "q": sq})
        else:
            spec, shape = draw(leaf(env))   # one string for the whole dict: same spec for both
            args.append({"p": shape, "q": shape})
            specs.append(spec)
    if mutation == "dict_key" and not any(isinstance(s, dict) for s in specs):
        mutation = "garbage"
    if mutation in ("drop_entry", "add_entry", "garbage", "leaf_type") and not _string_paths(specs):
        mutation = "prefix_long"
    args, specs = _mutate(draw, mutation, args, specs)
    seed = draw(st.integers(0, 2**16))
    return args, specs, seed


def _paths(tree):
    return [p for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]


def _set(tree, path, value):
    if not path:
        return value
    key = path[0].key if hasattr(path[0], "key") else path[0].idx
    copy = dict(tree) if isinstance(tree, dict) else list(tree)
    copy[key] = _set(copy[key], path[1:], value)
    return copy


def _string_paths(specs):
    found = jax.tree_util.tree_flatten_with_path(specs, is_leaf=lambda x: x is None)[0]
    return [p for p, s in found if isinstance(s, str)]


def _mutate(draw, mutation, args, specs):
    shape_paths = jax.tree_util.tree_flatten_with_path(
        args, is_leaf=lambda x: isinstance(x, tuple))[0]
    if mutation == "shape":
        ranked = [(p, s) for p, s in shape_paths if s] or shape_paths
        path, shape = draw(st.sampled_from(ranked))
        if shape:
            i = draw(st.integers(0, len(shape) - 1))
            shape = shape[:i] + (shape[i] + draw(st.sampled_from([-1, 1, 2])),) + shape[i + 1:]
            shape = tuple(max(d, 0) for d in shape)
        else:
            shape = (2,)
        args = _set(args, path, shape)
    elif mutation in ("drop_entry", "add_entry", "garbage", "leaf_type"):
        paths = _string_paths(specs)
        if paths:
            path = draw(st.sampled_from(paths))
            spec = _get(specs, path)
            body = spec.strip("()")
            entries = [e.strip() for e in body.split(",")] if body.strip() else []
            if mutation == "leaf_type":
                new = draw(st.sampled_from([3, b"b", 2.5, object()]))
            elif mutation == "drop_entry" and entries:
                entries.pop(draw(st.integers(0, len(entries) - 1)))
                new = ", ".join(entries)
            elif mutation in ("drop_entry", "add_entry"):
                entries.insert(draw(st.integers(0, len(entries))), draw(st.sampled_from(
                    ["a", "2", "_", "b + 1"])))
                new = ", ".join(entries)
            else:
                token = draw(st.sampled_from(GARBAGE))
                if entries:
                    entries[draw(st.integers(0, len(entries) - 1))] = token
                    new = "(" + ", ".join(entries) + ")"
                else:
                    new = token
            specs = _set(specs, path, new)
    elif mutation == "prefix_short":
        specs = specs[:-1]
    elif mutation == "prefix_long":
        specs = specs + ["b"]
    elif mutation == "dict_key":
        dict_positions = [i for i, s in enumerate(specs) if isinstance(s, dict)]
        if dict_positions:
            i = draw(st.sampled_from(dict_positions))
            specs = list(specs)
            specs[i] = {"p": specs[i]["p"], "r": specs[i]["q"]}
    elif mutation == "single_string":
        specs = draw(st.sampled_from(["b, ...", "(b, _)", "...", "b"]))
    elif mutation == "arg_type":
        path, _ = draw(st.sampled_from(shape_paths))
        args = _set(args, path, draw(st.sampled_from(["text", "object"])))
    return args, specs


def _get(tree, path):
    for entry in path:
        tree = tree[entry.key if hasattr(entry, "key") else entry.idx]
    return tree


def _materialize(args, seed):
    rng = np.random.default_rng(seed)

    def make(shape):
        if shape == "text":
            return "not an array"
        if shape == "object":
            return object()
        return rng.standard_normal(shape).astype(np.float32)

    return jax.tree.map(make, args, is_leaf=lambda x: isinstance(x, (tuple, str)))


def _run_case(fuzz_case, mutation):
    shapes, specs, seed = fuzz_case
    args = _materialize(shapes, seed)
    try:
        got = jax2tf_native.convert(fuzz_fun, polymorphic_shapes=specs,
                                    with_gradient=False)(*args)
    except ALLOWED as e:
        message = str(e)
        assert mutation != "none", f"a consistent case failed: {type(e).__name__}: {message}"
        assert not RAW_DUMP.search(message), message[:3000]
        assert len(message) < 2000, message[:3000]
        if not isinstance(e, (errors.PolymorphicShapeError, errors.ArgumentShapeError,
                              errors.ArgumentTypeError)):
            # Only JAX's own refusal of a spec it cannot solve may come unwrapped.
            assert "dimension variable" in message, f"{type(e).__name__}: {message}"
        return
    assert_tree_allclose(got, fuzz_fun(*args), rtol=1e-5, atol=1e-5)


@settings(FUZZ_SETTINGS, max_examples=20)
@given(fuzz_case=case("none"))
def test_consistent_random_specs_and_pytrees_equal_jax(fuzz_case):
    _run_case(fuzz_case, "none")


@pytest.mark.parametrize("mutation", MUTATIONS)
@settings(FUZZ_SETTINGS, max_examples=5)
@given(data=st.data())
def test_mutated_specs_give_jax_result_or_clear_value_or_type_error(mutation, data):
    # Any other exception (IndexError, KeyError, AssertionError, TF's InvalidArgumentError from
    # the XLA op, InconclusiveDimensionOperation...) propagates and fails the test.
    _run_case(data.draw(case(mutation)), mutation)


# ----------------------------------------------------------------------------------------------
# Random concrete shapes through one polymorphic function.

POLY_SPECS = ["(b, n)", "(n, 2)"]


def poly_fun(x, y):
    return {"mm": jnp.tanh(x @ y), "flat": jnp.reshape(x, (-1,)) * 3.0,
            "pad": jnp.concatenate([x, x[:, :1]], axis=1), "total": jnp.sum(x) + jnp.sum(y)}


@pytest.fixture(scope="module")
def poly_converted():
    converted = jax2tf_native.convert(poly_fun, polymorphic_shapes=POLY_SPECS)
    examples = [np.zeros((1, 1), np.float32), np.zeros((1, 2), np.float32)]
    graph = tf.function(converted, autograph=False,
                        input_signature=jax2tf_native.input_signature(examples, POLY_SPECS))
    return converted, graph


@settings(FUZZ_SETTINGS, max_examples=40)
@given(b=st.integers(1, 9), n=st.integers(1, 9), seed=st.integers(0, 2**16),
       y_rows_delta=st.sampled_from([0, 0, 0, 1, -1]))
def test_random_concrete_shapes_match_jax_eagerly_and_in_tf_function(poly_converted, b, n,
                                                                     seed, y_rows_delta):
    converted, graph = poly_converted
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((b, n)).astype(np.float32)
    y = rng.standard_normal((max(n + y_rows_delta, 1), 2)).astype(np.float32)
    if y.shape[0] == n:
        want = poly_fun(x, y)
        assert_tree_allclose(converted(x, y), want, rtol=1e-5, atol=1e-5)
        assert_tree_allclose(graph(x, y), want, rtol=1e-5, atol=1e-5)
        return
    with pytest.raises(errors.ArgumentShapeError, match=r"args\[1\]\.shape\[0\] = \d+.*`n`"):
        converted(x, y)
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        graph(x, y)
    assert "variable `n`" in info.value.message and not RAW_DUMP.search(info.value.message)
    # One trace serves every shape.
    assert graph.experimental_get_tracing_count() == 1
