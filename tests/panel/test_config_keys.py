"""Schema errors in a few lines: the key, where it is, the closest valid key (headtrace.panel.keys),
before Snakemake's validation prints the schema."""
from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from headtrace.core.errors import ConfigError
from headtrace.panel import keys

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
LOCAL = yaml.safe_load((ROOT / "config" / "examples" / "local.yaml").read_text())


def _local(**top):
    cfg = copy.deepcopy(LOCAL)
    cfg.update(top)
    return cfg


def test_a_typo_inside_a_model_names_key_place_and_the_closest_key():
    cfg = _local()
    cfg["models"]["my-run"]["tokens_per_stpe"] = cfg["models"]["my-run"].pop("tokens_per_step")
    with pytest.raises(ConfigError) as err:
        keys.check(cfg)
    msg = str(err.value)
    assert "`tokens_per_stpe` in `models.my-run`" in msg and "did you mean `tokens_per_step`?" in msg
    assert len(msg.splitlines()) <= 3


def test_a_top_level_typo_and_a_nested_one_are_said_together():
    cfg = _local(prob={"derive": True}, screen={"basline": "clean"})
    lines = keys.problems(cfg)
    assert "unknown key `prob` at the top level: did you mean `probe`?" in lines
    assert "unknown key `basline` in `screen`: did you mean `baseline`?" in lines
    assert len(lines) == 2


def test_a_key_with_no_close_match_lists_the_valid_ones():
    (line,) = keys.problems(_local(capture={"zzz": 1}))
    assert "`zzz` in `capture`" in line and "valid keys here:" in line and "batch_size" in line


def test_a_wrong_value_names_its_key_path_in_one_line():
    (line,) = keys.problems(_local(screen={"baseline": "median"}))
    assert line.startswith("`screen.baseline`: 'median' is not one of")


@pytest.mark.parametrize("path", sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "config").rglob("*.yaml")
                                        if p.name != "schema.yaml"))
def test_every_shipped_config_with_models_passes(path):
    cfg = yaml.safe_load((ROOT / path).read_text())
    # an overlay (merged into another file: models without a source) is checked merged, elsewhere
    if isinstance(cfg, dict) and cfg.get("models") and all("source" in m for m in cfg["models"].values()):
        assert keys.problems(cfg) == []


@pytest.mark.slow
def test_snakemake_says_a_typo_in_a_few_lines_before_any_job(tmp_path):
    cfg = _local()
    cfg["models"]["my-run"]["tokens_per_stpe"] = cfg["models"]["my-run"].pop("tokens_per_step")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path), "--configfile",
                           str(tmp_path / "c.yaml"), "-n"], capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "did you mean `tokens_per_step`?" in out
    assert len(out.strip().splitlines()) <= 8, out
