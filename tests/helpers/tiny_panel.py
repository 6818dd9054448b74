"""The session's tiny panel (the ``tiny_panel`` fixture of tests/conftest.py): a two-revision local
tiny-olmo, a tiny GGUF llama and a toy gpt_neox, dry-run then run once under ``headtrace warm`` (as
make demo runs it, its log in logs/warm.log), for every end-to-end test that reads a finished run.

``make test`` runs two pytest-xdist workers, each with its own session fixtures. The run is made once
for both: under the folder the workers share (the pytest-xdist documented pattern), whichever worker
comes first builds it holding a file lock; the other waits on the lock and reads the finished run. A
failed build leaves a note that the waiting worker raises instead of building it again.

**Read-only.** The panel's folder is the same for every test of the session, in both workers: a test
reads it and never writes into it (no run, no rerun, no config change, no deleted output). A test that
changes the run works on ``TinyPanel.copy`` in its own tmp_path (the copy's config still points at the
shared checkpoints: read them, do not write them), or keeps its own run.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import tiny
import yaml
from filelock import FileLock

from helpers.workflow import PROBE, snakemake

TOY_TRAIN = {
    "arch": {"n_layers": 1, "d_model": 32, "n_heads": 2, "d_ff": 64, "vocab_size": 128, "max_position_embeddings": 128},
    "optim": {"batch_size": 4, "seq_len": 64},
    "data": {"repeat_min": 8, "repeat_max": 24, "token_low": 2, "token_high": 128},
}
FOLDER = "tiny-panel"  # under the session's shared temporary folder
LOCK_TIMEOUT_S = 1800  # the build: two Snakemake calls of at most 600 s each, and the checkpoints


@dataclass(frozen=True)
class TinyPanel:
    """The shared run: its working folder (config.yaml, local-ckpts/, text/, results/, logs/), the
    output of its dry run before it ran, and of the run itself."""

    workdir: Path
    dry: str
    out: str

    def copy(self, dest: Path) -> Path:
        """A copy of the run's folder at ``dest`` (Snakemake's metadata and the files' times kept, so
        nothing in it is out of date) for a test that changes the run."""
        shutil.copytree(self.workdir, dest, symlinks=True)
        return dest


def mini_config(local_dir: Path, revisions=("rev-a", "rev-c")) -> dict:
    return {
        "models": {
            "tiny-olmo": {
                "source": "local",
                "path": str(local_dir),
                "family": "auto",
                "tokens": {"rev-a": 1000, "rev-b": 2000, "rev-c": 3000},
                "revisions": list(revisions),
            },
            # a user's own GGUF checkpoints, one file per revision (tiny llamas, SmolLM2's first 1024 tokens)
            "tiny-gguf": {
                "source": "local",
                "path": str(local_dir / "gguf" / "{revision}.gguf"),
                "tokens": {"rev-a": 1000, "rev-c": 3000},
                "revisions": ["rev-a", "rev-c"],
            },
            "tiny-toy": {
                "source": "toy",
                "family": "gpt_neox",
                "tokens_per_step": 256,
                "revisions": ["step0", "step4"],
                "train": TOY_TRAIN,
            },
        },
        "probe": PROBE,
        "capture": {"device": "cpu", "batch_size": 8},
        "ablation": {"n_random": 3, "batch_size": 8},
        # the field's own measures (docs/measures.md): a text probe from a local file, tokenised with the
        # local checkpoints' own (locally built) tokenizer, the toy's bytes
        "repeated_probe": {"n_sequences": 6, "length": 16},
        "text_probe": {"file": "text/*.txt", "split": "paragraph", "seq_len": 32, "n_sequences": 6},
    }


def build(work: Path) -> Path:
    """The panel's folder before any run: three local olmo checkpoints (rev-b listed in ``tokens`` but
    not run), two GGUF files, a text file of 8 paragraphs and config.yaml."""
    local = work / "local-ckpts"
    for i, rev in enumerate(("rev-a", "rev-b", "rev-c")):
        tiny.tiny_model("olmo", seed=i, vocab_size=128, n_heads=4).save_pretrained(local / rev)
        tiny.tiny_tokenizer(local / rev)
    (local / "gguf").mkdir()
    for i, rev in enumerate(("rev-a", "rev-c")):
        tiny.tiny_gguf(local / "gguf" / f"{rev}.gguf", tiny.tiny_model("llama", seed=10 + i, vocab_size=1024),
                       quantize="Q8_0")
    (work / "text").mkdir()
    (work / "text" / "notes.txt").write_text("\n\n".join(" ".join(["the first token of the text is a sink for every head"]
                                                                  * 4) for _ in range(8)))  # 8 paragraphs
    (work / "config.yaml").write_text(yaml.safe_dump(mini_config(local)))
    return work


def shared(root: Path) -> TinyPanel:
    """The panel under ``root`` (the folder every worker of the session sees), built and run by the first
    caller; a later caller, in this process or another, waits for it and gets the same run."""
    work, done, failed = root / FOLDER, root / f"{FOLDER}.json", root / f"{FOLDER}.failed"
    with FileLock(str(root / f"{FOLDER}.lock"), timeout=LOCK_TIMEOUT_S):
        if failed.exists():
            raise AssertionError(f"the session's tiny panel failed in another worker:\n{failed.read_text()}")
        if not done.exists():
            try:
                work.mkdir()
                build(work)
                dry = snakemake(work, "-n")
                out = snakemake(work, warm=True)
            except BaseException as err:
                failed.write_text(f"{type(err).__name__}: {err}")
                raise
            done.write_text(json.dumps({"dry": dry, "out": out}))
        ran = json.loads(done.read_text())
    return TinyPanel(work, ran["dry"], ran["out"])
