"""Fetching and loading checkpoints: safetensors, or checked pickles; never ``trust_remote_code``.

* :func:`fetch` downloads one revision (config, tokenizer, and its ``*.safetensors`` weights, or,
  for a revision without any, ``pytorch_model.bin`` or its shards with their index) into the
  Hugging Face cache (``HF_HOME`` / ``HF_HUB_CACHE`` honoured unless ``cache_dir``). Which weights
  a revision has is read from the repository's file list first (:func:`allow_patterns`).
* :func:`load_model` loads one checkpoint with the transformers class of its family
  (:mod:`headtrace.models.families`); a hub revision is resolved from the local cache by default
  (``offline=True``), so compute nodes need no network once ``fetch`` ran on the login node.
* :func:`resolve_device`, :func:`auto_batch_size`, :func:`load_for_cell` (what the workflow's
  capture/ablate scripts call).

Errors about missing repos, revisions (a branch the Hub does not serve: the message names it and
the command that lists the real branches) or weights, pickles that ask for more than tensors
(:mod:`headtrace.models.weights`), and loading reports with missing or unexpected tensors
(:func:`check_loading_info`) are :class:`CheckpointError` and name the model and revision.
docs/integrity.md says what is loaded and what refused.
"""
from __future__ import annotations

import os
import re
from contextlib import contextmanager
from pathlib import Path

import torch
import transformers

from headtrace.core.errors import ConfigError
from headtrace.models import context, dequantize, families, gguf, weights
from headtrace.models.layout import hub_checkpoint, local_checkpoint_path
from headtrace.probe import fit

__all__ = [
    "ALLOW_PATTERNS", "PICKLE_PATTERNS", "allow_patterns", "check_loading_info", "DTYPES", "CheckpointError", "fetch", "snapshot_path", "load_model",
    "resolve_device", "auto_batch_size", "load_for_cell", "toy_checkpoint_dir", "cell_checkpoint",
    "local_checkpoint_dir", "hub_checkpoint",
]

ALLOW_PATTERNS = ["*.json", "*.safetensors", "tokenizer*", "*.txt", "*.model"]
# a revision without safetensors: its pickle weights (single file, or shards + index); nothing else *.bin
PICKLE_PATTERNS = ["*.json", weights.PICKLE_SINGLE, "pytorch_model-*-of-*.bin", "tokenizer*", "*.txt", "*.model"]
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
          "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
TOY_ROOT = "resources/checkpoints"


CheckpointError = weights.CheckpointError  # defined there, so weights/fingerprint need no transformers


def allow_patterns(files: list[str], what: str = "checkpoint") -> list[str]:
    """What :func:`fetch` downloads for a revision whose repository lists ``files``: the
    safetensors patterns (:data:`ALLOW_PATTERNS`) when it has any ``*.safetensors`` weight file,
    else the pickle patterns (:data:`PICKLE_PATTERNS`) when it has ``pytorch_model.bin`` or a shard
    index; else a :class:`CheckpointError` naming ``what``. Only top-level files count (the loader
    reads no sub-folder)."""
    top = {f for f in files if "/" not in f}
    if any(f.endswith(".safetensors") for f in top):
        return ALLOW_PATTERNS
    if weights.PICKLE_SINGLE in top or weights.PICKLE_INDEX in top:
        return PICKLE_PATTERNS
    other = sorted(f for f in top if f.endswith((".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack")))
    raise CheckpointError(
        f"{what}: no weights headtrace loads (neither *.safetensors nor {weights.PICKLE_SINGLE} or "
        f"{weights.PICKLE_INDEX})" + (f"; the revision has {', '.join(other[:3])}" if other else ""))


