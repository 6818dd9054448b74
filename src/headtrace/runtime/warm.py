"""A warm interpreter for local runs: torch and transformers are imported once, and each workflow job
runs in a fork of the process that imported them.

On a laptop a toy or small-model cell computes for a few seconds, while every job's fresh Python
spends about 5 s importing torch and transformers (docs/performance.md). ``headtrace warm --
snakemake ...`` (what ``make demo`` runs) starts a server that imports them once (:data:`PRELOAD`),
runs the command with ``HEADTRACE_WARM`` naming the server's socket, and stops the server when the
command ends. A workflow script that calls :func:`delegate` first hands its job to the server: the
server forks; the fork takes the job's standard streams, working directory, environment,
``sys.argv`` and ``sys.path`` and runs the job's script from its first line (the same code a fresh
process runs, its imports found already done); the job's own process waits and exits with the
fork's status. Without ``HEADTRACE_WARM``, or where the socket does not answer (a cluster node, a
stopped server), :func:`delegate` returns and the script runs in its own process, as it always did.

What keeps a fork equal to a fresh process:

* every job runs in a new fork of the server as it stood after the imports: nothing one job does
  reaches another;
* the server never runs torch (a fork of a process whose thread pools have started is not safe),
  is single-threaded, and is started with the thread-count variables Snakemake gives a one-thread
  job (:data:`THREAD_ENV` = 1), which the math libraries read when they load; a job whose variables
  differ (a rule with more threads) runs in its own process, and so does a job Slurm started
  (``headtrace warm -- snakemake --profile profiles/slurm`` changes nothing on the cluster);
* the fork runs the exit handlers a fresh process would run, then exits with the script's status.

Killing a job's process (Ctrl-C, or Snakemake stopping after a failed job) kills its fork: the job
forwards SIGINT and SIGTERM to the fork's process group, and the server kills a fork whose job's
connection closes. The server exits when its parent, the ``headtrace warm`` process, is gone. It
imports the package once: edits to ``src/headtrace`` during a run reach its jobs after a restart.
"""
from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import runpy
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

__all__ = ["ENV", "PRELOAD", "THREAD_ENV", "delegate", "serve", "start", "stop", "run"]

ENV = "HEADTRACE_WARM"  # the server's socket, set by run() for the command it runs
_IN_FORK = "HEADTRACE_WARM_FORK"  # set inside a fork: its script's delegate() returns at once
# What a job imports: torch and transformers (most of the ~5 s), the tables and the package. An entry
# "module:name" also fetches an attribute (transformers imports a model class's module on first use).
PRELOAD = ("torch", "transformers", "numpy", "polars", "safetensors", "snakemake.script", "headtrace.api",
           "headtrace.models.toy.train", "headtrace.models.fingerprint", "headtrace.cell.patterns")
# Snakemake sets these to a job's threads; the math libraries read them when they load.
THREAD_ENV = ("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
              "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
# A job is the server's only if these equal the server's: the thread counts, and the Slurm job it runs
# in (a job Slurm started runs where Slurm placed it, with what Slurm gave it, never in a local fork).
_SAME_AS_SERVER = (*THREAD_ENV, "SLURM_JOB_ID")
_KILL_GRACE_S = 5.0


def delegate() -> None:
    """Run this job's script (``sys.argv[0]``: Snakemake's copy of it, with its preamble) in a fork
    of the warm server, and exit with its status.

    Call it first in a workflow script. Returns (the script runs here, as usual) without
    ``HEADTRACE_WARM``, inside a fork, when the socket does not answer, or when the server refuses
    the job (other thread settings, or a job inside another Slurm job than the server's)."""
    path = os.environ.get(ENV)
    if not path or os.environ.get(_IN_FORK):
        return
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(10.0)
        sock.connect(path)
        # No timeout from here: once the request is sent the server may have forked the job, and
        # running it here too would run it twice. The server always answers (its own reads time out).
        sock.settimeout(None)
        payload = json.dumps({"script": os.path.abspath(sys.argv[0]), "argv": sys.argv, "cwd": os.getcwd(),
                              "env": dict(os.environ), "path": sys.path}).encode()
        socket.send_fds(sock, [len(payload).to_bytes(8, "big")], [0, 1, 2])
        sock.sendall(payload)
        reply = _readline(sock)
    except OSError:
        sock.close()
        return
    if not reply.startswith("pid "):  # "cold": the server will not take this job
        sock.close()
        return
    pid = int(reply.split()[1])

    def forward(signum, frame):
        try:
            os.killpg(pid, signum)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    status = _readline(sock)
    if not status.startswith("exit "):
        print(f"headtrace warm: the server at {path} stopped before the job's fork {pid} ended", file=sys.stderr)
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(status.split()[1]))


