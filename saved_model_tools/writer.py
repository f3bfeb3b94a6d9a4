"""`save`: a JAX function and its parameters as a SavedModel for TF Serving, in one call."""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import io
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import jax
import jaxlib
import numpy as np
import tensorflow as tf

import jax2tf_native
from saved_model_tools import (atomic_dir, large_write, manifest, pytree_inputs, references,
                               warmup)
from saved_model_tools import signature as signature_lib
from jax2tf_native import tf_variables
from jax2tf_native.errors import first_line
from saved_model_tools.signature import Signature
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


@dataclasses.dataclass(frozen=True)
class _Built:
    """One signature, resolved and traced.

    Attributes:
      spec: the user's signature.
      function: the tf.function saved for it.
      input_specs: its named `tf.TensorSpec`s.
      info: what the manifest records about it (references added when written).
      jax_fn: `fn(params, *args)`, for the JAX reference outputs.
      example_args: example arguments of `jax_fn` (after params).
      polymorphic_shapes: one spec per example argument.
      output_names: names for a non-dict result, or None.
    """
    spec: Signature
    function: Any
    input_specs: list
    info: manifest.SignatureInfo
    jax_fn: Callable
    example_args: list
    polymorphic_shapes: list
    output_names: Sequence[str] | None


class _Progress:
    """Reports "[i/n] phase: seconds" lines to `report` (if given) as phases finish."""

    def __init__(self, report: Callable[[str], None] | None, total: int):
        self._report, self._total, self._step = report, total, 0

    def done(self, label: str, start: float) -> None:
        self._step += 1
        if self._report:
            self._report(f"[{self._step}/{self._total}] {label}: "
                         f"{time.perf_counter() - start:.2f} s")

    @contextlib.contextmanager
    def phase(self, label: str):
        start = time.perf_counter()
        yield
        self.done(label, start)


@dataclasses.dataclass(frozen=True)
class _ConvertOptions:
    """What `save` passes through to `jax2tf_native.convert` for every signature."""
    with_gradient: bool
    gradient_mode: str
    input_gradients: bool
    platforms: Sequence[str] | None
    jit_compile: bool
    polymorphic_constraints: tuple[str, ...] = ()
    stablehlo_version: str | None = None
    linalg: str = "portable"
    target_tf: str | None = None
    enable_xla: bool = True


def _as_specs(polymorphic_shapes, n_args: int) -> list:
    if polymorphic_shapes is None or isinstance(polymorphic_shapes, str):
        return [polymorphic_shapes] * n_args
    specs = list(polymorphic_shapes)
    if len(specs) != n_args:
        raise ValueError(f"polymorphic_shapes has {len(specs)} entries for {n_args} example "
                         f"argument(s). Fix: one spec (or None) per argument after params, e.g. "
                         f"{['(b, ...)'] * n_args}.")
    return specs


def _leading_batch(polymorphic_shapes: Sequence, example_args: Sequence) -> int | None:
    """The example batch size when every input's only symbolic dimension is one shared leading
    variable (so references can be recorded at other batch sizes), else None."""
    names = set()
    for spec, arg in zip(polymorphic_shapes, example_args):
        if spec is None:
            return None
        dims = jax.export.symbolic_shape(spec, like=np.shape(arg))
        symbolic = [i for i, d in enumerate(dims) if not isinstance(d, int)]
        if symbolic != [0] or not str(dims[0]).isidentifier():
            return None
        names.add(str(dims[0]))
    return int(np.shape(example_args[0])[0]) if len(names) == 1 else None


