# Everything that turns the config into targets: validation, cells, paths, input functions.
import sys
from pathlib import Path

from snakemake.utils import validate

# The Snakefile imports the package from this checkout's src/; job scripts find it through the
# link workflow/scripts/headtrace -> src/headtrace (Snakemake puts a script's folder on sys.path),
# so jobs run the same code in a venv, a conda env or on a cluster node.
sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from headtrace import experiments  # noqa: E402
from headtrace.panel import config as panel
from headtrace.panel import identity
from headtrace.panel import keys as config_keys
from headtrace.panel import local_weights
from headtrace.panel import probe_shown
from headtrace.panel import refine
from headtrace.core import manifest
from headtrace.core import paths
from headtrace.core import revisions
from headtrace.runtime import locks

if workflow.is_main_process:  # not in a job (it re-parses the workflow under its own run's lock)
    locks.refuse_live_run()  # a run still working here: say so now, not Snakemake's --rerun-incomplete later

config_keys.check(config)  # every unknown key with the closest valid one, in a few lines (not the schema)
validate(config, "../../config/schema.yaml")
panel.expand_revisions(config)  # live panel: revisions: {glob: ...} -> the checkpoint folders present now
panel.derive_toy_tokens(config)  # toy: tokens_schedule from the recipe (batch x seq_len, phase by phase)
experiments.expand_models(config)  # adds the seed / data-shift models of config["experiments"]
local_weights.check(config)  # a local revision folder missing, cut short or without weights: refused now, not in its job
panel.check(config)
refine.check(config)
PROBES_SHOWN = probe_shown.shown(config)  # model -> its probe in words (the summaries' first screen)
MODEL_NOTES = panel.model_notes(config)  # model -> the config's note on it (the summaries' first screen)
if workflow.is_main_process:  # once per run, not in every job that re-parses the workflow
    for _line in probe_shown.console_lines(config):
        print(_line, file=sys.stderr)

SCRIPTS = "../scripts"
CONDA_ENV = "../envs/headtrace.yaml"
# The published panel ships with the workflow (not the working directory).
REFERENCE_DIR = str(Path(workflow.basedir) / "resources" / "reference" / "spectral-probe-circuits")

# Every output path is built in one place (headtrace.core.paths), under the panel's results folder
# (the config's `results` key), so renaming a folder is a one-line change and two panels in two
# folders never write into each other's. Logs: logs/ beside the default results/, else RESULTS/logs/.
RESULTS = paths.normalize(config.get("results"))
PATHS = paths.results_paths(RESULTS)
LOGS = paths.logs_root(RESULTS)

# The ablation block as the ablate job's params, less batch_size: like capture.device and
# capture.batch_size it is read by the job itself, so moving a run from CPU to GPU (or resizing
# its batches) invalidates no finished cell.
def ablation_params(wildcards):
    # the ablation block as one model runs it (its own models.{model}.ablation keys win); batch_size
    # is read by the job, so changing it reruns nothing
    return panel.ablation_settings(config, wildcards.model)


def benchmark_path(rule):
    return PATHS["benchmark"].replace("{rule}", rule)

MODELS = panel.model_names(config)


def models_by_source(*sources):
    return [m for m in MODELS if panel.model_spec(config, m)["source"] in sources]


def _alternation(names):
    # A regex matching exactly these model names (or nothing, when the list is empty).
    import re

    return "|".join(re.escape(n) for n in names) or "(?!x)x"


RUN_MODELS = _alternation(models_by_source("toy", "hub", "local"))
REFERENCE_MODELS = _alternation(models_by_source("reference"))
TOY_MODELS = _alternation(models_by_source("toy"))


wildcard_constraints:
    model=_alternation(MODELS),
    revision=r"[A-Za-z0-9._-]+",


def cell_paths(key, model, sources=None):
    spec_ok = sources is None or panel.model_spec(config, model)["source"] in sources
    return [PATHS[key].format(model=model, revision=r) for r in panel.revisions_of(config, model)] if spec_ok else []


# ---- adaptive refinement: revisions added by the checkpoint rounds (refine.smk) ---------------

REFINE_MODELS = [m for m in MODELS if refine.enabled(config, m)]


def refine_rounds(model):
    return refine.settings(config, model)["max_rounds"] if model in REFINE_MODELS else 0


REFINE_ROUNDS = max([refine_rounds(m) for m in REFINE_MODELS], default=0)


def added_in_round(model, k):
    """The revisions round k added to ``model``. Checkpoint-driven: call only inside input
    functions (Snakemake re-evaluates them once the round has run)."""
    if k > refine_rounds(model):
        return []
    return refine.read_added(checkpoints.refine.get(model=model, round=str(k)).output[0])


