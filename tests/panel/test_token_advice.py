"""A revision without a step: the first message gives the advice that works (tokens: {final: N}),
alongside tokens_per_step for the revisions that have a step, never tokens_per_step alone."""
from __future__ import annotations

import pytest

from headtrace.core.errors import ConfigError
from headtrace.core import revisions as revs
from headtrace.panel import config as panel


def _cfg(tmp_path, **extra):
    return {"models": {"my-run": {"source": "local", "path": f"{tmp_path}/{{revision}}", "family": "gpt2",
                                  "revisions": ["step100", "step400", "final"], **extra}}}


def _message(cfg) -> str:
    with pytest.raises(ConfigError) as err:
        panel.check(cfg)
    return str(err.value)


def test_no_token_keys_names_both_fixes_at_once(tmp_path):
    msg = _message(_cfg(tmp_path))
    assert "models.my-run.tokens_per_step" in msg and "models.my-run.tokens: {final: N}" in msg


def test_with_tokens_per_step_the_stepless_revision_gets_the_tokens_map(tmp_path):
    msg = _message(_cfg(tmp_path, tokens_per_step=1000))
    assert "'final'" in msg and "tokens: {final: N}" in msg and "apply only to names with a step" in msg


def test_the_advised_config_passes(tmp_path):
    cfg = _cfg(tmp_path, tokens_per_step=1000, tokens={"final": 2_000_000})
    assert panel.cell_tokens(cfg, "my-run", "final") == 2_000_000
    assert revs.tokens_for("step400", cfg["models"]["my-run"]) == 400_000