def serve(path: str | os.PathLike, preload: tuple[str, ...] = PRELOAD, parent: int | None = None) -> None:
    """Import ``preload``, listen on the Unix socket ``path`` and fork one process per job.

    Single-threaded: one ``select`` loop accepts jobs, notices a job whose connection closed (its
    fork is killed) and reaps forks, sending each job its fork's exit status. Stops on SIGTERM or
    SIGINT, or when ``parent`` (a pid) is no longer this process's parent; kills the forks still
    running and removes the socket."""
    start = time.monotonic()
    for spec in preload:
        module, _, name = spec.partition(":")
        loaded = importlib.import_module(module)
        if name:
            getattr(loaded, name)
    print(f"imported {len(preload)} modules and classes in {time.monotonic() - start:.1f} s", flush=True)
    own = {k: os.environ.get(k) for k in _SAME_AS_SERVER}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    gc.collect()
    gc.freeze()  # the imported objects stay out of the forks' collections: fewer pages copied
    path = os.fspath(path)
    if os.path.exists(path):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print(f"listening on {path}", flush=True)
    jobs: dict[socket.socket, int] = {}  # a job's connection -> its fork
    orphans: dict[socket.socket, float] = {}  # closed by their job: fork sent SIGTERM, SIGKILL after this time
    try:
        while not stop and (parent is None or os.getppid() == parent):
            watched = [listener, *(c for c in jobs if c not in orphans)]
            readable, _, _ = select.select(watched, [], [], 0.2)
            for conn in readable:
                if conn is listener:
                    _accept(listener, jobs, own)
                elif not conn.recv(1):  # the job's process is gone: so goes its fork
                    _signal(jobs[conn], signal.SIGTERM)
                    orphans[conn] = time.monotonic() + _KILL_GRACE_S
            for conn, pid in list(jobs.items()):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    print(f"fork {pid}: exit {os.waitstatus_to_exitcode(status)}", flush=True)
                    if conn not in orphans:
                        _send(conn, f"exit {os.waitstatus_to_exitcode(status) % 256}\n")
                    conn.close()
                    del jobs[conn]
                    orphans.pop(conn, None)
                elif conn in orphans and time.monotonic() > orphans[conn]:
                    _signal(pid, signal.SIGKILL)
    finally:
        _stop_forks(list(jobs.values()))
        for conn in jobs:
            conn.close()
        listener.close()
        if os.path.exists(path):
            os.unlink(path)


def run(command: list[str], *, preload: tuple[str, ...] = PRELOAD, socket_dir: str | None = None,
        log: str | None = None) -> int:
    """Start a server that imports ``preload``, run ``command`` with ``HEADTRACE_WARM`` set, stop
    the server; the command's exit status. The command starts at once: jobs that start before the
    server listens (its imports take seconds) run in their own processes. The server's own output
    goes to ``log`` (default: discarded); a server that ended early is reported on stderr."""
    folder = tempfile.mkdtemp(prefix="headtrace-warm-", dir=socket_dir)
    path = os.path.join(folder, "socket")
    if log:
        Path(log).parent.mkdir(parents=True, exist_ok=True)
    out = open(log, "w") if log else subprocess.DEVNULL
    server = start(path, preload, stdout=out)
    try:
        return subprocess.call(command, env=dict(os.environ, **{ENV: path}))
    except KeyboardInterrupt:  # Ctrl-C reached the command too; the server and its forks stop below
        return 130
    finally:
        ended = server.poll()
        stop(server)
        if log:
            out.close()
        if ended:
            tail = Path(log).read_text()[-2000:] if log else ""
            print(f"headtrace warm: the server ended early (status {ended}); jobs ran in their own processes"
                  + (f". Its log ({log}):\n{tail}" if tail else ""), file=sys.stderr)
        for leftover in (path, folder):
            if os.path.exists(leftover):
                (os.unlink if leftover == path else os.rmdir)(leftover)


