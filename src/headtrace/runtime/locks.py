"""Snakemake's working-directory lock after a crash: stale or held by a live run?

Snakemake locks a working directory by writing ``.snakemake/locks/{n}.input.lock`` and
``{n}.output.lock`` (the files the run reads and writes) and removes them when it exits. After
``kill -9``, an out-of-memory kill or a power cut they stay behind, and the next run stops with
Snakemake's generic "Directory cannot be locked" message. Nothing is lost: ``snakemake --unlock``
and a rerun with ``--rerun-incomplete`` redo what the killed run left half-done (outputs that
jobs had started are listed in ``.snakemake/incomplete/``; headtrace writes every output
atomically, so none is half-written under its final name).

:func:`check` decides which case it is. A lock is *live* while a Snakemake process (the main
process or one of its job processes, which survive their parent's ``kill -9``) runs on this
working directory: a process whose command line is Snakemake's (``snakemake``, ``python -m
snakemake``, a job script under ``.snakemake/``) and whose current directory, or ``--directory``
argument, is this folder. Processes are read from ``/proc`` (Linux); without ``/proc`` every
Snakemake process of the user counts as live (never unlock under a run we cannot see into).
Runs on *other machines* sharing this folder (a cluster's login node) cannot be seen from here:
the message says so.

``headtrace lock-check`` (``make demo`` calls it first; ``make unlock`` before unlocking) prints
what to do and exits 0 (no lock), 1 (stale lock: run ``make unlock``) or 2 (a live run holds it).
The workflow itself calls :func:`refuse_live_run` when it is parsed, so a plain ``snakemake`` (or
``--profile slurm``) started where a run is still working stops with the same message before the
DAG is built, not with Snakemake's advice to ``--rerun-incomplete`` the live run's outputs.
"""
from __future__ import annotations

import base64
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["LockState", "LiveRunError", "check", "message", "refuse_live_run", "snakemake_processes", "NO_LOCK",
           "STALE", "LIVE"]

NO_LOCK, STALE, LIVE = 0, 1, 2


@dataclass
class LockState:
    workdir: Path
    lock_files: list[Path] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)  # outputs a job had started, as recorded
    live: list[tuple[int, str]] = field(default_factory=list)  # (pid, command line)

    @property
    def status(self) -> int:
        if self.live:
            return LIVE
        return STALE if self.lock_files else NO_LOCK


def snakemake_processes(workdir: str | os.PathLike, proc: str | os.PathLike = "/proc") -> list[tuple[int, str]]:
    """``(pid, command line)`` of every Snakemake process that runs on ``workdir`` (see the module
    docstring), this process and its parents excluded."""
    workdir = os.path.realpath(workdir)
    proc = Path(proc)
    mine = _ancestors()
    if not proc.is_dir():
        return _ps_fallback(mine)
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            argv = [a for a in (entry / "cmdline").read_bytes().decode(errors="replace").split("\0") if a]
        except OSError:
            continue  # gone, or not ours to read
        if not argv or not _is_snakemake(argv):
            continue
        try:
            cwd = os.path.realpath(os.readlink(entry / "cwd"))
        except OSError:
            cwd = None  # another user's process: its cwd is unreadable
        where = _directory_arg(argv, cwd) or cwd
        if where is None:
            if os.stat(entry).st_uid != os.getuid():
                continue  # another user's run cannot hold our lock files
            where = workdir  # ours but unreadable: count it as live
        if where == workdir:
            found.append((int(entry.name), " ".join(argv)))
    return sorted(found)


def check(workdir: str | os.PathLike = ".", proc: str | os.PathLike = "/proc") -> LockState:
    """The lock state of a Snakemake working directory (see the module docstring)."""
    workdir = Path(workdir).resolve()
    state = LockState(workdir, _lock_files(workdir), _incomplete(workdir))
    if state.lock_files:
        state.live = snakemake_processes(workdir, proc)
    return state


class LiveRunError(RuntimeError):
    """A Snakemake run is still working in this folder: a second one must not start under it."""