@contextmanager
def _hub_errors(hf_id: str, revision: str | None, cache_dir: str | None = None, local_files_only: bool = False):
    """huggingface_hub's errors as :class:`CheckpointError` naming the model and revision."""
    from huggingface_hub import errors as hf_errors  # only where the hub is asked (as in _snapshot)

    what = _where(hf_id, revision)
    try:
        yield
    except hf_errors.RepositoryNotFoundError as e:  # also GatedRepoError
        raise CheckpointError(f"{what}: repository not found or not accessible ({type(e).__name__}: "
                              f"{str(e).splitlines()[0]})") from e
    except hf_errors.RevisionNotFoundError as e:  # a branch the Hub does not serve, e.g. one from a recorded list
        raise CheckpointError(f"{what}: the repository has no branch, tag or commit '{revision}' "
                              f"(list its branches with `headtrace revisions {hf_id} --list`)") from e
    except getattr(hf_errors, "IncompleteSnapshotError", ()) as e:
        raise CheckpointError(f"{what}: the cached snapshot is incomplete; fetch it again ({e})") from e
    except (hf_errors.LocalEntryNotFoundError, FileNotFoundError) as e:
        where = cache_dir or "the Hugging Face cache (HF_HOME / HF_HUB_CACHE)"
        raise CheckpointError(
            f"{what}: not available locally in {where}"
            + (" (offline: run the fetch step, e.g. on a node with internet, first)" if local_files_only else "")
            + f": {str(e).splitlines()[0] if str(e) else type(e).__name__}"
        ) from e
    except hf_errors.EntryNotFoundError as e:
        raise CheckpointError(f"{what}: file not found ({str(e).splitlines()[0]})") from e
    except hf_errors.HFValidationError as e:
        raise CheckpointError(f"{what}: invalid repo id or revision ({e})") from e


def _snapshot(hf_id: str, revision: str | None, cache_dir: str | None, local_files_only: bool,
              patterns: list[str] | None = None) -> str:
    # huggingface_hub only where the hub is asked: toy and local models never import it
    from huggingface_hub import snapshot_download

    kwargs = dict(revision=revision, allow_patterns=patterns or ALLOW_PATTERNS, local_files_only=local_files_only)
    if cache_dir is not None:
        kwargs["cache_dir"] = str(cache_dir)
    with _hub_errors(hf_id, revision, cache_dir, local_files_only):
        return snapshot_download(hf_id, **kwargs)


def _repo_files(hf_id: str, revision: str | None) -> list[str]:
    from huggingface_hub import HfApi  # only where the hub is asked (as in _snapshot)

    with _hub_errors(hf_id, revision):
        return list(HfApi().list_repo_files(hf_id, revision=revision))


def fetch(hf_id: str, revision: str, cache_dir: str | None = None) -> str:
    """Download one revision into the Hugging Face cache and return its snapshot folder: config,
    tokenizer and its safetensors weights, or, only for a revision that has no ``*.safetensors``,
    its pickle weights (``pytorch_model.bin`` or shards + index; :func:`allow_patterns` on the
    repository's file list). Pickles are checked statically once downloaded
    (:func:`headtrace.models.weights.check_pickle`), so a refused pickle fails the fetch job.

    Raises :class:`CheckpointError` naming the model and revision when the repository or revision
    does not exist or the revision has no weights headtrace loads.
    """
    what = _where(hf_id, revision)
    patterns = allow_patterns(_repo_files(hf_id, revision), what)
    path = _snapshot(hf_id, revision, cache_dir, local_files_only=False, patterns=patterns)
    _check_pickles(path, what)
    return path


def snapshot_path(hf_id: str, revision: str | None, cache_dir: str | None = None,
                  offline: bool = True) -> str:
    """The local snapshot folder of ``hf_id@revision`` (from the cache when ``offline``; branch
    names are resolved through the cache's ``refs/``, so the pinned commit is used)."""
    path = _snapshot(hf_id, revision, cache_dir, local_files_only=offline)
    _check_weights(path, _where(hf_id, revision))
    return path


def _check_pickles(path: str | Path, what: str) -> tuple[str, list[Path]]:
    """The folder's weights; pickle files checked statically (nothing is unpickled)."""
    fmt, files = _check_weights(path, what)
    if fmt == weights.PICKLE:
        for f in files:
            try:
                weights.check_pickle(f)
            except CheckpointError as e:
                raise CheckpointError(f"{what}: {e}") from e
    return fmt, files


