"""A local revision folder without loadable weights is refused when the DAG is built, naming model,
revision and folder (headtrace.panel.local_weights); `make demo KEEP_GOING=1` passes --keep-going."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from headtrace.core.errors import ConfigError
from headtrace.panel import local_weights

sys.path.insert(0, str(Path(__file__).parent))
from tiny import tiny_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    for rev in ("step100", "step400"):
        tiny_model("gpt2", vocab_size=128).save_pretrained(root / rev)
    return root


def _cfg(root, revisions):
    return {"models": {"my-run": {"source": "local", "path": f"{root}/{{revision}}", "revisions": revisions,
                                  "tokens_per_step": 1000}}}


def test_revisions_with_weights_pass(run):
    local_weights.check(_cfg(run, ["step100", "step400"]))


def test_a_folder_without_weights_is_named_before_any_job(run, tmp_path):
    (tmp_path / "step100").mkdir()
    (tmp_path / "step100" / "config.json").write_text((run / "step100" / "config.json").read_text())
    (tmp_path / "step100" / "training_args.bin").write_bytes(b"x")
    with pytest.raises(ConfigError) as err:
        local_weights.check(_cfg(tmp_path, ["step100", "step400"]))  # step400 absent: warned elsewhere
    msg = str(err.value)
    assert "models.my-run revision 'step100'" in msg and str(tmp_path / "step100") in msg
    assert "training_args.bin" in msg and "no job has started" in msg
    assert "step400" not in msg
    assert len(msg.splitlines()) <= 4


def test_make_demo_keep_going_passes_the_flag():
    def dry(*extra):
        return subprocess.run(["make", "-n", "demo", "CONFIG=x.yaml", *extra], cwd=ROOT, capture_output=True,
                              text=True).stdout
    assert "--keep-going" in dry("KEEP_GOING=1")
    assert "--keep-going" not in dry()