def refuse_live_run(workdir: str | os.PathLike = ".", proc: str | os.PathLike = "/proc") -> None:
    """Raise :class:`LiveRunError` with :func:`message` when a live run holds ``workdir``'s lock; nothing
    otherwise (no lock, or a stale one: Snakemake's own lock error follows, and ``make demo`` says more)."""
    state = check(workdir, proc)
    if state.status == LIVE:
        raise LiveRunError(message(state))


def message(state: LockState, unlock: str = "make unlock", rerun: str = "make demo") -> str:
    """What the user sees (empty when there is no lock)."""
    locks = ", ".join(str(p.relative_to(state.workdir)) for p in state.lock_files)
    if state.status == LIVE:
        procs = "\n".join(f"  pid {pid}: {cmd[:160]}" for pid, cmd in state.live)
        return (f"headtrace: a Snakemake run is still working in {state.workdir} ({locks}):\n{procs}\n"
                "Wait for it to finish (or stop it: kill PID) and run again; do not unlock or --rerun-incomplete "
                "under a live run (that redoes the outputs it is writing).")
    if state.status == STALE:
        inc = ""
        if state.incomplete:
            shown = "".join(f"\n  {p}" for p in state.incomplete[:10])
            more = f"\n  ... and {len(state.incomplete) - 10} more" if len(state.incomplete) > 10 else ""
            inc = (f"\n{len(state.incomplete)} output(s) had been started and will be redone "
                   f"(--rerun-incomplete):{shown}{more}")
        return (f"headtrace: stale Snakemake lock in {state.workdir}/.snakemake/locks ({locks}): the run that "
                "took it is no longer alive (killed, out of memory or a power cut) and no Snakemake process "
                f"works in this folder now. Nothing finished is lost.{inc}\n"
                f"To recover, run:\n  {unlock}\n  {rerun}\n"
                "(If a run on another machine uses this folder, e.g. a cluster login node, wait for it instead.)")
    return ""


def _lock_files(workdir: Path) -> list[Path]:
    d = workdir / ".snakemake" / "locks"
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if p.is_file() and p.name.endswith(".lock"))


def _incomplete(workdir: Path) -> list[str]:
    """Output paths with an incomplete marker (.snakemake/incomplete/<base64 of the path>)."""
    d = workdir / ".snakemake" / "incomplete"
    if not d.is_dir():
        return []
    out = []
    for root, _dirs, files in os.walk(d):
        for name in files:
            if name == "migration_underway":
                continue
            # Snakemake splits long names into folders prefixed with '@' (persistence/file.py)
            rel = "".join(part.removeprefix("@") for part in
                          Path(os.path.relpath(os.path.join(root, name), d)).parts)
            try:
                out.append(base64.urlsafe_b64decode(rel + "=" * (-len(rel) % 4)).decode())
            except (ValueError, UnicodeDecodeError):
                out.append(rel)
    return sorted(out)


def _is_snakemake(argv: list[str]) -> bool:
    for i, arg in enumerate(argv):
        base = os.path.basename(arg)
        if base == "snakemake" or (arg == "-m" and i + 1 < len(argv) and argv[i + 1] == "snakemake"):
            return True
        if f"{os.sep}.snakemake{os.sep}" in arg or arg.startswith(f".snakemake{os.sep}"):
            return True  # a job script (.snakemake/scripts/...) or a job in a .snakemake conda env
    return False


def _directory_arg(argv: list[str], cwd: str | None) -> str | None:
    for i, arg in enumerate(argv):
        value = None
        if arg in ("--directory", "-d") and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--directory="):
            value = arg.split("=", 1)[1]
        if value is not None:
            return os.path.realpath(os.path.join(cwd or "/", value))
    return None


def _ancestors() -> set[int]:
    """This process and its parents (``make demo``'s shell mentions snakemake in its command line)."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    pids.add(os.getppid())
    return pids


def _ps_fallback(mine: set[int]) -> list[tuple[int, str]]:  # pragma: no cover - non-Linux
    try:
        out = subprocess.run(["ps", "-U", str(os.getuid()), "-o", "pid=,command="], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return [(0, "(cannot list processes: treating the lock as held)")]
    found = []
    for line in out.splitlines():
        pid, _, cmd = line.strip().partition(" ")
        if pid.isdigit() and int(pid) not in mine and _is_snakemake(cmd.split()):
            found.append((int(pid), cmd))
    return found