def screened_revisions(model, upto=None):
    """Configured revisions plus those added by rounds 1..upto (default: every round)."""
    rounds = refine_rounds(model) if upto is None else min(upto, refine_rounds(model))
    revisions = panel.revisions_of(config, model)
    for k in range(1, rounds + 1):
        revisions += added_in_round(model, k)
    return revisions


def screened_paths(key, model):
    """``cell_paths`` over every screened revision (configured + refined); input functions only."""
    return [PATHS[key].format(model=model, revision=r) for r in screened_revisions(model)]


def _round_cells(key, model, k, wildcards=None):
    return [PATHS[key].format(model=model, revision=r) for r in added_in_round(model, k)]


def refined_targets():
    """Named inputs of the target `all`: the PR (and verdict) of each model's round-k cells, one input
    function per model, round and table, so that a dry run after round 1 lists all of round 1's
    cell jobs although round 2 has not run yet (Snakemake resolves each input function's
    checkpoint separately; the trajectory waits for the last round)."""
    from functools import partial

    keys = ["pr"] + (["verdict"] if ablation_enabled() else [])
    return {f"refined_m{i}_r{k}_{key}": partial(_round_cells, key, m, k)
            for i, m in enumerate(REFINE_MODELS) for k in range(1, refine_rounds(m) + 1) for key in keys}


def _refine_spec(model):
    return panel.model_spec(config, model)


def refine_pool_input(wildcards):
    """What a round needs to know the model's candidate pool (rule inputs, so the pool is ready)."""
    source = _refine_spec(wildcards.model)["source"]
    if source == "toy":
        return PATHS["checkpoints"].format(model=wildcards.model)  # the folders train_toy saved
    if source == "hub":
        return PATHS["branches"].format(model=wildcards.model)  # the cached branch list
    return []


def refine_local_pool(wildcards):
    """local: the checkpoint folders under path, listed when the DAG is built (a param, so a new
    folder reruns the rounds and nothing else); None for other sources."""
    spec = _refine_spec(wildcards.model)
    if spec["source"] != "local" or spec.get("single_checkpoint") or "{revision}" in str(spec["path"]):
        return None
    return revisions.list_checkpoints(spec["path"], spec.get("revisions_glob", "*"))


def refine_round_screens(wildcards):
    """Round k reads the screens of the configured revisions and of those rounds 1..k-1 added."""
    revs = screened_revisions(wildcards.model, upto=int(wildcards.round) - 1)
    return [PATHS["screen"].format(model=wildcards.model, revision=r) for r in revs]


def refine_token_spec(model):
    spec = _refine_spec(model)
    return {k: spec[k] for k in revisions.TOKEN_KEYS if k in spec}


def ablation_enabled():
    return config["ablation"]["enabled"]


def all_targets():
    targets = [PATHS["manifest"]] + [PATHS["trajectory"].format(model=m) for m in MODELS]
    for m in models_by_source("toy", "hub", "local"):
        if ablation_enabled():
            targets += cell_paths("verdict", m)
        if m in REFINE_MODELS:  # the trajectory waits for the rounds; ask for the cells directly
            targets += cell_paths("pr", m)
    if ablation_enabled():  # the published final-checkpoint ablations (rule import_reference_ablation)
        targets += reference_ablations("verdict")
    targets += [PATHS["lineage"].format(model=m) for m in models_by_source("toy", "hub", "local")]
    targets += findings_outputs()
    targets.append(PATHS["onsets"])
    if MEASURES_RUN:
        targets += [f"{PATHS['measures_findings']}/{name}.parquet" for name in MEASURES_TABLES]
    targets += EXPERIMENT_TARGETS  # defined in experiments.smk
    targets += group_targets()  # defined in groups.smk
    return targets


def findings_outputs():
    outputs = [PATHS["summary"], PATHS["summary_html"]] + [f"{PATHS['figures']}/{name}.png" for name in FIGURES]
    if ablation_enabled() and models_by_source("toy", "hub", "local", "reference"):
        outputs.append(f"{PATHS['figures']}/ablation.png")
    outputs += [f"{PATHS['figures']}/{name}.png" for name in MEASURES_FIGURES] if MEASURES_RUN else []
    return outputs


# ---- input functions and per-cell params -------------------------------------------------