# Keys a checkpoint may lack or carry beyond the class's parameters without anything being wrong:
# buffers recomputed at load (rotary inverse frequencies, causal-mask buffers of old GPT-NeoX/GPT-2
# checkpoints). transformers already drops tied weights (``_tied_weights_keys``) and the class's
# ``_keys_to_ignore_on_load_missing/unexpected`` from its report; these patterns are applied again
# here so the check does not depend on that.
RECOMPUTED = (r"rotary_emb\.inv_freq$", r"\.attention\.(bias|masked_bias)$", r"\.attn\.(bias|masked_bias)$")


def check_loading_info(info: dict, model, what: str, shown: int = 5) -> None:
    """Raise :class:`CheckpointError` naming ``what`` (model and revision) and the first ``shown``
    tensors when transformers' loading report (``output_loading_info=True``) lists missing,
    unexpected or shape-mismatched tensors beyond those the class ties or recomputes
    (the loaded ``model``'s tied weights, only where its config ties them: ``all_tied_weights_keys``, or
    ``_tied_weights_keys`` with ``config.tie_word_embeddings``; the class's
    ``_keys_to_ignore_on_load_missing/unexpected``; :data:`RECOMPUTED`), or error messages. A model
    with a tensor missing would otherwise run with that tensor's random initialisation."""
    tied = getattr(model, "all_tied_weights_keys", None)
    if tied is None:  # older transformers: the class's list, if the config ties at all
        ties = getattr(getattr(model, "config", None), "tie_word_embeddings", False)
        tied = (getattr(model, "_tied_weights_keys", None) or {}) if ties else {}
    tied = set(tied)
    ignore_missing = list(getattr(model, "_keys_to_ignore_on_load_missing", None) or []) + list(RECOMPUTED)
    ignore_unexpected = list(getattr(model, "_keys_to_ignore_on_load_unexpected", None) or []) + list(RECOMPUTED)

    def real(keys, patterns, skip=frozenset()):
        return sorted(k for k in keys if k not in skip and not any(re.search(p, k) for p in patterns))

    missing = real(info.get("missing_keys") or (), ignore_missing, tied)
    unexpected = real(info.get("unexpected_keys") or (), ignore_unexpected)
    mismatched = sorted(str(m[0] if isinstance(m, tuple) else m) for m in info.get("mismatched_keys") or ())
    errors = [str(e).splitlines()[0] for e in info.get("error_msgs") or ()]
    parts = []
    for label, keys in (("missing", missing), ("unexpected", unexpected), ("with a shape the class does not "
                                                                            "have", mismatched), ("errors", errors)):
        if keys:
            more = f" and {len(keys) - shown} more" if len(keys) > shown else ""
            parts.append(f"{len(keys)} {label}: {', '.join(keys[:shown])}{more}")
    if parts:
        raise CheckpointError(
            f"{what}: the checkpoint does not match {type(model).__name__}: " + "; ".join(parts)
            + ". headtrace refuses to run a model whose weights are partly random or ignored; "
            "check the revision's files (a truncated download, a wrong family, another architecture)")


def resolve_device(spec: str | torch.device = "auto") -> torch.device:
    """``"auto"`` → ``cuda`` if available else ``cpu``; otherwise ``torch.device(spec)``.
    A CUDA device that is not available is an error (rather than a silent CPU run)."""
    if isinstance(spec, torch.device):
        dev = spec
    elif spec in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        dev = torch.device(spec)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device '{spec}' requested but CUDA is not available (use 'auto' or 'cpu')")
    return dev


def _family_for(family: str, config) -> families.Family:
    if family in (None, "", "auto"):
        return families.from_model_type(config.model_type)
    return families.get(family)


