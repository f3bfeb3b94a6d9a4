"""`save`: a JAX function and its parameters as a SavedModel for TF Serving, in one call."""
from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import jax
import numpy as np
import tensorflow as tf

import jax2tf_native
from jax2tf_native import tf_variables
from jax2tf_native.errors import first_line
from saved_model_tools import atomic_dir, manifest
from saved_model_tools.write import progress as progress_lines
from saved_model_tools.write import pytree_inputs, records, references, traced_signature
from saved_model_tools.write import signature as signature_lib
from saved_model_tools.write.signature import Signature
from tf_ops import tf_targets
from tf_ops.plain import op_sources

DEFAULT_SIGNATURE = "serving_default"


class _ModelRoot(tf.Module):
    """The SavedModel's root object: Variables and signature functions as attributes."""
    # Plain attributes shadowing tf.Module's properties, so that they are saved as tracked
    # lists and the root restored by tf.saved_model.load (a generic object) still has them.
    variables = None
    trainable_variables = None
    non_trainable_variables = None


def save(export_dir: str | os.PathLike, fn: Callable, params: Any, example_args: Sequence[Any],
         *, polymorphic_shapes=None, input_names: Sequence[str] | None = None,
         output_names: Sequence[str] | None = None,
         signatures: Sequence[Signature] | None = None, with_gradient: bool = True,
         gradient_mode: str = "recompute", input_gradients: bool = True,
         platforms: Sequence[str] | None = None,
         jit_compile: bool | None = None, overwrite: bool = False,
         progress: Callable[[str], None] | None = None,
         polymorphic_constraints: Sequence[str] = (), stablehlo_version: str | None = None,
         linalg: str = "portable", trainable: Any = None,
         target_tf: str | None = None, enable_xla: bool = True) -> manifest.Manifest:
    """Writes `fn(params, *args)` as a SavedModel for TF Serving.

    `params` become `tf.Variable`s named by pytree path (stored in the checkpoint, never as
    constants, so the graph stays small whatever the parameter size). The `serving_default`
    signature has named inputs and outputs and the polymorphic batch; `signatures` add entry
    points sharing the Variables. Reference inputs with JAX's outputs and TF Serving warmup
    requests are recorded in `assets.extra/`. The directory appears atomically: a failure (or a
    killed process) leaves nothing, or the complete previous model.

    Args:
      export_dir: the SavedModel directory (e.g. ".../models/mnist/1" for TF Serving).
      fn: the JAX function, called as `fn(params, *args)`.
      params: a pytree of arrays, held once while saving: as the Variables (a CPU
        `jax.Array`'s buffer is shared with its Variable, numpy arrays are copied into TF's;
        JAX's reference outputs read the Variables' buffers). A leaf may be a function
        returning the array, called when its Variable is made: for parameters that do not
        fit in memory twice, e.g. `lambda: np.load("w.npy")` (docs/large_models.md).
      example_args: one example per argument after params: an array, or a pytree (dict,
        list) of arrays whose leaves become inputs named by key path (`token_ids`).
      polymorphic_shapes: one spec per argument (e.g. ["(b, 28, 28, 1)"]; for a pytree
        argument a string for every leaf or a pytree prefix of it) or one string for all.
      input_names: names of the inputs; default "input_0", "input_1", ... (for a pytree
        argument, the prefix of its leaves' names).
      output_names: names of the outputs unless `fn` returns a dict (whose keys are kept).
      signatures: further `Signature`s (other functions, pre/post-processing).
      with_gradient: keep gradients (a TF-only process can fine-tune the Variables).
      gradient_mode: "recompute" (default: the serving forward computes only the outputs) or
        "residuals" (forward also stores VJP residuals: faster gradients, ~10% slower serving).
      input_gradients: whether the inputs take gradients too (e.g. for saliency maps). False
        keeps the parameters' gradients only (`gradient_argnums=0`): fine-tuning then skips
        the inputs' cotangent, which for a convolution costs as much as the rest; a gradient
        w.r.t. an input is None.
      platforms: lowering platforms, e.g. ("cpu", "cuda"); default the JAX backend.
      jit_compile: compile each signature as one XLA cluster (measured 4-11% faster serving:
        fewer TF executor steps around the module). Pass False if a pre/post-processing
        function uses TF ops XLA cannot compile (e.g. string ops). Default (None): True, or
        False with `enable_xla=False`.
      overwrite: replace an existing directory (only once the new model is complete).
      progress: called with one line per phase (trace/export, references, write, commit);
        for 64 MiB of parameters or more also "  Variables: i/n made" and "  checkpoint: X of
        Y MiB written" lines, at most one per 2 s (the latter from a thread of save's).
      polymorphic_constraints: as for `jax2tf_native.convert`, e.g. ["t <= 64"] for a model
        slicing a learned position embedding by the sequence length.
      stablehlo_version: as for `convert`: the StableHLO version of the serving TF (default
        the installed TF's); recorded in the manifest.
      linalg: as for `convert`: "portable" (default) or "native".
      trainable: which parameters restore as trainable Variables: None (every float leaf),
        a bool, or a pytree prefix of params, e.g. `{"params": True, "batch_stats": False}`.
        The restored root has `.trainable_variables` and `.non_trainable_variables`.
      target_tf: the TensorFlow / TF Serving version that will serve the model, "2.17" ...
        "2.21" (default: the installed TF): the modules get the calling convention and
        StableHLO version that TF runs (measured by tools/tf_version_matrix.py), and the
        manifest records the target. What that TF cannot run fails here, before anything is
        written (`TargetTfError` naming the op and the oldest TF that runs it). Check the
        result there with `jax2tf-native verify DIR --tf 2.19`.
      enable_xla: True (default): each module is one XlaCallModule op. False: the modules (and
        the gradient's VJP modules) are written as ordinary TF ops, with no XLA op and no
        jit_compile anywhere (as `jax2tf_native.convert(..., enable_xla=False)`), for TF
        Serving GPU images without XLA's CUDA compiler, tensorflow-metal, TFLite builtins,
        tf2onnx or TF.js. An op with no exact lowering raises `PlainLoweringError` before
        anything is written. The manifest records `lowering="plain"`.

    Returns:
      The `manifest.Manifest` recorded in the model.

    Raises:
      FileExistsError: `export_dir` exists and `overwrite` is False.
      ValueError / TypeError: a bad argument (the message names it and the fix).
      jax2tf_native.errors.TargetTfError: `target_tf` cannot run the model (nothing written).
      jax2tf_native.errors.PlainLoweringError: with `enable_xla=False`, an op (of the model or
        of its gradient) has no exact plain-TF lowering (nothing written).

    Example:
        >>> import tempfile
        >>> from jax2tf_native import example_model
        >>> record = save(tempfile.mkdtemp() + "/mnist/1", example_model.apply,
        ...               example_model.init_params(0), [example_model.example_images(2)],
        ...               polymorphic_shapes=["(b, 28, 28, 1)"], input_names=["images"])
        >>> [(t.name, t.shape) for t in record.signature("serving_default").inputs]
        [('images', (None, 28, 28, 1))]
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable as fn(params, *args), got {type(fn).__name__}.")
    if not isinstance(input_gradients, bool):
        raise TypeError(f"input_gradients must be True or False, got {input_gradients!r}.")
    if isinstance(example_args, (str, bytes)) or not isinstance(example_args, (list, tuple)):
        raise TypeError("example_args must be a list or tuple of arrays (one per input after "
                        f"params), got {type(example_args).__name__}. Fix: e.g. [images].")
    target = _target(target_tf)
    jit_compile = _jit_compile(jit_compile, enable_xla)
    extra = list(signatures or ())
    names = [DEFAULT_SIGNATURE] + [s.name for s in extra]
    if len(set(names)) != len(names):
        raise ValueError(f"signature names must be distinct, got {names}.")
    export_dir = Path(os.path.abspath(os.fspath(export_dir)))
    if export_dir.exists() and not overwrite:
        raise FileExistsError(f"{export_dir} already exists. Fix: pass overwrite=True to replace "
                              f"it, or choose a new directory (e.g. the next version number).")
    steps = progress_lines.PhaseProgress(progress, total=5)
    if input_names is not None:
        input_names = list(input_names)
        if len(input_names) != len(example_args):
            raise ValueError(f"{len(input_names)} input_names for {len(example_args)} example "
                             f"arguments. Fix: one name per argument after params.")
    specs = traced_signature.as_specs(polymorphic_shapes, len(example_args))
    flat = pytree_inputs.flatten(example_args, specs, input_names)
    main_input_names = signature_lib.check_names(flat.names, "input_names")
    # A further signature on the main arguments gets them flat, as the main function does.
    extra = [dataclasses.replace(s, fn=flat.wrap(s.fn))
             if s.example_args is None and s.fn is not None else s for s in extra]
    options = traced_signature.ConvertOptions(
        with_gradient, gradient_mode, input_gradients, platforms, jit_compile,
        tuple(polymorphic_constraints), stablehlo_version, linalg, target.version, enable_xla)

    # Plain graphs: which user lines became which TF ops, for tfjs / tflite refusals.
    sources = None if enable_xla else op_sources.OpSources()
    with (steps.phase(f"trace and export every signature (JAX -> StableHLO -> "
                      f"{'XlaCallModule' if enable_xla else 'plain TF ops'})"),
          op_sources.recording(sources)):
        made = progress_lines.VariableProgress(progress, len(jax.tree.leaves(params)))
        params_tree, flat_variables = tf_variables.to_variables(params, trainable,
                                                                on_variable=made)
        root = _ModelRoot()
        # For TF to track and users to browse; the signatures call JAX with params_tree.
        root.params = tf_variables.trackable_params(params_tree)
        root.variables = list(flat_variables)
        root.trainable_variables = [v for v in flat_variables if v.trainable]
        root.non_trainable_variables = [v for v in flat_variables if not v.trainable]
        main = Signature(DEFAULT_SIGNATURE, flat.wrap(fn), flat.arrays, flat.polymorphic_shapes,
                         main_input_names, output_names)
        built = [traced_signature.build_signature(s, main, params_tree, options)
                 for s in [main] + extra]
        for b in built:
            setattr(root, b.spec.name, b.function)
    with steps.phase("trace JAX reference outputs (compiled and run during the write)"):
        # From the Variables' own buffers: no second copy of the parameters (issue 30).
        reference_params = _reference_params(params, flat_variables)
        lowered = {b.spec.name: records.reference_cases(b, main, reference_params)
                   for b in built}
    # XLA compiles the references on a thread while TF writes the SavedModel (issue 15: they
    # were a 0.6-0.8 s serial step of save(), benchmarks/README.md).
    with (references.in_background(
              lambda: {name: [run() for run in runs] for name, (runs, _) in lowered.items()})
          as pending, atomic_dir.atomic_directory(export_dir, overwrite=overwrite) as temp):
        with (steps.phase("write the SavedModel"), op_sources.recording(sources),
              progress_lines.report_bytes_written(progress, temp, flat_variables)):
            _save_saved_model(root, temp, {b.spec.name: b.function for b in built},
                              with_gradient)
        with steps.phase("record references and warmup requests"):
            outputs = pending.result()
            recorded = {name: finish(outputs[name]) for name, (_, finish) in lowered.items()}
            record = records.write_records(temp, built, recorded, flat_variables, with_gradient,
                                    gradient_mode, platforms, input_gradients,
                                    stablehlo_version=stablehlo_version, target=target,
                                    enable_xla=enable_xla, sources=sources)
        commit_start = time.perf_counter()
    steps.done(f"commit atomically to {export_dir}", commit_start)
    return record


def _reference_params(params, flat_variables: Sequence[tf.Variable]):
    """The parameters JAX's reference outputs are computed from: the Variables' buffers seen
    as JAX arrays (`tf_variables.jax_views`), except Python scalars, whose weak type is part
    of what JAX computes, and leaves that already are JAX arrays (no copy to save).

    With several JAX devices, array leaves are passed as given: a DLPack view is committed to
    one device, which a function sharded over several refuses ("incompatible devices")."""
    multi_device = jax.device_count() > 1
    leaves, treedef = jax.tree.flatten(params)

    def reference(leaf, variable):
        if isinstance(leaf, (bool, int, float, complex, jax.Array)):
            return leaf
        if multi_device and not callable(leaf):
            return leaf
        return tf_variables.jax_views(variable)

    return jax.tree.unflatten(treedef, [
        reference(leaf, v) for leaf, v in zip(leaves, flat_variables, strict=True)])


_GRADIENT_TRACE_FAILED = "Error when tracing gradients for SavedModel"


def _jit_compile(jit_compile: bool | None, enable_xla) -> bool:
    """`save`'s jit_compile: True by default, never with plain TF ops (no XLA anywhere)."""
    if not isinstance(enable_xla, (bool, np.bool_)):
        raise TypeError(f"enable_xla must be True or False, got {enable_xla!r}.")
    enable_xla = bool(enable_xla)
    if jit_compile is None:
        return enable_xla
    if jit_compile and not enable_xla:
        raise ValueError("jit_compile=True compiles each signature with XLA, which "
                         "enable_xla=False is meant to keep out of the model. Fix: drop "
                         "jit_compile (it defaults to False with enable_xla=False).")
    return bool(jit_compile)