def checkpoint_input(wildcards):
    """What a model-running job needs before it can load (model, revision)."""
    source = panel.model_spec(config, wildcards.model)["source"]
    if source == "toy":
        return PATHS["checkpoints"].format(model=wildcards.model)
    if source == "hub":
        return PATHS["fetched"].format(**wildcards)
    return []


def checkpoint_input_final(model):
    """What a job loading ``model``'s final revision needs first (rules without a revision wildcard)."""
    source = panel.model_spec(config, model)["source"]
    if source == "toy":
        return PATHS["checkpoints"].format(model=model)
    if source == "hub":
        return PATHS["fetched"].format(model=model, revision=panel.final_revision(config, model))
    return []


def train_priority(model):
    """A toy's training job: ahead of the other jobs, the largest (most training tokens) first."""
    return 10 + (panel.cell_tokens(config, model, panel.final_revision(config, model)) or 0) / 1e6


def cell_priority(wildcards):
    """Capture, screen and ablation of a model no job trains (local, hub) can start at once: ahead of the
    trainings, so its chain runs on one core beside them rather than after them (the demo's trained
    model: its ablation is the longest job). A toy's cells wait on its training anyway."""
    if panel.model_spec(config, wildcards.model)["source"] == "toy":
        return 0
    return 1 + max((train_priority(m) for m in models_by_source("toy")), default=0)


WEIGHT_HASHES = identity.HashCache()  # one cache per DAG: each weight file stat-ed, and hashed once if new


def load_params(wildcards, revision=None):
    """What a model-loading job's parameters say it loads (``panel.identity``): the load spec, a local
    checkpoint named by its weights' content rather than its path, so moving or re-listing a run reruns
    nothing and new weights under an old name rerun their cells. Of a models.{model}.repos map only
    this revision's entry. ``revision``: for rules without a revision wildcard."""
    return identity.identity(config, wildcards.model, revision or wildcards.revision, WEIGHT_HASHES)


def final_load_params(wildcards):
    return load_params(wildcards, panel.final_revision(config, wildcards.model))


def tokens_param(wildcards):
    return panel.cell_tokens(config, wildcards.model, wildcards.revision)


def final_screen(wildcards):
    return PATHS["screen"].format(model=wildcards.model, revision=panel.final_revision(config, wildcards.model))


# ---- the field's own measures (measures.smk, docs/measures.md) --------------------------------

MEASURES = panel.measures_on(config)
MEASURES_RUN = MEASURES and bool(models_by_source("toy", "hub", "local"))  # a model here runs the measures
TEXT_PROBE = panel.text_settings(config)  # None: no text probe


def measures_tables(wildcards=None):
    """The measures findings tables (the headline's text sink rate), when a model here runs them."""
    return [f"{PATHS['measures_findings']}/{name}.parquet" for name in MEASURES_TABLES] if MEASURES_RUN else []


def text_probe_input(wildcards):
    """The text probe of a model, when the config names a text file."""
    return PATHS["text_probe"].format(model=wildcards.model) if TEXT_PROBE else []


def text_probe_checkpoint(wildcards):
    """The checkpoint whose tokenizer builds a model's text probe: its first revision's (none for a
    named tokenizer or a toy's bytes)."""
    if panel.text_tokenizer(config, wildcards.model) is not None:
        return []
    first = panel.revisions_of(config, wildcards.model)[0]
    return checkpoint_input(type("W", (), {"model": wildcards.model, "revision": first})())


def measures_params(wildcards):
    """The capture job's measures: the repeated-random probe's arguments, the text tokenizer (None:
    the checkpoint's own); None when measures are off."""
    if not MEASURES:
        return None
    return {"repeated": panel.repeated_kwargs(config, wildcards.model),
            "tokenizer": panel.text_tokenizer(config, wildcards.model) if TEXT_PROBE else None}


def log_path(rule_name, per_cell=True):
    return f"{LOGS}/{rule_name}/{{model}}/{{revision}}.log" if per_cell else f"{LOGS}/{rule_name}/{{model}}.log"


# ---- aggregation ---------------------------------------------------------------------------

FINDINGS_TABLES = [
    "f1_bos_floor",
    "f1_floor",
    "f2_bos_fraction",
    "f2_shape",
    "f2_layer_onset",
    "f2_layer_spread",
    "circuit_size",
    "f3_milestones",
    "f3_gaps",
    "f4_final_circuit",
    "f4_recall",
    "f4_recall_milestones",
    "f4_recall_milestones_strict",
    "f5_pr_lead",
    "pr_integral",
    "strongest_head",
    "strongest_trend",
    "circuit_positional",
]
FIGURES = ["bos_fraction", "bos_heatmap", "layer_onset", "milestones", "circuit_recall", "head_trajectories",
           "strongest_heads"]