def start(path: str, preload: tuple[str, ...] = PRELOAD, *, env: dict | None = None,
          stdout=subprocess.DEVNULL) -> subprocess.Popen:
    """Start a server on the socket ``path`` in its own session, with one-thread settings
    (:data:`THREAD_ENV` = 1) over ``env`` (default: this process's), serving while this process
    lives; it binds the socket once its imports are done. :func:`run` uses it."""
    env = {**(os.environ if env is None else env), **{k: "1" for k in THREAD_ENV}}
    return subprocess.Popen([sys.executable, "-m", "headtrace.runtime.warm", path, str(os.getpid()), *preload],
                            env=env, stdout=stdout, stderr=subprocess.STDOUT, start_new_session=True)


def stop(server: subprocess.Popen) -> None:
    """Stop a server :func:`start` started (and its forks): terminate, killed after 30 s."""
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:  # pragma: no cover
        server.kill()
        server.wait()


# --- the server's parts -------------------------------------------------------------------------

def _accept(listener: socket.socket, jobs: dict, own: dict) -> None:
    conn, _ = listener.accept()
    conn.settimeout(10.0)
    fds: list[int] = []
    try:
        head, fds, _, _ = socket.recv_fds(conn, 8, 3)
        request = json.loads(_recv_exactly(conn, int.from_bytes(head, "big")))
        if len(fds) != 3 or any(request["env"].get(k) != v for k, v in own.items()):
            _send(conn, "cold\n")
            conn.close()
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the fork: never returns
            listener.close()
            for other in jobs:
                other.close()
            conn.close()
            _run_job(request, fds)
        try:  # the fork leads its own process group (it says so too): signals to the group reach it at once
            os.setpgid(pid, pid)
        except OSError:  # pragma: no cover (the fork got there first, or has already ended)
            pass
        print(f"fork {pid}: {request['script']}", flush=True)
        _send(conn, f"pid {pid}\n")
        conn.settimeout(None)
        jobs[conn] = pid
    except (OSError, ValueError, KeyError):
        conn.close()
    finally:
        for fd in fds:
            os.close(fd)


def _run_job(request: dict, fds: list[int]) -> None:
    """In the fork: become the job (its streams, folder, environment, arguments), run its script
    from the top, run the exit handlers and exit with its status."""
    code = 1
    try:
        os.setpgid(0, 0)  # the job's signals reach this fork and whatever it starts
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[_IN_FORK] = "1"
        sys.argv = list(request["argv"])
        sys.path[:] = request["path"]
        try:
            runpy.run_path(request["script"], run_name="__main__")
            code = 0
        except SystemExit as e:
            code = _exit_code(e.code)
        except BaseException:
            traceback.print_exc()
        atexit._run_exitfuncs()
    except BaseException:  # pragma: no cover (the fork's own set-up failed)
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # pragma: no cover
                pass
        os._exit(code)


def _exit_code(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code % 256
    print(code, file=sys.stderr)
    return 1


def _signal(pid: int, signum: int) -> None:
    """Signal a fork's process group (the fork leads it)."""
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        pass


def _stop_forks(pids: list[int]) -> None:
    """SIGTERM the forks, SIGKILL those still running after the grace period, reap them all."""
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + _KILL_GRACE_S
    running = set(pids)
    while running and time.monotonic() < deadline:
        running = {pid for pid in running if os.waitpid(pid, os.WNOHANG)[0] == 0}
        time.sleep(0.05)
    for pid in running:
        _signal(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


# --- the wire: a length-prefixed JSON request with the job's three streams, replies by line -------

def _readline(sock: socket.socket) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(64)
        if not chunk:
            break
        data += chunk
    return data.decode().strip()


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(min(1 << 16, n - len(data)))
        if not chunk:
            raise ValueError("the job closed its connection mid-request")
        data += chunk
    return bytes(data)


def _send(conn: socket.socket, text: str) -> None:
    try:
        conn.sendall(text.encode())
    except OSError:  # the job is gone
        pass


if __name__ == "__main__":  # python -m headtrace.runtime.warm SOCKET PARENT_PID PRELOAD...  (run() starts it so)
    serve(sys.argv[1], preload=tuple(sys.argv[3:]), parent=int(sys.argv[2]))
