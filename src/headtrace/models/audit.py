"""Audit before download: which branches of a Hub repository serve the same weight files.

The Hub's metadata carries, for every LFS file of a branch, the sha256 of its content
(``huggingface_hub.HfApi.list_repo_tree(..., expand=True)`` → ``RepoFile.lfs.sha256``), so
branches that serve identical weights can be found without downloading any: 76 of pythia-2.8b's
154 step branches serve ``main``'s ``model.safetensors`` (EleutherAI/pythia#205); pythia-12b's
``step50000`` and ``step58000`` serve ``main``'s first ``.bin`` shard beside their own others
(#206). What cannot be seen here (a branch trained from another init, #203) needs the weights:
the lineage check (:mod:`headtrace.findings.lineage`) after capture.

* :func:`branch_weights`: a branch's weight files as the loader picks them (``*.safetensors`` when
  there are any, else ``pytorch_model*.bin``), name → (sha256, bytes);
* :func:`audit`: pure, over ``{branch: [RepoFile | RepoFolder, ...]}`` (what ``list_repo_tree``
  returns, live or recorded): one row per branch with the branches serving identical weights
  (``duplicate_of``: the latest of the group in training order; the lineage check flags every member), the later
  branches it shares a shard with, and ``no_weights``;
* :func:`fetch_trees` (network) and :func:`save_recording` / :func:`load_recording` (a recording of
  the same objects as JSON, in the Hub API's own field names, for offline use and the tests).
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import polars as pl

from headtrace.core.revisions import parse_step, sort_revisions

__all__ = ["branch_weights", "audit", "duplicate_groups", "flagged_branches", "format_table", "notes",
           "fetch_trees", "load_recording", "save_recording", "check_before_fetch", "AUDIT_SCHEMA"]

_SHARD_BIN = re.compile(r"^pytorch_model(-\d+-of-\d+)?\.bin$")

AUDIT_SCHEMA = {
    "branch": pl.String, "format": pl.String, "n_files": pl.Int32, "bytes": pl.Int64,
    "duplicate_of": pl.String, "same_as": pl.List(pl.String), "shares_shard_with": pl.List(pl.String),
    "shared_files": pl.List(pl.String), "no_weights": pl.Boolean, "status": pl.String,
}


def _is_file(entry) -> bool:
    return hasattr(entry, "blob_id") or hasattr(entry, "lfs")


def branch_weights(entries: Iterable) -> tuple[str | None, dict[str, tuple[str, int]]]:
    """``(format, {file name: (sha256, bytes)})`` of the weight files in one branch's tree listing
    (top-level files; safetensors win over pickles, as :func:`headtrace.models.weights.weight_files`).
    The sha256 is the LFS one (the content's); a file not in LFS has only its git blob id, used
    instead (still equal exactly when the bytes are). ``(None, {})`` when there are none."""
    files = [e for e in entries if _is_file(e) and "/" not in e.path]

    def digest(e):
        return (e.lfs.sha256 if e.lfs is not None else f"git:{e.blob_id}",
                int(e.lfs.size if e.lfs is not None else (e.size or 0)))

    st = {e.path: digest(e) for e in files if e.path.endswith(".safetensors")}
    if st:
        return "safetensors", st
    pk = {e.path: digest(e) for e in files if _SHARD_BIN.match(e.path)}
    return ("pickle", pk) if pk else (None, {})


def audit(trees: Mapping[str, Iterable], all_branches: Iterable[str] | None = None) -> pl.DataFrame:
    """One row per branch (training order, ``main`` last; schema :data:`AUDIT_SCHEMA`): the branches
    serving byte-identical weights (``same_as``; ``duplicate_of``: the group's latest, which every
    other member is taken to copy), the later branches whose weight file (shard) it serves
    (``shares_shard_with``, ``shared_files``), and ``no_weights`` (no safetensors or pytorch_model
    .bin file). ``status``: ok | duplicate | shares shard | no weights | original (of a group) | final
    alias (the repository's last step branch identical to ``main``: the final checkpoint under two
    names, not a flag; ``all_branches``: the repository's branch names when ``trees`` holds only some)."""
    order = sort_revisions(trees)
    weights = {b: branch_weights(trees[b]) for b in order}
    key = {b: tuple(sorted(sha for sha, _ in w[1].values())) for b, w in weights.items()}
    groups: dict[tuple, list[str]] = {}
    for b in order:
        if key[b]:
            groups.setdefault(key[b], []).append(b)
    holders: dict[str, list[str]] = {}
    for b in order:
        for sha, _ in weights[b][1].values():
            holders.setdefault(sha, []).append(b)
    # main is normally the last step's branch under a second name (Pythia's step143000): not a flag
    stepped = [b for b in sort_revisions(all_branches or trees) if parse_step(b) is not None]
    last_stepped = stepped[-1] if stepped else None
    rows = []
    for b in order:
        fmt, files = weights[b]
        same = [o for o in groups.get(key[b], []) if o != b] if key[b] else []
        group = groups.get(key[b], [b])
        dup = group[-1] if key[b] and len(group) > 1 and group[-1] != b else None
        later = order[order.index(b) + 1:]
        shard_with, shared = [], []
        for name, (sha, _) in files.items():
            owner = holders[sha][-1]  # the latest branch serving it is taken as its owner
            if owner in later and key[owner] != key[b]:
                shared.append(name)
                shard_with += [owner] if owner not in shard_with else []
        status = ("no weights" if not files else "final alias" if dup == "main" and b == last_stepped
                  else "duplicate" if dup else "shares shard" if shard_with else "original" if same else "ok")
        rows.append({"branch": b, "format": fmt, "n_files": len(files),
                     "bytes": sum(s for _, s in files.values()), "duplicate_of": dup, "same_as": same,
                     "shares_shard_with": shard_with, "shared_files": sorted(shared), "no_weights": not files,
                     "status": status})
    return pl.DataFrame(rows, schema=AUDIT_SCHEMA)


def duplicate_groups(table: pl.DataFrame) -> list[list[str]]:
    """Groups of branches serving identical weights, each in training order (its original last)."""
    seen, out = set(), []
    for b, same in table.select("branch", "same_as").iter_rows():
        if same and b not in seen:
            g = [x for x in table["branch"].to_list() if x == b or x in same]
            seen.update(g)
            out.append(g)
    return out


def flagged_branches(table: pl.DataFrame) -> dict[str, str]:
    """branch -> what is wrong with it (duplicates, shard sharers, no weights)."""
    out = {}
    for r in table.iter_rows(named=True):
        if r["status"] == "final alias":
            continue
        if r["duplicate_of"]:
            out[r["branch"]] = f"duplicate of {r['duplicate_of']} (audit)"
        elif r["shares_shard_with"]:
            out[r["branch"]] = (f"serves {', '.join(r['shared_files'])} of {', '.join(r['shares_shard_with'])} "
                                "(audit)")
        elif r["no_weights"]:
            out[r["branch"]] = "no loadable weights (audit)"
    return out


def notes(table: pl.DataFrame) -> dict[str, str]:
    """The comments ``headtrace revisions`` writes after each flagged branch (:func:`flagged_branches`)."""
    return flagged_branches(table)


def format_table(table: pl.DataFrame, hf_id: str = "") -> str:
    """The audit as a plain-text table (flagged branches first, then a count of the healthy ones)."""
    bad = table.filter(pl.col("branch").is_in(list(flagged_branches(table))))
    groups = duplicate_groups(table)
    lines = [f"audit of {hf_id or 'the repository'}: {table.height} branches, {bad.height} flagged, "
             f"{len(groups)} group{'s' if len(groups) != 1 else ''} of identical weights"]
    if not bad.is_empty():
        width = max(len(b) for b in bad["branch"]) + 2
        lines.append(f"{'branch'.ljust(width)}status        what")
        for r in bad.iter_rows(named=True):
            what = (f"every weight file = {r['duplicate_of']}'s" if r["duplicate_of"]
                    else f"{', '.join(r['shared_files'])} = {', '.join(r['shares_shard_with'])}'s"
                    if r["shares_shard_with"] else "no safetensors or pytorch_model*.bin file")
            lines.append(f"{r['branch'].ljust(width)}{r['status'].ljust(14)}{what}")
    for g in groups:
        lines.append(f"identical weights: {', '.join(g)}")
    return "\n".join(lines)


# ---- the Hub (network) and recordings ----------------------------------------------------------


def fetch_trees(hf_id: str, branches: Iterable[str] | None = None, token=None) -> dict[str, list]:
    """``{branch: list_repo_tree(hf_id, revision=branch, expand=True)}`` for ``branches`` (default:
    every branch). Network: one listing per branch, no weight is downloaded."""
    from huggingface_hub import HfApi  # network client: audit and fetch only

    api = HfApi(token=token)
    if branches is None:
        branches = [b.name for b in api.list_repo_refs(hf_id).branches]
    return {b: list(api.list_repo_tree(hf_id, revision=b, expand=True)) for b in branches}


def _entry_json(e) -> dict:
    if not _is_file(e):
        return {"type": "directory", "path": e.path, "oid": getattr(e, "tree_id", None)}
    out = {"type": "file", "path": e.path, "size": e.size, "oid": e.blob_id}
    if e.lfs is not None:
        out["lfs"] = {"oid": e.lfs.sha256, "size": e.lfs.size, "pointerSize": e.lfs.pointer_size}
    return out


def save_recording(trees: Mapping[str, Iterable], path, hf_id: str = "") -> None:
    """Write ``trees`` as JSON in the Hub API's field names (what ``RepoFile(**entry)`` reads)."""
    data = {"hf_id": hf_id, "trees": {b: [_entry_json(e) for e in es] for b, es in trees.items()}}
    Path(path).write_text(json.dumps(data, indent=1) + "\n")


def load_recording(path) -> tuple[str, dict[str, list]]:
    """``(hf_id, {branch: [RepoFile | RepoFolder, ...]})`` from a recording (:func:`save_recording`):
    the objects huggingface_hub builds from the same JSON."""
    from huggingface_hub.hf_api import RepoFile, RepoFolder  # the client's classes: only where recordings are read

    data = json.loads(Path(path).read_text())
    trees = {}
    for b, entries in data["trees"].items():
        trees[b] = [RepoFile(**{k: v for k, v in e.items() if k != "type"}) if e.get("type", "file") == "file"
                    else RepoFolder(path=e["path"], oid=e.get("oid")) for e in entries]
    return data.get("hf_id", ""), trees


def check_before_fetch(hf_id: str, revision: str, final: str = "main") -> str | None:
    """The fetch job's check before it downloads ``hf_id@revision``: does the revision serve the
    final branch's weight files, or none at all? Returns the finding in words (None: nothing found;
    a sentence saying why it was skipped when offline or the listing fails). Network: the branch list
    and two tree listings."""
    from huggingface_hub import constants  # the network client: only the fetch job's check

    if constants.HF_HUB_OFFLINE:
        return f"audit of {hf_id}@{revision} skipped: HF_HUB_OFFLINE is set"
    try:
        from huggingface_hub import HfApi  # network client, as above

        every = [b.name for b in HfApi().list_repo_refs(hf_id).branches]
        branches = [revision] if revision == final or final not in every else [revision, final]
        table = audit(fetch_trees(hf_id, branches), every)
    except Exception as e:  # the audit informs; the download below reports its own errors
        return f"audit of {hf_id}@{revision} skipped: {type(e).__name__}: {e}"
    found = flagged_branches(table.filter(pl.col("branch") == revision))
    return f"audit: {hf_id}@{revision}: {found[revision]}" if revision in found else None