def findings_params():
    return {
        "class_threshold": config["screen"]["class_threshold"],
        "induction_threshold": config["screen"]["induction_threshold"],
        **config["findings"],
    }


def bootstrap_counts(wildcards=None):
    """Every screened cell's per-resample milestone counts (none when bootstrap.n_resamples is 0;
    reference models have no per-sequence masses)."""
    if not config["bootstrap"]["n_resamples"]:
        return []
    return [p for m in models_by_source("toy", "hub", "local") for p in screened_paths("bootstrap_milestones", m)]


def positional_tables(wildcards=None):
    """Every screened cell's positional check (models run here; reference models have no
    per-sequence masses)."""
    return [p for m in models_by_source("toy", "hub", "local") for p in screened_paths("positional", m)]


def reference_ablations(key="ablation"):
    """The published final-checkpoint ablation (or verdict) of every reference model."""
    return [PATHS[key].format(model=m, revision=panel.final_revision(config, m))
            for m in models_by_source("reference")]


def run_model_verdicts(wildcards=None):
    """Every ablated cell's verdict (refined revisions included; the published ones beside them)."""
    if not ablation_enabled():
        return []
    return ([p for m in models_by_source("toy", "hub", "local") for p in screened_paths("verdict", m)]
            + reference_ablations("verdict"))


def model_families():
    """The family each model's headline row names (:func:`headtrace.panel.config.families_shown`)."""
    return panel.families_shown(config)


def run_model_ablations(wildcards=None):
    if not ablation_enabled():
        return []
    # every screened revision, refined ones included: an input function only (checkpoint-driven);
    # the published ablations of reference models beside them
    return ([p for m in models_by_source("toy", "hub", "local") for p in screened_paths("ablation", m)]
            + reference_ablations())


# ---- seed groups (groups.smk) ----------------------------------------------------------------

GROUPS = panel.groups(config)
# Groups whose cross-seed ablation runs: asked for (groups.NAME.cross_seed_ablation) with the
# ablation on; the config check has made sure the members share family and geometry.
CROSS_SEED_GROUPS = [g for g in GROUPS if ablation_enabled() and panel.group_settings(config, g)["cross_seed_ablation"]]


def group_table_paths():
    """Every seed group's tables (written by the findings job: headtrace.findings.groups)."""
    from headtrace.findings.groups import GROUP_TABLES

    return [f"{PATHS['groups']}/{g}/{name}.parquet" for g in GROUPS for name in GROUP_TABLES]


def group_cross_seed_paths():
    """Group -> the cross-seed ablation table its answers read: its own (groups.smk), or, where its
    own is off and its members and seeds are the seed experiment's, that experiment's table (the same
    computation over the same inputs: tests/workflow/test_groups_workflow.py). Groups with neither: absent."""
    out = {g: PATHS["group_cross_seed"].format(group=g) for g in CROSS_SEED_GROUPS}
    seed_models = experiments.seed_models(config)
    seeds = {m: experiments.model_seed(config, m) for m in seed_models}
    for g, members in GROUPS.items():
        if g not in out and seeds and dict(members) == seeds:
            out[g] = PATHS["exp_cross_seed"]
    return out


def group_targets():
    return group_table_paths() + [PATHS["group_cross_seed"].format(group=g) for g in CROSS_SEED_GROUPS]


# ---- checkpoint lineage (lineage.smk) --------------------------------------------------------


def lineage_paths(wildcards=None):
    """Every run model's lineage table (reference models have no fingerprints, so no table)."""
    return [PATHS["lineage"].format(model=m) for m in models_by_source("toy", "hub", "local")]


def lineage_input_if_drop(wildcards):
    """provenance.on_suspect: drop: the model's lineage table, which the trajectory job reads to
    leave the flagged revisions out; nothing otherwise (warn and fail add no edge to the DAG)."""
    if config["provenance"]["on_suspect"] != "drop":
        return []
    if panel.model_spec(config, wildcards.model)["source"] not in ("toy", "hub", "local"):
        return []
    return [PATHS["lineage"].format(model=wildcards.model)]


def panel_record():
    """What RESULTS/panel.json says: this config's models (their configured revisions), their sources, its
    seed groups, the family each headline row names (headtrace.core.manifest)."""
    return {"models": {m: panel.revisions_of(config, m) for m in MODELS},
            "sources": {m: panel.model_spec(config, m)["source"] for m in MODELS},
            "groups": list(GROUPS), "families": model_families()}