def _output_infos(outputs: dict) -> tuple[manifest.TensorInfo, ...]:
    return tuple(manifest.TensorInfo(n, tf.dtypes.as_dtype(t.dtype).name,
                                     tuple(t.shape.as_list())) for n, t in outputs.items())


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
    steps = _Progress(progress, total=5)
    if input_names is not None:
        input_names = list(input_names)
        if len(input_names) != len(example_args):
            raise ValueError(f"{len(input_names)} input_names for {len(example_args)} example "
                             f"arguments. Fix: one name per argument after params.")
    flat = pytree_inputs.flatten(example_args, _as_specs(polymorphic_shapes, len(example_args)),
                                 input_names)
    main_input_names = signature_lib.check_names(flat.names, "input_names")
    # A further signature on the main arguments gets them flat, as the main function does.
    extra = [dataclasses.replace(s, fn=flat.wrap(s.fn))
             if s.example_args is None and s.fn is not None else s for s in extra]
    options = _ConvertOptions(with_gradient, gradient_mode, input_gradients, platforms,
                              jit_compile, tuple(polymorphic_constraints), stablehlo_version,
                              linalg, target.version, enable_xla)

    # Plain graphs: which user lines became which TF ops, for tfjs / tflite refusals.
    sources = None if enable_xla else op_sources.OpSources()
    with (steps.phase(f"trace and export every signature (JAX -> StableHLO -> "
                      f"{'XlaCallModule' if enable_xla else 'plain TF ops'})"),
          op_sources.recording(sources)):
        made = large_write.VariableProgress(progress, len(jax.tree.leaves(params)))
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
        built = [_build(s, main, params_tree, options) for s in [main] + extra]
        for b in built:
            setattr(root, b.spec.name, b.function)
    with steps.phase("trace JAX reference outputs (compiled and run during the write)"):
        # From the Variables' own buffers: no second copy of the parameters (issue 30).
        reference_params = _reference_params(params, flat_variables)
        lowered = {b.spec.name: _references(b, main, reference_params) for b in built}
    # XLA compiles the references on a thread while TF writes the SavedModel (issue 15: they
    # were a 0.6-0.8 s serial step of save(), benchmarks/README.md).
    with (references.in_background(
              lambda: {name: [run() for run in runs] for name, (runs, _) in lowered.items()})
          as pending, atomic_dir.atomic_directory(export_dir, overwrite=overwrite) as temp):
        with (steps.phase("write the SavedModel"), op_sources.recording(sources),
              large_write.report_bytes_written(progress, temp, flat_variables)):
            _save_saved_model(root, temp, {b.spec.name: b.function for b in built},
                              with_gradient)
        with steps.phase("record references and warmup requests"):
            outputs = pending.result()
            records = {name: finish(outputs[name]) for name, (_, finish) in lowered.items()}
            record = _write_records(temp, built, records, flat_variables, with_gradient,
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


def _build(spec: Signature, main: Signature, params_tree, options: _ConvertOptions) -> _Built:
    fn = spec.fn or main.fn
    uses_main_args = spec.example_args is None
    where = f"signature {spec.name!r}"
    if uses_main_args:
        example_args, poly = main.example_args, (
            main.polymorphic_shapes if spec.polymorphic_shapes is None
            else _as_specs(spec.polymorphic_shapes, len(main.example_args)))
        leaf_names = None
    else:
        if (spec.preprocess is None and spec.input_names is not None
                and len(spec.input_names) != len(spec.example_args)):
            raise ValueError(f"{where}: {len(spec.input_names)} input names for "
                             f"{len(spec.example_args)} example arguments.")
        flat = pytree_inputs.flatten(
            spec.example_args, _as_specs(spec.polymorphic_shapes, len(spec.example_args)),
            spec.input_names, where=f"{where}: example_args")
        fn, example_args, poly, leaf_names = (flat.wrap(fn), flat.arrays,
                                              flat.polymorphic_shapes, flat.names)
    if spec.preprocess is not None:
        input_specs = [tf.TensorSpec(s.shape, s.dtype, name=n) for s, n in zip(
            spec.input_signature,
            spec.input_names or [s.name or f"input_{i}" for i, s in enumerate(spec.input_signature)])]
    else:
        names = (main.input_names if uses_main_args and spec.input_names is None
                 else spec.input_names if uses_main_args else leaf_names)
        names = signature_lib.check_names(names, f"{where}: input_names")
        if len(names) != len(example_args):
            raise ValueError(f"{where}: {len(names)} input names for {len(example_args)} inputs.")
        input_specs = signature_lib.example_input_specs(example_args, poly, names)
    signature_lib.check_names([s.name for s in input_specs], f"{where}: input names")
    converted = jax2tf_native.convert(
        fn, polymorphic_shapes=[None, *poly], with_gradient=options.with_gradient,
        gradient_mode=options.gradient_mode,
        # TF saves a custom gradient but not the gradient of its backward pass: first order.
        gradient_order=1, platforms=options.platforms,
        gradient_argnums=None if options.input_gradients else 0,
        polymorphic_constraints=options.polymorphic_constraints,
        stablehlo_version=options.stablehlo_version, linalg=options.linalg,
        target_tf=options.target_tf, enable_xla=options.enable_xla)
    output_names = spec.output_names if spec.output_names is not None else (
        main.output_names if spec.fn is None and spec.postprocess is None else None)

    def serve(*inputs):
        args = spec.preprocess(*inputs) if spec.preprocess is not None else inputs
        args = tuple(args) if isinstance(args, (list, tuple)) else (args,)
        result = converted(params_tree, *args)
        if spec.postprocess is not None:
            result = spec.postprocess(result)
        return signature_lib.name_outputs(result, output_names, where)

    serve.__name__ = spec.name
    function = tf.function(serve, input_signature=input_specs, autograph=False,
                           jit_compile=options.jit_compile)
    concrete = function.get_concrete_function()  # traces and exports now, inside this phase
    info = manifest.SignatureInfo(
        name=spec.name, method_name=signature_lib.PREDICT_METHOD,
        inputs=tuple(manifest.TensorInfo(s.name, s.dtype.name, tuple(s.shape.as_list()),
                                         None if spec.preprocess is not None else p)
                     for s, p in zip(input_specs, poly if spec.preprocess is None
                                     else [None] * len(input_specs))),
        outputs=_output_infos(concrete.structured_outputs))
    return _Built(spec, function, input_specs, info, fn, list(example_args), list(poly),
                  output_names)


def _references(b: _Built, main: Signature, params) -> tuple[list[Callable], Callable]:
    """The references at two batch sizes when possible, in two steps: (runs, finish).

    `runs` compile and run JAX's computation of each case (thread-safe: traced and lowered
    here); `finish([run() for run in runs])` gives [(batch, inputs by name, JAX outputs by
    name)].
    """
    spec = b.spec
    if spec.preprocess is None:
        example_batch = _leading_batch(b.polymorphic_shapes, b.example_args)
        sizes = references.batch_sizes(example_batch) if example_batch else (None,)
        cases = []
        for batch in sizes:
            args = (b.example_args if batch is None
                    else [references.resize_batch(a, batch) for a in b.example_args])
            cases.append((batch, args, args))
    else:
        leading_only = all(s.shape.rank and s.shape[0] is None and None not in s.shape[1:]
                           for s in b.input_specs)
        static = all(None not in s.shape for s in b.input_specs)
        if not (leading_only or static):
            return [], lambda outputs: []
        cases = []
        for seed, batch in enumerate((1, 2) if leading_only else (None,)):
            raw = references.random_inputs(b.input_specs, batch or 1, seed)
            args = spec.preprocess(*[tf.constant(r) for r in raw])
            args = tuple(args) if isinstance(args, (list, tuple)) else (args,)
            cases.append((batch, raw, [a.numpy() for a in args]))
    runs = [references.lower_jax_outputs(b.jax_fn, params, jax_args)
            for _, _, jax_args in cases]

    def finish(all_outputs: list) -> list[tuple[int, dict, dict]]:
        result = []
        for (batch, raw_inputs, _), outputs in zip(cases, all_outputs):
            if spec.postprocess is not None:
                outputs = spec.postprocess(jax.tree.map(tf.constant, outputs))
            named = signature_lib.name_outputs(outputs, b.output_names,
                                               f"signature {spec.name!r}")
            named = {k: np.asarray(v) for k, v in named.items()}
            inputs = {s.name: np.asarray(a) for s, a in zip(b.input_specs, raw_inputs)}
            if batch is None:  # static shapes: record the example's own leading size
                batch = int(np.shape(raw_inputs[0])[0]) if np.ndim(raw_inputs[0]) else 1
            result.append((batch, inputs, named))
        return result

    return runs, finish


def _write_records(temp: Path, built: Sequence[_Built], records: dict, flat_variables,
                   with_gradient: bool, gradient_mode: str, platforms,
                   input_gradients: bool = True, stablehlo_version: str | None = None,
                   *, target, enable_xla: bool = True,
                   sources: op_sources.OpSources | None = None) -> manifest.Manifest:
    record_dir = temp / manifest.RECORD_DIR
    infos, warmup_requests = [], []
    for b in built:
        refs = []
        for i, (batch, inputs, outputs) in enumerate(records[b.spec.name]):
            warmup_requests.append((b.spec.name, inputs))
            file_name = f"{b.spec.name}_{i}.npz"
            references.write(record_dir, file_name, inputs, outputs)
            rtol, atol = references.tolerance([v.dtype for v in outputs.values()])
            refs.append(manifest.Reference(file_name, batch, rtol, atol))
        infos.append(dataclasses.replace(b.info, references=tuple(refs)))
    record = manifest.Manifest(
        format_version=manifest.FORMAT_VERSION,
        created_utc=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        producer={"jax": jax.__version__, "jaxlib": jaxlib.__version__, "tensorflow": tf.__version__,
                  "jax2tf_native": jax2tf_native.__version__},
        signatures=tuple(infos),
        variable_count=len(flat_variables),
        variable_bytes=int(sum(np.dtype(v.dtype.as_numpy_dtype).itemsize * int(np.prod(v.shape))
                               for v in flat_variables)),
        with_gradient=with_gradient, gradient_mode=gradient_mode,
        platforms=tuple(platforms or (jax.default_backend(),)),
        stablehlo_version=stablehlo_version or target.stablehlo_version,
        input_gradients=input_gradients,
        target_tf=target.version,
        lowering="xla_call_module" if enable_xla else "plain",
        plain_op_sources=sources.by_op_type() if sources is not None else {})
    manifest.write(temp, record)
    # TF Serving replays these at load, so the XLA modules compile before the first request.
    warmup.write_warmup_requests(temp / manifest.WARMUP_FILE, warmup_requests)
    return record


def _target(target_tf: str | None):
    """The measured target TF (`tf_ops.tf_targets`); the installed TF's when None, so that the
    manifest always says which TF the modules were written for."""
    target = tf_targets.resolve(target_tf)
    if target is None:
        installed = tf_targets.installed_target()
        target = tf_targets.measured_targets().get(installed.version, installed)
    return target
