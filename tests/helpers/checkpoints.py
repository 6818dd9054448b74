"""Checkpoints on disk as the loaders meet them: a local Hugging Face cache with branches (no network),
and a pickle copy (single or sharded) of a safetensors checkpoint, as transformers lays them out."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch
from safetensors.torch import load_file

from headtrace.models import weights


def commit(name: str) -> str:
    """A commit hash made up from ``name``: the same name gives the same commit."""
    return hashlib.sha1(name.encode()).hexdigest()


def add_revision(cache, repo: str, branch: str, model: torch.nn.Module, *, safetensors: bool = True) -> str:
    """``model`` as ``repo``'s ``branch`` in the cache ``cache``, laid out as huggingface_hub writes it
    (``models--org--name/{refs/<branch>, snapshots/<commit>/...}``); the snapshot's commit."""
    storage = cache / ("models--" + repo.replace("/", "--"))
    commit_hash = commit(repo + branch)
    snap = storage / "snapshots" / commit_hash
    model.save_pretrained(snap)
    if not safetensors:  # transformers 5 always writes safetensors: turn it into a pickle-only repo
        for f in snap.glob("*.safetensors"):
            f.unlink()
        torch.save(model.state_dict(), snap / "pytorch_model.bin")
    (storage / "refs").mkdir(parents=True, exist_ok=True)
    (storage / "refs" / branch).write_text(commit_hash)
    return commit_hash


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


class Payload:
    """Unpickling this calls os.system: creates the marker file if anything runs it."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def save_pickle_copy(src: Path, dst: Path, shards: int = 1, **save_kw) -> list[Path]:
    """``dst``: ``src``'s config and its safetensors weights as ``pytorch_model.bin`` (``shards=1``)
    or ``shards`` shard files with a ``pytorch_model.bin.index.json``, as transformers lays them out."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.suffix == ".json" and not f.name.endswith(".index.json"):
            (dst / f.name).write_bytes(f.read_bytes())
    sd = {}
    for f in sorted(src.glob("*.safetensors")):
        sd.update(load_file(f))
    if shards == 1:
        torch.save(sd, dst / weights.PICKLE_SINGLE, **save_kw)
        return [dst / weights.PICKLE_SINGLE]
    keys = sorted(sd)
    weight_map, files = {}, []
    for i in range(shards):
        name = f"pytorch_model-{i + 1:05d}-of-{shards:05d}.bin"
        part = {k: sd[k] for k in keys[i::shards]}
        torch.save(part, dst / name, **save_kw)
        weight_map.update(dict.fromkeys(part, name))
        files.append(dst / name)
    total = sum(t.numel() * t.element_size() for t in sd.values())
    (dst / weights.PICKLE_INDEX).write_text(json.dumps({"metadata": {"total_size": total},
                                                         "weight_map": weight_map}))
    return files