def load_model(
    source: str,
    path_or_id: str,
    revision: str | None = None,
    *,
    family: str = "auto",
    dtype: str = "fp32",
    device: str | torch.device = "cpu",
    offline: bool = True,
    cache_dir: str | None = None,
    seq_len: int | None = None,
    name: str | None = None,
    token_range: tuple[int, int] | None = None,
    words: str = "config",
):
    """Load one checkpoint; returns ``(model, family_name)`` with the model in eval mode on ``device``.

    * ``source="hub"``: ``path_or_id`` is a Hub id; ``revision`` (branch, tag or commit) is resolved
      in the HF cache (``cache_dir`` or ``HF_HUB_CACHE``/``HF_HOME``), downloading it first unless
      ``offline`` (default: offline, as on compute nodes after the fetch step).
    * ``source="local"`` / ``"toy"``: ``path_or_id`` is a directory holding one checkpoint
      (toy: ``resources/checkpoints/{model}/{revision}``); ``revision`` is informational. A local
      GGUF checkpoint (a ``.gguf`` file, or a folder holding one) is read through transformers' GGUF
      support once and then from its safetensors copy (:mod:`headtrace.models.dequantize`).

    The class is the family's ``model_class`` from transformers (family ``auto``: from the
    checkpoint's ``config.model_type``); remote code is never trusted. Weights: the folder's
    safetensors, or for a folder without them its pickle weights, each first checked statically and
    read with ``torch.load(weights_only=True)`` by headtrace (:func:`headtrace.models.weights.load_pickle`)
    before transformers (which also loads it with ``weights_only=True``) touches it. The loading report
    is checked (:func:`check_loading_info`): missing or unexpected tensors are a CheckpointError.
    ``dtype``: fp32, fp16 or bf16. With ``seq_len`` (the probe length as fed), a probe longer than
    the checkpoint's context length (``config.json``) raises :class:`headtrace.core.errors.ConfigError`
    naming the model (``name``), ``probe.seq_len`` and the limit, before the weights are read; with
    ``token_range`` (the probe's token ids, [low, high), BOS included), ids outside the checkpoint's
    ``vocab_size`` raise it too, also before the weights are read; both in one message
    (:func:`headtrace.probe.fit.misfit`) in ``words`` (``config``: the probe keys; ``cli``:
    ``headtrace cell``'s flags).
    """

    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype '{dtype}'; known: fp32, fp16, bf16")
    if source == "hub":
        path = snapshot_path(path_or_id, revision, cache_dir=cache_dir, offline=offline)
        what = _where(path_or_id, revision)
    elif source in ("local", "toy"):
        path = str(path_or_id)
        what = f"{source} checkpoint '{path}'" + (f" (revision '{revision}')" if revision else "")
        file = gguf.locate(path) if source == "local" else None
        if file is not None:  # read once through transformers' GGUF support, then from its safetensors copy
            path = str(dequantize.dequantized(file, what))
        if not (Path(path) / "config.json").is_file():
            raise CheckpointError(f"{what}: no config.json in {path}")
    else:
        raise ValueError(f"unknown checkpoint source '{source}' (hub, local, toy)")

    try:
        config = transformers.AutoConfig.from_pretrained(path, trust_remote_code=False)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{what}: cannot read config.json: {e}") from e
    fed = {k: v for k, v in (("seq_len", seq_len), ("token_range", token_range)) if v is not None}
    msg = fit.misfit(name or path_or_id, fed, context.limits_of([(config, f"{Path(path) / 'config.json'}")]),
                     words, derivable=False)
    if msg:
        raise ConfigError(msg)
    fmt, files = _check_pickles(path, what)
    if fmt == weights.PICKLE:  # read once by our own restricted load: a refusal names the file and global
        for f in files:
            try:
                weights.load_pickle(f, map_location="cpu", mmap=True)  # memory-mapped: nothing is copied
            except CheckpointError as e:
                raise CheckpointError(f"{what}: {e}") from e
    fam = _family_for(family, config)
    cls = getattr(transformers, fam.model_class)
    try:
        model, info = cls.from_pretrained(
            path, config=config, dtype=DTYPES[dtype], use_safetensors=fmt == weights.SAFETENSORS,
            weights_only=True, trust_remote_code=False, local_files_only=True, output_loading_info=True,
        )
    except (OSError, RuntimeError) as e:  # RuntimeError: transformers' own refusal of mismatched shapes
        raise CheckpointError(f"{what}: cannot load {fmt} weights: {str(e).splitlines()[-1] or e}") from e
    check_loading_info(info, model, what)
    model.to(resolve_device(device))
    model.eval()
    return model, fam.name


