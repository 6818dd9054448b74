"""The notebook API: the whole per-cell recipe on a model already in memory.

``analyze(model)`` runs what the workflow runs on one (model, revision) cell - the probe, one
capture pass, the participation ratio, the six-class screen and (optionally) the causal group
ablation with its verdict - through the same library functions the workflow's per-cell jobs call,
with the workflow's defaults, and returns the same tables (polars). No Snakemake, and no files
unless ``out`` is given::

    import headtrace

    model = headtrace.load("EleutherAI/pythia-160m", revision="step3000")
    cell = headtrace.analyze(model, name="pythia-160m", revision="step3000")
    print(cell)                                         # the cell's one screen, as `headtrace cell` prints it
    cell.screen.filter(pl.col("in_induction_circuit"))  # one row per head
    cell.verdict                                        # one row per circuit (docs/api.md: its columns)

The model's family (GPT-NeoX, OLMo, OLMoE, ...) is detected from its config's ``model_type``.
The final circuit of the verdict is the cell's own circuit (a one-revision panel), unless
``final_circuit`` names another head set (e.g. the circuit of a later checkpoint).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Iterable, Mapping

import polars as pl
import torch

from headtrace.causal.recipe import RECORD_COLUMNS, ablate_cell, ablation_probe  # noqa: F401 (the notebook API's names)
from headtrace.cell import capture, patterns, positional, screen, spectral
from headtrace.core import schema, tables
from headtrace.core.heads import as_heads
from headtrace.findings.measures import head_decisions
from headtrace.models import context, families, hub, tokenize
from headtrace.panel import keys
from headtrace.probe import fit, repeated, synthetic
from headtrace.probe import spec as probe_spec  # analyze's and probe_batch's ``spec`` arguments shadow the name
from headtrace.report import console

# The workflow's defaults, read from config/schema.yaml (one source for the workflow and the API).
DEFAULTS = {block: schema.defaults(block) for block in ("screen", "capture", "ablation", "measures", "repeated_probe")}
TABLES = ("attention", "pr", "screen", "positional", "ablation", "verdict", "measures")
DERIVED = ("copying_heads",)  # CellTables' fields decided from the tables above, not written


@dataclass(repr=False)
class CellTables:
    """The tables of one cell, in the workflow's schemas (``ablation``/``verdict`` None without ablation).
    ``print(cell)`` (or ``cell`` in a notebook) shows :meth:`summary`, the screen ``headtrace cell``
    prints; every field is a polars DataFrame (docs/api.md, docs/outputs.md)."""

    attention: pl.DataFrame
    pr: pl.DataFrame
    screen: pl.DataFrame
    positional: pl.DataFrame | None = None  # headtrace.cell.positional: which screened heads are positional
    ablation: pl.DataFrame | None = None
    verdict: pl.DataFrame | None = None
    measures: pl.DataFrame | None = None  # headtrace.cell.patterns: sink alpha, prefix matching (docs/measures.md)
    text_probe: pl.DataFrame | None = None  # the text probe's sequences and where they came from
    # the measures' heads with Olsson et al.'s two properties decided at the analysis's measures.prefix_threshold
    # (headtrace.findings.measures.head_decisions): what summary() counts; derived, so not written
    copying_heads: pl.DataFrame | None = None

    def summary(self) -> str:
        """The cell in words, as ``headtrace cell`` prints it (:func:`headtrace.report.console.cell_lines`):
        the induction circuit with each head's selectivity, its positional heads, the sequences the
        ablation ran on, what the unablated model predicts and one line per circuit with its verdict."""
        return "\n".join(console.cell_lines(self.screen, self.positional, self.verdict, self.copying_heads))

    def __repr__(self) -> str:
        present = ", ".join(f"{f.name} ({getattr(self, f.name).height} rows)" for f in fields(self)
                            if getattr(self, f.name) is not None)
        return f"{self.summary()}\nCellTables: {present}"

    def write(self, out_dir) -> dict[str, Path]:
        """Write every table as ``out_dir/<name>.parquet`` (atomically, like the workflow)."""
        out = {}
        for f in fields(self):
            df = getattr(self, f.name)
            if df is not None and f.name not in DERIVED:
                out[f.name] = Path(out_dir) / f"{f.name}.parquet"
                tables.write(df, out[f.name], schema=f.name)
        return out


def load(checkpoint: str | Path, revision: str | None = None, *, dtype: str = "fp32", device: str = "cpu",
         offline: bool = False) -> torch.nn.Module:
    """A checkpoint loaded as the workflow loads it, for :func:`analyze`: a folder on disk (config.json
    with safetensors, or pickles through the checked loader), a GGUF file or a folder holding one
    (read once through transformers' GGUF support, then from its safetensors copy: docs/integrity.md),
    or a Hub id at ``revision`` (downloaded unless ``offline``). Never ``trust_remote_code``."""
    local = Path(checkpoint).exists()
    model, _ = hub.load_model("local" if local else "hub", str(checkpoint), revision, dtype=dtype, device=device,
                              offline=offline or local)
    return model


def family_of(model: torch.nn.Module) -> families.Family:
    """The family adapter of an in-memory Hugging Face model, from ``model.config.model_type``."""
    cfg = getattr(model, "config", None)
    if cfg is None or not getattr(cfg, "model_type", None):
        raise ValueError("analyze needs a Hugging Face model with a config.model_type "
                         f"(got {type(model).__name__})")
    return families.from_model_type(cfg.model_type)


def probe_batch(spec: Mapping | None = None, model: torch.nn.Module | None = None) -> synthetic.ProbeBatch:
    """The synthetic induction batch of :func:`probe_settings` ``(spec, model)``."""
    try:
        return probe_spec.batch(probe_settings(spec, model))
    except ValueError as err:
        raise ValueError(f"probe: {err}") from None


def probe_settings(spec: Mapping | None = None, model: torch.nn.Module | None = None) -> dict:
    """The resolved keys of the synthetic induction batch from the config's ``probe`` keys (``token_range``,
    ``ab_range``, ``n_sequences``, ``seq_len``, ``seed``, ``prepend_bos``, ``bos_token_id``, ``derive``), the
    schema's defaults for those omitted (:func:`headtrace.probe.spec.synthetic_settings`: an unknown key is
    refused naming the keys there are). With ``model`` (an HF model), every misfit of the probe against its
    config (context length, vocabulary) and of the keys among themselves is refused in one message that ends
    with a probe that fits (:func:`headtrace.probe.fit.misfit`), before the batch is built; ``derive: True``
    takes ``seq_len``, ``ab_range`` and ``token_range`` not given from the model
    (:func:`headtrace.probe.fit.derive`)."""
    given = dict(spec or {})
    settings = probe_spec.synthetic_settings(given)
    name = "probe"
    limits = fit.Limits()
    if model is not None:
        name = getattr(model, "name_or_path", None) or type(model).__name__
        limits = context.limits_of([(model.config, "the model's config")])
    if settings.get("derive"):
        if model is None:
            raise ValueError("probe: derive needs the model (headtrace.analyze(model, probe={'derive': True}), "
                             "or probe_batch(spec, model))")
        settings = fit.derive(settings, given, limits)
    msg = fit.misfit(name, settings, limits, "api", given=given, derivable=model is not None)
    if msg:
        raise ValueError(msg)
    return {**settings, "derive": False}  # resolved: what the tables record and a held-out draw repeats


def _probe_batch(spec, model: torch.nn.Module) -> tuple[synthetic.ProbeBatch, dict | None]:
    """``(batch, settings)`` of ``spec`` for ``model``: a mapping through :func:`probe_settings`
    (every misfit said before the batch is built) with its resolved keys, or a ready ``ProbeBatch``
    checked against the model as fed (its settings unknown: None)."""
    if not isinstance(spec, synthetic.ProbeBatch):
        settings = probe_settings(spec, model)
        try:
            return probe_spec.batch(settings), settings
        except ValueError as err:
            raise ValueError(f"probe: {err}") from None
    name = getattr(model, "name_or_path", None) or type(model).__name__
    msg = fit.misfit(name, {"seq_len": spec.seq_len, "token_range": spec.token_span},
                     context.limits_of([(model.config, "the model's config")]), "api", derivable=False)
    if msg:
        raise ValueError(msg)
    return spec, None


def analyze(
    model: torch.nn.Module,
    *,
    probe: synthetic.ProbeBatch | Mapping | None = None,
    ablate: bool = True,
    n_random: int | None = None,
    batch_size: int | str = "auto",
    device: str | torch.device | None = None,
    name: str = "model",
    revision: str = "",
    tokens: int | None = None,
    final_circuit: Iterable | None = None,
    settings: Mapping | None = None,
    out: str | Path | None = None,
    progress: bool = True,
    family: str | None = None,
    text_probe: Mapping | None = None,
) -> CellTables:
    """Run the recipe on ``model`` (an in-memory HF causal LM) and return its tables.

    ``probe``: a ``ProbeBatch``, or the config's probe keys (:func:`probe_batch`; default: the
    paper's 2000 x 256 batch, tokens in [100, 10000); ``{"derive": True}``: the probe derived from
    the model's context length and vocabulary). A probe that does not fit the model is refused, every
    misfit in one message with a probe that fits, before the batch is built. ``device``: None = where the model is. ``settings``:
    overrides of ``DEFAULTS`` per block (``{"screen": {"baseline": "uniform"}}``). ``out``: also
    write the tables there. ``family``: the adapter by name (``headtrace.models.families``), for a
    model whose ``model_type`` is a relative of a known family; None = from ``model_type``. The
    model is moved to ``device`` and put in eval mode.

    The field's own measures (docs/measures.md; ``settings={"measures": {"enabled": False}}`` turns them
    off) run on the repeated-random probe (``settings={"repeated_probe": {...}}``) and, with
    ``text_probe`` (the config's ``text_probe`` keys: ``{"file": "notes/*.txt"}``; ``tokenizer`` None:
    the model's own, from its ``name_or_path`` folder), on natural text; ``cell.measures`` holds them.
    """
    keys.check_blocks(settings, tuple(DEFAULTS), "analyze(settings=...)")  # a misspelt key is refused, not ignored
    opts = {k: {**v, **dict((settings or {}).get(k) or {})} for k, v in DEFAULTS.items()}
    family = family_of(model) if family is None else families.get(family)
    batch, settings_of_probe = _probe_batch(probe, model)  # settings: None for a ProbeBatch
    text_table = text_probe_table(text_probe, model, name) if opts["measures"]["enabled"] and text_probe else None
    dev = next(model.parameters()).device if device is None else hub.resolve_device(device)
    model = model.to(dev).eval()
    bs = hub.auto_batch_size(model, batch.seq_len, dev, batch_size)

    result = capture.run(model, family, batch, batch_size=bs, device=dev, progress=progress)
    attention = capture.attention_table(result, name, revision, tokens)
    pr = spectral.pr_table(spectral.pr_per_head(result.head_outputs, center=opts["capture"]["pr_center"],
                                                n_sequences=opts["capture"]["pr_n_sequences"]),
                           name, revision, tokens)
    sc = opts["screen"]
    cell_screen = screen.screen(attention, baseline=sc["baseline"], class_threshold=sc["class_threshold"],
                                induction_threshold=sc["induction_threshold"])
    cell = CellTables(attention=attention, pr=pr, screen=cell_screen,
                      positional=positional.cell_table(result.sequence_masses, result.valid, batch.ab, name,
                                                       revision, tokens))
    if opts["measures"]["enabled"]:
        cell.text_probe = text_table
        cell.measures = patterns.cell_measures(
            model, family, repeated=repeated.repeated_random(**repeated_kwargs(opts["repeated_probe"], batch,
                                                                               settings_of_probe, model)),
            text=None if text_table is None else tokenize.tokens_of(text_table), batch_size=bs, device=dev,
            name=name, revision=revision, tokens=tokens)
        cell.copying_heads = head_decisions(cell.measures, prefix_threshold=opts["measures"]["prefix_threshold"])
    if ablate:
        final = as_heads(final_circuit) if final_circuit is not None else screen.circuit_heads(cell_screen)
        cell.ablation, cell.verdict = ablate_cell(model, family, batch, cell_screen, final,
                                                  n_random=n_random or opts["ablation"]["n_random"],
                                                  batch_size=bs, device=dev, name=name, revision=revision,
                                                  tokens=tokens, ablation=opts["ablation"], screen_opts=sc,
                                                  progress=progress, probe_settings=settings_of_probe)
    if out is not None:
        cell.write(out)
    return cell


# ---- the field's own measures: the repeated-random and the text probe (docs/measures.md) ----------

def repeated_kwargs(block: Mapping, batch: synthetic.ProbeBatch, probe_settings: Mapping | None, model) -> dict:
    """Arguments of ``repeated.repeated_random`` from the ``repeated_probe`` keys; a null token range or BOS
    follows the synthetic probe (its settings, or a ready batch's token span and first token)."""
    if probe_settings is not None:
        span, bos, bos_id = probe_settings["token_range"], probe_settings["prepend_bos"], probe_settings["bos_token_id"]
    else:
        span, bos, bos_id = batch.token_span, False, None
    args = probe_spec.repeated(block, span, bos, bos_id)
    if args["prepend_bos"] and args["bos_token_id"] is None:
        args["bos_token_id"] = getattr(getattr(model, "config", None), "bos_token_id", None)
    return args


def text_probe_table(spec: Mapping, model, name: str = "model") -> pl.DataFrame:
    """The text probe of ``spec`` (the config's ``text_probe`` keys) for an in-memory model: tokenised with
    ``spec["tokenizer"]`` (a folder or ``bytes``), else the tokenizer in the model's ``name_or_path`` folder."""
    settings = probe_spec.text(spec)
    folder = getattr(model, "name_or_path", None) or None
    return tokenize.build(settings, settings["tokenizer"], folder, f"model '{name}'", name)


