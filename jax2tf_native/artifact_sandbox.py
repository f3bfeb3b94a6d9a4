"""Checks serialized `jax.export` artifacts in a separate process before this process parses them.

The bytes given to `call_exported` / `deserialize` / `save_exported` come from elsewhere.
Measured with mutated copies of a valid artifact: some corrupt modules make the MLIR bytecode
reader abort the whole process (`LLVM ERROR: unsupported integer type`), which no `try` can
catch, and unverified IR has hung the serializer. So the first look at untrusted bytes happens
elsewhere: a sandbox server process (started on first use; JAX's MLIR bindings only, no
TensorFlow) forks a fresh child per artifact, which deserializes it, checks its fields, and
parses, verifies and re-serializes every module of its VJP chain exactly as `call_exported`
will. The child has a time bound; a crash or hang kills only the child. The server itself never
parses, so no corrupt artifact leaves state behind for the next one, and this process parses
the bytes only after they passed. Verdicts are cached by the bytes' SHA-256.
"""
from __future__ import annotations

import collections
import functools
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

from jax2tf_native.errors import ExportedModuleError

# A valid artifact takes ~1-2 s here (imports); parsing itself is milliseconds per MB.
TIMEOUT_SECONDS = 60.0
_MAX_VJP_LEVELS = 16
_CACHE_SIZE = 256
_verdicts: collections.OrderedDict[tuple[str, str], str | None] = collections.OrderedDict()
_lock = threading.Lock()


def check_serialized(blob: bytes, stablehlo_version: str) -> None:
    """Raises ExportedModuleError unless a child process could safely load `blob`.

    Args:
      blob: the bytes of `Exported.serialize()`.
      stablehlo_version: the StableHLO version the modules will be written at for TF.

    Example:
        >>> import jax, numpy as np
        >>> exp = jax.export.export(jax.jit(jax.numpy.sin))(np.zeros(3, np.float32))
        >>> check_serialized(exp.serialize(), "1.13.7")   # returns None, or raises
        >>> check_serialized(b"not an artifact", "1.13.7")
        Traceback (most recent call last):
        ...
        jax2tf_native.errors.ExportedModuleError: ...
    """
    key = (hashlib.sha256(blob).hexdigest(), stablehlo_version)
    with _lock:
        if key in _verdicts:
            _verdicts.move_to_end(key)
            verdict = _verdicts[key]
        else:
            verdict = "pending"
    if verdict == "pending":
        verdict = _run_child(blob, stablehlo_version)
        with _lock:
            _verdicts[key] = verdict
            while len(_verdicts) > _CACHE_SIZE:
                _verdicts.popitem(last=False)
    if verdict is not None:
        raise ExportedModuleError(verdict)


