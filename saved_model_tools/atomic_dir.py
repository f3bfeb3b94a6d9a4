"""Writes a directory so that the target path holds either the complete old or the complete new
content, even if the process is killed at any moment.

The new content is written into a temporary directory beside the target (same filesystem), then
swapped in with one atomic `renameat2(RENAME_EXCHANGE)` (Linux) when a previous version exists,
or one atomic `rename` when none does. A failure deletes the temporary directory. A process
killed mid-write leaves only a temporary `.NAME.tmp-PID-*` directory, which the next write to the
same target removes.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import uuid
from pathlib import Path
from typing import Iterator

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swaps two paths; False when the OS or filesystem cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, f"cannot swap {a} and {b}: {os.strerror(err)}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _temp_prefix(target: Path) -> str:
    return f".{target.name}.tmp-"


def remove_stale_temporaries(target: Path) -> list[Path]:
    """Deletes temporary directories left by killed writers of `target`; returns them."""
    removed = []
    if not target.parent.is_dir():
        return removed
    for entry in target.parent.iterdir():
        if not entry.name.startswith(_temp_prefix(target)):
            continue
        pid_text = entry.name[len(_temp_prefix(target)):].split("-", 1)[0]
        if pid_text.isdigit() and int(pid_text) != os.getpid() and not _pid_alive(int(pid_text)):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_directory(target: str | os.PathLike, *, overwrite: bool) -> Iterator[Path]:
    """Yields a fresh temporary directory; on success it becomes `target` atomically.

    Args:
      target: the final directory path.
      overwrite: whether an existing `target` may be replaced (only once the new one is complete).

    Raises:
      FileExistsError: `target` exists and `overwrite` is False.
      NotADirectoryError: `target` exists and is not a directory.
      PermissionError: the parent directory is not writable.

    Example:
        >>> import tempfile
        >>> target = Path(tempfile.mkdtemp()) / "model" / "1"
        >>> with atomic_directory(target, overwrite=True) as tmp:
        ...     _ = (tmp / "saved_model.pb").write_bytes(b"...")
        >>> [p.name for p in target.iterdir()]
        ['saved_model.pb']
    """
    target = Path(os.path.abspath(os.fspath(target)))
    if target.exists() and not target.is_dir():
        raise NotADirectoryError(f"{target} exists and is not a directory. Fix: choose another "
                                 f"path, or remove that file.")
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} already exists. Fix: pass overwrite=True to replace it "
                              f"(the old model stays until the new one is complete), or choose "
                              f"a new directory (e.g. the next version number).")
    created_parents = []
    parent = target.parent
    while not parent.exists():
        created_parents.append(parent)
        parent = parent.parent
    if not parent.is_dir():
        raise NotADirectoryError(f"cannot create {target}: {parent} is a file, not a directory. "
                                 f"Fix: choose an output path whose parents are directories.")
    if not os.access(parent, os.W_OK):
        raise PermissionError(f"cannot write into {parent}: permission denied. Fix: choose a "
                              f"writable location for {target.name}.")
    for directory in reversed(created_parents):
        directory.mkdir()
    remove_stale_temporaries(target)
    temp = target.parent / f"{_temp_prefix(target)}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    temp.mkdir()
    try:
        yield temp
        if target.exists():
            if not overwrite:
                raise FileExistsError(f"{target} was created by someone else while saving.")
            if _exchange(temp, target):
                shutil.rmtree(temp)  # temp now holds the previous version
            else:
                # No atomic exchange here: a kill between these two renames leaves the previous
                # version at the backup path, which the next write removes.
                backup = target.parent / f"{_temp_prefix(target)}{os.getpid()}-old"
                os.rename(target, backup)
                os.rename(temp, target)
                shutil.rmtree(backup)
        else:
            os.rename(temp, target)
        _fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        for directory in created_parents:
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise
