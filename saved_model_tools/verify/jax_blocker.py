"""The import blocker of `verify`'s child process: `import jax` / `import jaxlib` raise ImportError.

Installed first (`install()`), before TensorFlow is imported: TF 2.21 imports JAX itself when
it is installed (through Keras and tf.lite), so only a block proves the model runs on a
serving host without JAX. Imports nothing but `sys` and `traceback`.
"""
import sys
import traceback


class NoJaxFinder:
    """A `sys.meta_path` finder that refuses jax and jaxlib and records who asked."""

    def __init__(self):
        self.attempts: list[str] = []

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in ("jax", "jaxlib"):
            return None
        frames = [f for f in traceback.extract_stack()[:-1] if "importlib" not in f.filename]
        where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
        self.attempts.append(f"{name} from {where}")
        raise ImportError(f"import of {name!r} is blocked: jax2tf-native verify runs the model "
                          f"as on a serving host without JAX")


def install() -> list[str]:
    """Puts a `NoJaxFinder` first on `sys.meta_path`; returns its (live) list of attempts."""
    finder = NoJaxFinder()
    sys.meta_path.insert(0, finder)
    return finder.attempts
