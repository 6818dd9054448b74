"""Job logging: a workflow script sends its stdout/stderr (tqdm progress included) to its log."""
from __future__ import annotations

import contextlib
import logging
import traceback
from pathlib import Path


@contextlib.contextmanager
def to_file(path: str | None):
    """Redirect stdout, stderr and the logging module to ``path`` (no-op when ``path`` is None)."""
    if not path:
        yield
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", buffering=1) as stream, contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        try:
            yield
        except BaseException:
            # The job's error belongs in its log too (Snakemake points users there).
            traceback.print_exc(file=stream)
            raise
        finally:
            root.removeHandler(handler)
