"""headtrace.runtime.warm: a job handed to the warm server runs in a fork with the job's streams,
folder, environment and arguments and exits with the script's status; without a server, or with
other thread settings, it runs in its own process; a killed job takes its fork with it; ``run``
stops the server and removes its socket."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from headtrace.runtime import warm

JOB = """\
import os, sys, time
from headtrace.runtime import warm
warm.delegate()
mode = sys.argv[1]
where = "fork" if os.environ.get("HEADTRACE_WARM_FORK") else "own"
print(where, os.getpid(), os.getcwd(), os.environ.get("JOB_VAR"), "json" in sys.modules, flush=True)
if mode == "fail":
    raise RuntimeError("the job failed")
if mode == "sleep":
    open("fork.pid", "w").write(str(os.getpid()))
    time.sleep(60)
sys.exit(int(mode))
"""
ONE_THREAD = {k: "1" for k in warm.THREAD_ENV}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("warm") / "socket")
    proc = warm.start(path, ("json",), env={k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"},
                      stdout=None)
    deadline = time.monotonic() + 60
    while not os.path.exists(path):  # bound after its imports
        assert proc.poll() is None and time.monotonic() < deadline, "the warm server did not start"
        time.sleep(0.05)
    yield path
    proc.terminate()
    assert proc.wait(timeout=30) == 0
    assert not os.path.exists(path)  # the server removes its socket


def _job(tmp_path: Path, mode: str, server: str | None, **env) -> subprocess.Popen:
    (tmp_path / "job.py").write_text(JOB)
    full = {k: v for k, v in os.environ.items() if k not in (warm.ENV, "SLURM_JOB_ID")}
    full = {**full, **ONE_THREAD, "JOB_VAR": "from-the-job", **env}
    if server:
        full[warm.ENV] = server
    return subprocess.Popen([sys.executable, "job.py", mode], cwd=tmp_path, env=full, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_job_runs_in_a_fork_with_its_folder_environment_streams_and_status(server, tmp_path):
    job = _job(tmp_path, "3", server)
    out, _ = job.communicate(timeout=60)
    where, pid, cwd, var, preloaded = out.split()
    assert job.returncode == 3
    assert (where, cwd, var, preloaded) == ("fork", str(tmp_path), "from-the-job", "True")
    assert int(pid) != job.pid


def test_a_failing_job_prints_its_traceback_on_its_own_stderr_and_exits_1(server, tmp_path):
    job = _job(tmp_path, "fail", server)
    out, err = job.communicate(timeout=60)
    assert job.returncode == 1
    assert out.startswith("fork")
    assert "RuntimeError: the job failed" in err


@pytest.mark.parametrize("case", ["no server", "no socket", "more threads", "a slurm job"])
def test_without_a_server_with_other_thread_settings_or_under_slurm_the_job_runs_in_its_own_process(
        server, tmp_path, case):
    socket_path = {"no server": None, "no socket": str(tmp_path / "none")}.get(case, server)
    env = {"more threads": {"OMP_NUM_THREADS": "2"}, "a slurm job": {"SLURM_JOB_ID": "4242"}}.get(case, {})
    job = _job(tmp_path, "0", socket_path, **env)
    out, err = job.communicate(timeout=60)
    assert job.returncode == 0, err
    assert out.split()[:2] == ["own", str(job.pid)]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_killing_a_job_kills_its_fork(server, tmp_path, signum):
    job = _job(tmp_path, "sleep", server)
    pid_file = tmp_path / "fork.pid"
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and job.poll() is None
        time.sleep(0.05)
    fork = int(pid_file.read_text())
    assert fork != job.pid
    job.send_signal(signum)  # SIGTERM: forwarded by the job; SIGKILL: the server sees the job's connection close
    job.communicate(timeout=30)
    deadline = time.monotonic() + 15
    while _alive(fork):
        assert time.monotonic() < deadline, f"the fork {fork} outlived its job"
        time.sleep(0.05)


def test_run_passes_the_socket_returns_the_status_and_stops_the_server(tmp_path):
    seen = tmp_path / "seen"
    code = warm.run([sys.executable, "-c", f"import os, sys; open({str(seen)!r}, 'w').write(os.environ"
                     f"[{warm.ENV!r}]); sys.exit(5)"], preload=("json",), socket_dir=str(tmp_path),
                    log=str(tmp_path / "logs" / "warm.log"))
    assert code == 5
    socket_path = Path(seen.read_text())
    assert socket_path.parent.parent == tmp_path
    assert not socket_path.parent.exists()  # socket and its folder removed


def test_a_server_that_cannot_start_leaves_the_jobs_in_their_own_processes_and_says_so(tmp_path, capfd):
    (tmp_path / "job.py").write_text(JOB)
    wait = "import time, sys; time.sleep(3); sys.exit(0)"  # the server fails while the command runs
    code = warm.run([sys.executable, "-c", wait], preload=("no_such_module",), socket_dir=str(tmp_path),
                    log=str(tmp_path / "warm.log"))
    assert code == 0
    err = capfd.readouterr().err
    assert "the server ended early (status 1); jobs ran in their own processes" in err
    assert "No module named 'no_such_module'" in err


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
