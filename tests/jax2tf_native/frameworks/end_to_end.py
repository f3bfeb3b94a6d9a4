"""The checks every framework front door must pass: convert (values at two batch sizes),
TF gradients w.r.t. the trainable Variables equal JAX's, save, reload (trainable split kept),
and `verify` in a process where JAX cannot be imported."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf

import jax2tf_native
import saved_model_tools
from jax2tf_native import frameworks
from saved_model_tools import verify


def _loss_jax(apply, params, args):
    return sum(jnp.sum(jnp.square(leaf.astype(jnp.float32)))
               for leaf in jax.tree.leaves(apply(params, *args)))


def _loss_tf(outputs):
    return tf.add_n([tf.reduce_sum(tf.square(tf.cast(t, tf.float32)))
                     for t in tf.nest.flatten(outputs)])


def _assert_tree_close(got, want, rtol, atol, what):
    got_leaves, want_leaves = tf.nest.flatten(got), jax.tree.leaves(want)
    assert len(got_leaves) == len(want_leaves), what
    for g, w in zip(got_leaves, want_leaves):
        np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32),
                                   rtol=rtol, atol=atol, err_msg=what)


def check_model(tmp_path, model, example_args_by_batch, polymorphic_shapes, *,
                expect_trainable, expect_non_trainable, model_kwargs=None,
                polymorphic_constraints=(), rtol=1e-5, atol=1e-5):
    """Runs every check; `example_args_by_batch` holds the args at two batch sizes.

    Args:
      expect_trainable / expect_non_trainable: Variable names (without ":0") the restored model
        must list as trainable / non-trainable (the framework's own split).
    """
    model_kwargs = model_kwargs or {}
    functional = frameworks.functional_model(model, **model_kwargs)
    jax_apply = jax.jit(functional.apply)  # op-by-op JAX is slow for framework models
    converted = jax2tf_native.convert_model(model, polymorphic_shapes=polymorphic_shapes,
                                            polymorphic_constraints=polymorphic_constraints,
                                            **model_kwargs)
    # convert: eager and tf.function, at both batch sizes, equal JAX's own call.
    for args in example_args_by_batch:
        _assert_tree_close(converted(*args), jax_apply(functional.params, *args), rtol,
                           atol, "eager")
    args = example_args_by_batch[-1]
    _assert_tree_close(tf.function(converted, autograph=False)(*args),
                       jax_apply(functional.params, *args), rtol, atol, "tf.function")
    assert sorted(v.name[:-2] for v in converted.trainable_variables) == sorted(
        expect_trainable)
    assert sorted(v.name[:-2] for v in converted.non_trainable_variables) == sorted(
        expect_non_trainable)

    # gradients: TF tape w.r.t. the trainable Variables == jax.grad w.r.t. those leaves.
    args = example_args_by_batch[0]
    with tf.GradientTape() as tape:
        loss = _loss_tf(converted(*args))
    tf_grads = tape.gradient(loss, converted.variables)
    jax_grad = jax.jit(jax.grad(lambda p: _loss_jax(functional.apply, p, args),
                                allow_int=True))
    jax_grads = jax.tree.leaves(jax_grad(functional.params))
    assert len(jax_grads) == len(converted.variables)
    checked = 0
    for variable, got, want in zip(converted.variables, tf_grads, jax_grads):
        if variable.trainable:
            scale = max(1.0, float(np.max(np.abs(want))))
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4 * scale,
                                       err_msg=variable.name)
            checked += 1
    assert checked == len(expect_trainable)

    # save, reload without the framework's Python objects, verify without JAX.
    path = tmp_path / "model"
    saved_model_tools.save_model(path, model, example_args_by_batch[-1],
                                 polymorphic_shapes=polymorphic_shapes,
                                 polymorphic_constraints=polymorphic_constraints,
                                 **model_kwargs)
    loaded = tf.saved_model.load(str(path))
    assert sorted(v.name[:-2] for v in loaded.trainable_variables) == sorted(expect_trainable)
    assert sorted(v.name[:-2] for v in loaded.non_trainable_variables) == sorted(
        expect_non_trainable)
    serve = loaded.signatures["serving_default"]
    for args in example_args_by_batch:
        inputs = _inputs_by_name(args)
        assert sorted(inputs) == sorted(serve.structured_input_signature[1])
        got = serve(**{k: tf.constant(v) for k, v in inputs.items()})
        _assert_tree_close([got[k] for k in sorted(got)],
                           [np.asarray(v) for _, v in sorted(
                               _outputs_by_name(jax_apply(functional.params, *args))
                               .items())], rtol, atol, "restored signature")
    report = verify.verify(path)
    assert report.ok and report.jax_imported is False, report.format()
    return converted, loaded


def _inputs_by_name(args):
    """The signature's input names -> arrays (save names leaves by key path, in tree order)."""
    from saved_model_tools.write import pytree_inputs
    flat = pytree_inputs.flatten(list(args), [None] * len(args), None)
    return dict(zip(flat.names, flat.arrays))


def _outputs_by_name(result):
    from saved_model_tools.write import signature
    return signature.name_outputs(result, None, "test")
