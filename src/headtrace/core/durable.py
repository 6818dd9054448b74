"""Durable, atomic writes: what a power cut cannot leave half-written under its final name.

Every output headtrace writes (Parquet tables, text, safetensors arrays, toy checkpoint folders)
goes through one of these, as databases do:

1. write into a temporary name in the destination folder (same file system, so the rename is atomic);
2. ``flush`` + ``os.fsync`` the temporary file (for a folder: every file in it, then the folder), so
   its bytes are on disk before it gets its final name;
3. ``os.replace`` it onto the final name;
4. ``os.fsync`` the parent folder, so the new directory entry (the rename itself) is on disk too.

After a crash a path therefore holds either the old complete file, the new complete file, or
nothing; a stray ``.NAME.*.tmp`` may be left beside it and is ignored (and overwritten) by reruns.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["fsync_path", "fsync_dir", "atomic_path", "write_text", "publish_dir"]


def fsync_path(path: str | os.PathLike) -> None:
    """``fsync`` one existing file (opened read-only: works for files written by any library)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | os.PathLike) -> None:
    """``fsync`` a folder, making renames/creations inside it durable (no-op where folders cannot
    be opened, e.g. on Windows)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # pragma: no cover - platform without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some file systems refuse fsync on folders
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path next to ``path``; on success fsync it, rename it onto ``path`` and
    fsync the folder. On an exception the temporary file is removed and ``path`` is untouched.

    The caller writes the temporary path with any library (``write_parquet``, ``save_file``, ...)::

        with durable.atomic_path(out) as tmp:
            df.write_parquet(tmp)
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp (and some writers) make 0600; outputs get the usual mode
        fsync_path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_text(text: str, path: str | os.PathLike) -> None:
    """Write a text file durably and atomically (UTF-8)."""
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)


def publish_dir(tmp: str | os.PathLike, final: str | os.PathLike) -> None:
    """Move a fully written folder ``tmp`` onto ``final`` durably: fsync every file in it and the
    folder itself, replace ``final`` (an existing ``final`` is removed first), fsync the parent.

    Used for checkpoint folders (``save_pretrained`` writes config.json + model.safetensors into
    ``tmp``), so a crash leaves either no ``final`` or a complete one."""
    tmp, final = Path(tmp), Path(final)
    for root, _dirs, files in os.walk(tmp):
        for name in files:
            fsync_path(Path(root) / name)
        fsync_dir(root)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    fsync_dir(final.parent)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
