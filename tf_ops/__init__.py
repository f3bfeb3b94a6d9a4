"""The TensorFlow side of jax2tf-native: what TF reads, and the TF ops of a converted call.

`tf_ops` knows TensorFlow: dtypes, the `XlaCallModule` op and its attributes, the StableHLO and
calling-convention versions a TF reads, platforms, gradient tapes. It never imports
`jax2tf_native` or user code: it receives `jax.export.Exported` records, parsed MLIR modules
and TF tensors. (Re-serializing and checking a module uses JAX's MLIR bindings, and `dtypes`
maps JAX's float0, so those modules import `jax`; `platforms`, `mlir_walk`, `gradient_ops`,
`tape_state`, `host_can_run`, `shardings`, `custom_call_allowlist`, `versions`, `tf_targets` and
`exactness` import no JAX.)

What it owns, precisely: every TF op on the path of a converted call (`convert`,
`call_exported`) is built here —
- the `XlaCallModule` op, its platform guard, the `XlaSharding` ops around it, its node
  attributes, and its control dependency on the run-time shape asserts (`xla_call_module`,
  `shardings`);
- the ops on the call's arguments and results: dtype casts, run-time shapes, jax2tf's
  `jax2tf_arg_{i}` / `jax2tf_out` identities (`arguments`);
- the ops around a gradient unit: gradient cuts, `PreventGradient`, `tf.stop_gradient` on
  residuals, the zeros of cotangents TF leaves out (`gradient_ops`), and the records on tapes
  (`tape_state`).
Four places of `jax2tf_native` build TF ops too, on purpose: `gradients` wraps a call in
`tf.custom_gradient` (with its "jax2tf_vjp" name scope) because the unit's forward and backward
are `jax2tf_native` functions that TF calls back; `arg_shape_check` builds the dimension arithmetic
and `tf.debugging` asserts of symbolic shapes, which raise `jax2tf_native.errors`;
`call_tf_split` runs the user's TF function between the converted stretches of a function
split at a symbolic `call_tf` (its constants and the casts back to JAX's dtypes); and the
user-facing TF objects (`tf_args`' tensors, `tf_variables`, `keras_layer`, `frameworks`, the
`grad_check` tool) are what those modules are for.

Its modules, one job each:
- `arguments`: the ops on a call's arguments and results (casts, shapes, graph names).
- `custom_call_allowlist`: the custom-call targets we stand behind, per platform.
- `custom_call_check`: finds every custom call of a module and checks it against the allowlist;
  the one validation of `DisabledSafetyCheck` values (`canonical_disabled_checks`).
- `dtypes`: JAX <-> TF dtype mapping.
- `exactness`: the exactness contract's comparison rule (a converted result against
  `jax.jit`'s): what is bit-exact, and every tolerated float difference with its bound.
- `gather_batching`: rewrites gathers/scatters with batching dimensions for older TFs' XLA.
- `gradient_ops`: the TF ops around a gradient unit.
- `graph_passes`: TF's private graph passes (freezing Variables into Consts, Grappler), for
  the TF.js writer (saved_model_tools/tfjs/graph.py).
- `host_can_run`: whether this host can run a module (platforms, multi-device ops), without JAX.
- `known_downgrades`: skips re-writing a module whose write for TF would change only its header.
- `mlir_walk`: the one walk over a module's ops, and the one custom-call target reader.
- `module_for_tf`: re-serializes an exported module so that a given TF can deserialize it.
- `module_verify`: checks a parsed module and its artifact's fields before use.
- `nan_guards`: the few ops a plain graph adds to keep JAX's NaNs, and their removal for
  TFLite / TF.js.
- `platforms`: the one list of platform names, and their validation.
- `shardings`: XlaSharding ops carrying a module's input/output shardings in graphs.
- `source_lines`: the one reader of the user's source line in an MLIR location (for messages).
- `tape_state`: what TF's gradient tapes record now.
- `tf_targets`: the TF versions we target, measured (StableHLO version, calling convention).
- `versions`: what the installed TensorFlow can read (StableHLO, calling convention).
- `xla_call_module`: builds the one `XlaCallModule` op (and the guard for modules this host
  cannot run), or with `enable_xla=False` hands the module to `plain`.

`plain/` (more than half of the package's lines): StableHLO -> ordinary TF ops, the
`enable_xla=False` path, a graph with no XLA op that TFLite, TF.js and TF without XLA run.
"Plain" means this path and nothing else. Its `__init__` is the front door
(`module_from_exported` checks a module at conversion, `PlainModule.call` builds its ops);
inside, `program` reads the module into records, `rewrite/` raises JAX's decompositions back
to TF's own ops, `interpreter` checks and runs them, and `op_table` lists every op once with
its lowering, one module per family: `elementwise`, `bitwise`, `conversions`, `shapes`,
`indexing` (gather, dynamic slices), `scatter`, `index_vectors`, `reductions`, `windows`,
`windows_cumulative`, `windowed_view`, `select_and_scatter`, `contractions`, `sorting`,
`control_flow`, `random_bits`, `fft`, `linalg_ops`, `lapack_kernels` (jaxlib's LAPACK calls on
TF's kernels), `special_functions`, `raised_ops`; with `symbolic` / `dim_arithmetic` (sizes
kept symbolic), `folding` (ops computed at conversion), `dtype_support` (detours for dtypes
TF's CPU kernels lack), `op_rows`, `op_sources` and `errors` (`PlainLoweringError`).
"""