def _param_bytes(model: torch.nn.Module) -> int:
    p = next(model.parameters(), None)
    return p.element_size() if p is not None else 4


def auto_batch_size(model: torch.nn.Module, seq_len: int, device: str | torch.device,
                    requested: int | str = "auto", *, cpu_default: int = 16, cap: int = 512,
                    headroom: float = 0.6) -> int:
    """Sequences per forward pass.

    An int ``requested`` is returned as is. ``"auto"``: on CPU ``cpu_default`` (16); on CUDA, the
    free memory (``torch.cuda.mem_get_info``, after the model is loaded) times ``headroom`` (0.6)
    divided by an estimate of the activation memory of one sequence at the model's dtype::

        per_seq = bytes × T × (H × T            # one layer's attention scores at a time (SDPA's
                                                #   math kernel; capture and ablation never keep
                                                #   attention maps of all layers)
                                + 12 × d_model  # hidden states, q/k/v, attention output, MLP (4d)
                                + 2 × L × d_model)  # ablation: residual + out_proj input kept at
                                                #   each first-ablated layer (at most L)
                  + 4 × (vocab + L × d_model)   # logits at the query only; per-head outputs (fp32)

    (T = seq_len, L layers, H heads). Clamped to [1, ``cap``]. Not yet checked on a GPU.
    """
    if not isinstance(requested, str):
        return max(1, int(requested))
    if requested != "auto":
        return max(1, int(requested))
    dev = resolve_device(device)
    if dev.type != "cuda":
        return cpu_default
    cfg = model.config
    n_layers, n_heads, _ = families.dims(model)
    d_model = cfg.hidden_size
    vocab = getattr(cfg, "vocab_size", 50_000)
    b = _param_bytes(model)
    per_seq = (b * seq_len * (n_heads * seq_len + 12 * d_model + 2 * n_layers * d_model)
               + 4 * (vocab + n_layers * d_model))
    free, _total = torch.cuda.mem_get_info(dev)
    return int(max(1, min(cap, (free * headroom) // per_seq)))


def toy_checkpoint_dir(model: str, revision: str, root: str = TOY_ROOT) -> str:
    return os.path.join(root, model, revision)


def local_checkpoint_dir(load: dict, model: str, revision: str) -> str:
    """The folder of a ``local`` model's revision (:func:`headtrace.models.layout.local_checkpoint_path`:
    ``path`` with ``{revision}`` filled in, ``path`` itself with ``single_checkpoint: true``, else
    ``path/{revision}``). A folder that is not there is a :class:`CheckpointError` naming model,
    revision and the folder looked in -- never a fallback to ``path`` itself, which may be another
    checkpoint (e.g. the final model at the top, intermediate ones in sub-folders)."""
    folder = local_checkpoint_path(load, revision)
    if Path(folder).is_dir() or gguf.locate(folder) is not None:  # a folder, or a GGUF file
        return folder
    base = str(load["path"])
    parent = Path(folder).parent
    there = sorted(p.name for p in parent.iterdir() if p.is_dir() and not p.name.startswith(".")) \
        if parent.is_dir() else []
    shown = ", ".join(there[:12]) + (", ..." if len(there) > 12 else "")
    hint = (f"{parent} holds: {shown}" if there else f"{parent} has no sub-folders" if parent.is_dir()
            else f"{parent} does not exist")
    how = ("models.{m}.path contains {{revision}}".format(m=model) if "{revision}" in base
           else f"looked in {base} for the sub-folder '{revision}'")
    if "{revision}" in base:  # the layout is stated: only the name (or the path around it) can be wrong
        raise CheckpointError(
            f"local model '{model}' revision '{revision}': no checkpoint folder {folder} ({how}; {hint}). "
            f"Fix the name in models.{model}.revisions or the path around {{revision}} in models.{model}.path")
    raise CheckpointError(
        f"local model '{model}' revision '{revision}': no checkpoint folder {folder} ({how}; {hint}). "
        f"headtrace does not fall back to {base} itself: fix models.{model}.revisions, put {{revision}} "
        f"into models.{model}.path, or set models.{model}.single_checkpoint: true if {base} is the "
        "model's one checkpoint"
    )


def cell_checkpoint(load: dict, model: str, revision: str, cache_dir: str | None = None) -> tuple[str, str, str | None]:
    """``(source, folder, commit)``: the checkpoint folder a cell loads and, for hub models, the
    commit its revision resolved to in the cache (offline; branch names go through ``refs/``).
    A hub revision listed in ``load["repos"]`` is read from its own repository (at ``main`` or the
    pinned revision), any other from ``hf_id`` (:func:`headtrace.models.layout.hub_checkpoint`)."""
    source = load.get("source", "hub")
    if source == "hub":
        try:
            repo, hub_revision = hub_checkpoint(load, revision)
        except ValueError as err:
            raise CheckpointError(f"hub model '{model}': {err}") from None
        folder = snapshot_path(repo, hub_revision, cache_dir=cache_dir, offline=True)
        commit = Path(folder).name
        return source, folder, commit if len(commit) == 40 and all(c in "0123456789abcdef" for c in commit) else None
    if source == "toy":
        return source, toy_checkpoint_dir(model, revision), None
    if source == "local":
        return source, local_checkpoint_dir(load, model, revision), None
    raise ValueError(f"model '{model}': source '{source}' has no checkpoint to load")


def load_for_cell(load: dict, model: str, revision: str, device: str = "auto",
                  batch_size: int | str = "auto", seq_len: int | None = None, cache_dir: str | None = None,
                  token_range: tuple[int, int] | None = None):
    """What a per-cell workflow job needs: ``(model, Family, torch.device, batch_size)``
    (the :class:`headtrace.models.families.Family` adapter object, as capture/ablation take it).

    ``load`` is the model's load spec (``source``, ``hf_id``, ``repos``, ``path``, ``single_checkpoint``,
    ``family``, ``dtype``; :func:`headtrace.panel.config.load_spec`). ``hub``: ``revision`` is the
    panel's name; a revision in ``repos`` loads its own repository (:func:`cell_checkpoint`). ``local``: :func:`local_checkpoint_dir` (a missing revision folder fails
    the cell). ``toy``: ``resources/checkpoints/{model}/{revision}``. Hub checkpoints are read from
    the cache only (the fetch rule downloaded them). A probe of ``seq_len`` tokens longer than the
    checkpoint's context length fails here, before the weights are read, and so do probe token ids
    (``token_range``, [low, high)) outside its vocabulary.
    """
    source, folder, _ = cell_checkpoint(load, model, revision, cache_dir)
    ident, hub_revision = hub_checkpoint(load, revision) if source == "hub" else (folder, revision)
    dev = resolve_device(device)
    net, fam = load_model(source, ident, hub_revision, family=load.get("family", "auto"),
                          dtype=load.get("dtype", "fp32"), device=dev, offline=True, cache_dir=cache_dir,
                          seq_len=seq_len, name=model, token_range=token_range)
    return net, families.get(fam), dev, auto_batch_size(net, seq_len or 256, dev, batch_size)


def _where(hf_id: str, revision: str | None) -> str:
    return f"model '{hf_id}' revision '{revision or 'main'}'"


def _check_weights(path: str | Path, what: str) -> tuple[str, list[Path]]:
    """``(format, files)`` of the loadable weights in ``path``
    (:func:`headtrace.models.weights.weight_files`), or a :class:`CheckpointError` naming ``what``."""
    try:
        return weights.weight_files(path)
    except CheckpointError as e:
        raise CheckpointError(f"{what}: {e}") from e
