"""`python -m jax2tf_native` points to the command line, which lives in the top layer.

The `jax2tf-native` command (inspect, verify, export, demo) is `saved_model_tools.cli`: this
package sits below `saved_model_tools` and imports nothing from it (docs/architecture.md).
"""
import sys

sys.stderr.write("jax2tf_native: error: the command line is `jax2tf-native` or "
                 "`python -m saved_model_tools` (e.g. `python -m saved_model_tools demo`).\n")
sys.exit(2)
