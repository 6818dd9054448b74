"""Fetching and loading checkpoints: safetensors only, never ``trust_remote_code``.

* :func:`fetch` downloads one revision (config, tokenizer, ``*.safetensors``; never ``*.bin``)
  into the Hugging Face cache (``HF_HOME`` / ``HF_HUB_CACHE`` honoured unless ``cache_dir``).
* :func:`load_model` loads one checkpoint with the transformers class of its family
  (:mod:`headtrace.models.families`); a hub revision is resolved from the local cache by default
  (``offline=True``), so compute nodes need no network once ``fetch`` ran on the login node.
* :func:`resolve_device`, :func:`auto_batch_size`, :func:`load_for_cell` (what the workflow's
  capture/ablate scripts call).

Errors about missing repos, revisions or safetensors weights are :class:`CheckpointError`
and name the model and revision.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch
import transformers

from headtrace.core.errors import ConfigError
from headtrace.models import context, families
from headtrace.models.layout import hub_checkpoint, local_checkpoint_path

__all__ = [
    "ALLOW_PATTERNS", "DTYPES", "CheckpointError", "fetch", "snapshot_path", "load_model",
    "resolve_device", "auto_batch_size", "load_for_cell", "toy_checkpoint_dir", "cell_checkpoint",
    "local_checkpoint_dir", "hub_checkpoint",
]

ALLOW_PATTERNS = ["*.json", "*.safetensors", "tokenizer*", "*.txt", "*.model"]
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
          "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
TOY_ROOT = "resources/checkpoints"


class CheckpointError(RuntimeError):
    """A checkpoint (model, revision) that cannot be fetched or loaded."""


def _where(hf_id: str, revision: str | None) -> str:
    return f"model '{hf_id}' revision '{revision or 'main'}'"


def _check_safetensors(path: str | Path, what: str) -> None:
    path = Path(path)
    if not any(path.glob("*.safetensors")):
        has_bin = any(path.glob("*.bin")) or any(path.glob("*.pt")) or any(path.glob("*.pth"))
        raise CheckpointError(
            f"{what}: no *.safetensors weight file in {path}"
            + (" (only pickle *.bin/*.pt weights, which headtrace refuses to load)" if has_bin else "")
            + ". headtrace loads safetensors only; convert the checkpoint or pick another revision."
        )


def _snapshot(hf_id: str, revision: str | None, cache_dir: str | None, local_files_only: bool) -> str:
    # huggingface_hub only where the hub is asked: toy and local models never import it
    from huggingface_hub import errors as hf_errors
    from huggingface_hub import snapshot_download

    what = _where(hf_id, revision)
    kwargs = dict(revision=revision, allow_patterns=ALLOW_PATTERNS, local_files_only=local_files_only)
    if cache_dir is not None:
        kwargs["cache_dir"] = str(cache_dir)
    try:
        return snapshot_download(hf_id, **kwargs)
    except hf_errors.RepositoryNotFoundError as e:  # also GatedRepoError
        raise CheckpointError(f"{what}: repository not found or not accessible ({type(e).__name__}: "
                              f"{str(e).splitlines()[0]})") from e
    except hf_errors.RevisionNotFoundError as e:
        raise CheckpointError(f"{what}: revision not found in the repository "
                              f"(list them with `headtrace revisions {hf_id}`)") from e
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


def fetch(hf_id: str, revision: str, cache_dir: str | None = None) -> str:
    """Download one revision (config, tokenizer, safetensors weights; never ``.bin``) into the
    Hugging Face cache and return its snapshot folder.

    Raises :class:`CheckpointError` naming the model and revision when the repository or revision
    does not exist or the revision has no ``*.safetensors`` weights.
    """
    path = _snapshot(hf_id, revision, cache_dir, local_files_only=False)
    _check_safetensors(path, _where(hf_id, revision))
    return path


def snapshot_path(hf_id: str, revision: str | None, cache_dir: str | None = None,
                  offline: bool = True) -> str:
    """The local snapshot folder of ``hf_id@revision`` (from the cache when ``offline``; branch
    names are resolved through the cache's ``refs/``, so the pinned commit is used)."""
    path = _snapshot(hf_id, revision, cache_dir, local_files_only=offline)
    _check_safetensors(path, _where(hf_id, revision))
    return path


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
      (toy: ``resources/checkpoints/{model}/{revision}``); ``revision`` is informational.

    The class is the family's ``model_class`` from transformers (family ``auto``: from the
    checkpoint's ``config.model_type``); ``use_safetensors=True``; remote code is never trusted.
    ``dtype``: fp32, fp16 or bf16. With ``seq_len`` (the probe length as fed), a probe longer than
    the checkpoint's context length (``config.json``) raises :class:`headtrace.core.errors.ConfigError`
    naming the model (``name``), ``probe.seq_len`` and the limit, before the weights are read; with
    ``token_range`` (the probe's token ids, [low, high), BOS included), ids outside the checkpoint's
    ``vocab_size`` raise it too, also before the weights are read; both in one message
    (:func:`headtrace.models.context.misfit`) in ``words`` (``config``: the probe keys; ``cli``:
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
        if not (Path(path) / "config.json").is_file():
            raise CheckpointError(f"{what}: no config.json in {path}")
        _check_safetensors(path, what)
    else:
        raise ValueError(f"unknown checkpoint source '{source}' (hub, local, toy)")

    try:
        config = transformers.AutoConfig.from_pretrained(path, trust_remote_code=False)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{what}: cannot read config.json: {e}") from e
    fed = {k: v for k, v in (("seq_len", seq_len), ("token_range", token_range)) if v is not None}
    msg = context.misfit(name or path_or_id, fed, context.limits_of([(config, f"{Path(path) / 'config.json'}")]),
                         words, derivable=False)
    if msg:
        raise ConfigError(msg)
    fam = _family_for(family, config)
    cls = getattr(transformers, fam.model_class)
    try:
        model = cls.from_pretrained(
            path, config=config, dtype=DTYPES[dtype], use_safetensors=True,
            trust_remote_code=False, local_files_only=True,
        )
    except OSError as e:
        raise CheckpointError(f"{what}: cannot load safetensors weights: {e}") from e
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
    if Path(folder).is_dir():
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