def _save_saved_model(root, directory, signatures, with_gradient: bool) -> None:
    """tf.saved_model.save, with a gradient that cannot be exported reported as ours.

    TF traces each custom gradient while saving; our gradient exports its JAX VJP then (on
    first use). If JAX cannot export the VJP (e.g. a differentiation rule compares symbolic
    sizes it cannot compare), TF prints the traceback and raises its own "Error when tracing
    gradients" naming only a graph op: that becomes GradientSpecError with JAX's reason and
    the fix, and TF's print is dropped (it is the chained cause).
    """
    options = tf.saved_model.SaveOptions(experimental_custom_gradients=with_gradient)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stderr(printed):
            tf.saved_model.save(root, str(directory), signatures=signatures, options=options)
    except ValueError as e:
        cause = e.__cause__
        if not (with_gradient and cause is not None
                and str(e).startswith(_GRADIENT_TRACE_FAILED)):
            sys.stderr.write(printed.getvalue())
            raise
        while (type(cause).__module__.startswith("tensorflow")
               and (cause.__cause__ or cause.__context__) is not None):
            # TF's StagingError ("in user code: ...") wraps the error the export raised.
            cause = cause.__cause__ or cause.__context__
        if isinstance(cause, jax2tf_native.PlainLoweringError):
            # enable_xla=False: the gradient's VJP holds an op with no plain lowering.
            raise jax2tf_native.PlainLoweringError(
                f"The model's gradient cannot be written as plain TF ops: {cause} (Or save "
                f"with with_gradient=False if the model only serves.)") from cause
        raise jax2tf_native.GradientSpecError(
            f"The model's gradient cannot be exported, so the SavedModel cannot keep it: "
            f"{type(cause).__name__}: {first_line(cause)} Fix: save with "
            f"with_gradient=False if the model only serves; otherwise change what stops the "
            f"export (for a symbolic-size comparison: one shared symbol, a constraint such as "
            f"polymorphic_constraints=['m >= n'], or concrete sizes).") from cause
    sys.stderr.write(printed.getvalue())


def _target(target_tf: str | None):
    """The measured target TF (`tf_ops.tf_targets`); the installed TF's when None, so that the
    manifest always says which TF the modules were written for."""
    target = tf_targets.resolve(target_tf)
    if target is None:
        installed = tf_targets.installed_target()
        target = tf_targets.measured_targets().get(installed.version, installed)
    return target
