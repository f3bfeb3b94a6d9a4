"""The only code that builds TensorFlow ops for jax2tf-native.

`tf_ops` knows TensorFlow: dtypes, the `XlaCallModule` op and its attributes, the StableHLO and
calling-convention versions the installed TF reads, and platforms. It never imports user code:
it receives `jax.export.Exported` records and TF tensors.

- `dtypes`: JAX <-> TF dtype mapping.
- `versions`: what the installed TensorFlow can read (StableHLO, calling convention).
- `module_for_tf`: re-serializes an exported module so that a given TF can deserialize it.
- `platforms`: platform names, and the accelerators TF sees on this host.
- `runnable`: whether this host can run a module (platforms, multi-device ops), without JAX.
- `shardings`: XlaSharding ops carrying a module's input/output shardings in graphs.
- `xla_call_module`: builds the one `XlaCallModule` op (and the guard for modules this host
  cannot run).
"""