class _Server:
    """The sandbox server process, restarted when it dies."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.owner = os.getpid()

    def _start(self) -> None:
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", JAX_PLATFORMS="cpu")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jax2tf_native.artifact_sandbox", "--server"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def check(self, blob: bytes, stablehlo_version: str) -> str | None:
        if self.owner != os.getpid():  # a forked copy of this process: never share the pipe
            self.proc, self.owner = None, os.getpid()
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        header = {"version": stablehlo_version, "size": len(blob), "timeout": TIMEOUT_SECONDS}
        try:
            self.proc.stdin.write((json.dumps(header) + "\n").encode() + blob)
            self.proc.stdin.flush()
            reply = _read_line(self.proc.stdout, TIMEOUT_SECONDS + 60.0)
        except (OSError, TimeoutError):
            reply = None
        if reply is None:
            self.stop()
            return (f"The sandbox process that loads artifacts stopped answering while checking "
                    f"the {len(blob)}-byte artifact. Fix: retry; if it persists, re-export the "
                    f"function and copy the complete bytes.")
        return json.loads(reply)["error"]


def _read_line(stream, timeout: float) -> str | None:
    import select
    deadline = time.monotonic() + timeout
    data = b""
    fd = stream.fileno()
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            data += chunk
    return data.decode(errors="replace")


_server = _Server()


def _run_child(blob: bytes, stablehlo_version: str) -> str | None:
    with _lock:
        return _server.check(blob, stablehlo_version)


def _crash_message(size: int, how: str, reason: str) -> str:
    return (f"Parsing the {size}-byte artifact crashed a sandbox process ({how}: {reason}). "
            f"The artifact is corrupt, and parsing it here would have crashed this process. "
            f"Fix: re-export the function and copy the complete bytes.")


def _check_in_fork(blob: bytes, version: str, timeout: float) -> str | None:
    """Server side: runs `_child_checks` in a forked child with a time bound."""
    read_fd, write_fd = os.pipe()
    with tempfile.TemporaryFile() as stderr_file:
        pid = os.fork()
        if pid == 0:  # the child: check, report, exit without cleanup
            try:
                os.close(read_fd)
                os.dup2(stderr_file.fileno(), 2)
                error = _child_checks(blob, version)
                os.write(write_fd, (json.dumps({"error": error}) + "\n").encode())
            finally:
                os._exit(0)
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as reader:
            try:
                line = _read_line(reader, timeout)
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return (f"Loading the {len(blob)}-byte artifact did not finish within "
                        f"{timeout:.0f} s in the sandbox process (stopped). The artifact is "
                        f"corrupt. Fix: re-export the function and copy the complete bytes.")
        _, status = os.waitpid(pid, 0)
        if line:
            return json.loads(line)["error"]
        stderr_file.seek(0)
        lines = [l for l in stderr_file.read().decode(errors="replace").splitlines()
                 if l.strip()]
        how = (f"signal {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status)
               else f"exit code {os.WEXITSTATUS(status)}")
        return _crash_message(len(blob), how, lines[-1][:200] if lines else "no message")


def deserialize_artifact(blob: bytes):
    """`jax.export.deserialize`, also for artifacts with jax2tf.call_tf's effects.

    JAX deserializes an effect only once its type is registered, which importing jax2tf's
    call_tf does; the child imports it (and so TensorFlow) only for such an artifact.
    """
    import jax
    try:
        return jax.export.deserialize(bytearray(blob))
    except NotImplementedError as e:
        if "CallTf" not in str(e):
            raise
        import jax.experimental.jax2tf  # noqa: F401  registers call_tf's effect types
        return jax.export.deserialize(bytearray(blob))


def _child_checks(blob: bytes, stablehlo_version: str) -> str | None:
    """The checks, run in the child. Returns None or the error message."""
    from tf_ops import module_for_tf, module_verify
    try:
        exported = deserialize_artifact(blob)
    except Exception as e:  # flatbuffer errors come as several types
        return (f"Could not deserialize the {len(blob)} bytes as a jax.export.Exported "
                f"({type(e).__name__}: {str(e)[:200]}). The bytes are truncated, corrupt, or "
                f"not from Exported.serialize(). Fix: pass the complete output of "
                f"jax.export.export(...)(...).serialize().")
    for level in range(_MAX_VJP_LEVELS):
        what = "the artifact" if level == 0 else f"its order-{level} VJP"
        try:
            module_verify.check_fields(exported)
            signature = functools.partial(module_verify.check_main_signature, exported=exported)
            try:
                module_for_tf.reserialize(exported.mlir_module_serialized, stablehlo_version,
                                          checks=(signature,))
            except ValueError as e:
                # A verified module that the requested StableHLO version cannot express is not
                # corrupt: the parent raises the TargetTfError naming the op when it prepares
                # the module (by name: tf_targets imports TensorFlow, which the child avoids).
                if type(e).__name__ != "TargetTfError":
                    raise
            if not exported.has_vjp():
                return None
            exported = exported.vjp()
        except module_verify.ModuleVerifyError as e:
            return f"In {what}: {e}"
        except Exception as e:  # anything else the readers raise on corrupt input
            return (f"In {what}: the artifact is corrupt ({type(e).__name__}: "
                    f"{str(e).strip()[:200]}). {module_verify.FIX}")
    return None


def _server_main() -> None:
    # Imported once here, so that each forked check starts in ~10 ms.
    import jax  # noqa: F401
    import jax.interpreters.mlir  # noqa: F401

    from tf_ops import module_for_tf, module_verify  # noqa: F401
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        line = stdin.readline()
        if not line:
            return
        header = json.loads(line)
        blob = stdin.read(header["size"])
        error = _check_in_fork(blob, header["version"], header["timeout"])
        stdout.write((json.dumps({"error": error}) + "\n").encode())
        stdout.flush()


if __name__ == "__main__":
    _server_main()
