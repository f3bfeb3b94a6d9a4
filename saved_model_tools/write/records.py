"""What `save` records beside the graph: JAX's reference outputs at two batch sizes where the
shapes allow (`reference_cases`), then the manifest, the reference files and TF Serving's warmup
requests (`write_records`)."""
from __future__ import annotations

import dataclasses
import datetime
from pathlib import Path
from typing import Callable, Sequence

import jax
import jaxlib
import numpy as np
import tensorflow as tf

import jax2tf_native
from saved_model_tools import manifest, warmup
from saved_model_tools.write import references
from saved_model_tools.write import signature as signature_lib
from saved_model_tools.write.signature import Signature
from saved_model_tools.write.traced_signature import BuiltSignature
from tf_ops.plain import op_sources


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


def reference_cases(b: BuiltSignature, main: Signature, params) -> tuple[list[Callable], Callable]:
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


def write_records(temp: Path, built: Sequence[BuiltSignature], records: dict, flat_variables,
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


