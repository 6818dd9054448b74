"""The panel: a validated config turned into models, cells and per-cell settings.

The JSON schema (config/schema.yaml) checks types and names; this module checks what a schema
cannot (tokens known for every revision, a probe that fits the model, a toy revision that is a
step, ...) and raises one ``ConfigError`` naming the key before any job starts. Snakemake's
``rules/common.smk`` and the tests use the same functions.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from headtrace.core import revisions as revs
from headtrace.core import schema
from headtrace.core.errors import ConfigError
from headtrace.models import context, gguf, tokenize
from headtrace.models.layout import hub_checkpoint, local_checkpoint_path, parse_repo
from headtrace.panel import local_gguf, toy_tokens
from headtrace.probe import fit, texts
from headtrace.probe import spec as probe_spec  # ``spec`` names a model's config block here

PROBE_DEFAULTS = probe_spec.SYNTHETIC  # config/schema.yaml: the one source
DERIVED = {"seq_len", "ab_range", "token_range"}  # the keys probe.derive fills in


@dataclass(frozen=True)
class Cell:
    model: str
    revision: str
    tokens: int | None


def model_names(config: dict) -> list[str]:
    return list(config["models"])


def model_spec(config: dict, model: str) -> dict:
    try:
        return config["models"][model]
    except KeyError:
        raise ConfigError(f"models.{model}: no such model in the config") from None


def revisions_of(config: dict, model: str) -> list[str]:
    return list(model_spec(config, model)["revisions"])


def expand_revisions(config: dict) -> None:
    """Live panel: a ``local`` model's ``revisions: {glob: "checkpoint-*"}`` becomes the list of the
    matching checkpoint folders under ``path`` (listed now, when the DAG is built), ordered by the
    step in their names; the pattern is kept as ``revisions_glob``. Modifies ``config`` in place."""
    for model in model_names(config):
        spec = model_spec(config, model)
        if not isinstance(spec.get("revisions"), dict):
            continue
        where, pattern = f"models.{model}.revisions", spec["revisions"]["glob"]
        if spec["source"] != "local" or "path" not in spec:
            raise ConfigError(f"{where}: a glob needs a local model whose path holds one folder per checkpoint")
        root = glob_root(str(spec["path"]))
        if root is None:
            raise ConfigError(f"{where}: a glob lists the checkpoint folders inside one run folder, so path must "
                              f"be that folder or end in /{{revision}}; '{spec['path']}' has {{revision}} elsewhere: "
                              "list the revisions by name instead of a glob")
        try:
            found = revs.list_checkpoints(root, pattern)
        except FileNotFoundError as err:
            raise ConfigError(f"{where}: {err}") from None
        if not found:
            raise ConfigError(f"{where}: no checkpoint folder matching '{pattern}' (with config.json and "
                              f"safetensors weights, and a step in its name) under '{spec['path']}'")
        spec["revisions"], spec["revisions_glob"] = found, pattern


def glob_root(path: str) -> str | None:
    """The run folder a ``revisions: {glob: ...}`` lists: ``path`` itself, or ``path`` without a final
    ``/{revision}`` (what ``headtrace revisions`` writes); None where ``{revision}`` is anywhere else."""
    head, sep, tail = path.rstrip("/").rpartition("/{revision}")
    if sep and not tail and "{revision}" not in head:
        return head or "/"
    return None if "{revision}" in path else path


def final_revision(config: dict, model: str) -> str:
    return revisions_of(config, model)[-1]


def init_published(config: dict, model: str) -> bool | None:
    """Whether ``model``'s run has a step 0 its panel could add (the lineage check's reference warning):
    True for a toy (train_toy saves any step listed, step 0 included) and for a local run with a step-0 folder
    on disk, False for a single checkpoint (no run around it) and a Trainer run without one, None otherwise
    (a hub or other local run may or may not publish its init)."""
    spec = model_spec(config, model)
    if spec.get("source") == "toy":
        return True
    if spec.get("single_checkpoint"):
        return False
    if spec.get("source") == "local":
        return _local_init(spec)
    return None


def _local_init(spec: dict) -> bool | None:
    """A local run's step 0: True where a step-0 folder is on disk (``checkpoint-0``, ``step0``) though not
    listed; False for a Hugging Face ``Trainer`` run (``checkpoint-N`` folders) without one, since the Trainer
    saves none (docs/own-run.md: save the init before training); None otherwise (not known)."""
    revisions = list(spec.get("revisions") or [])
    for name in ("checkpoint-0", "step0", "step-0"):
        try:
            if Path(local_checkpoint_path(spec, name)).exists():
                return True
        except (KeyError, TypeError, ValueError):
            return None
    if revisions and all(str(r).startswith("checkpoint-") for r in revisions):
        return False
    return None


def cell_tokens(config: dict, model: str, revision: str) -> int | None:
    spec = model_spec(config, model)
    try:
        return revs.tokens_for(revision, spec)
    except ValueError as err:
        raise ConfigError(f"models.{model}.revisions: {err}") from None


def cells(config: dict, model: str | None = None) -> list[Cell]:
    names = [model] if model else model_names(config)
    return [Cell(m, r, cell_tokens(config, m, r)) for m in names for r in revisions_of(config, m)]


def probe_given(config: dict, model: str) -> dict:
    """The probe keys the config sets for one model: the global ``probe`` < the model's own
    ``probe``, key by key (the schema validates both without filling in defaults)."""
    return {**(config.get("probe") or {}), **(model_spec(config, model).get("probe") or {})}


def model_notes(config: dict) -> dict[str, str]:
    """``model -> note`` of every model whose config entry has a ``note`` (the first screen shows them)."""
    return {m: str(model_spec(config, m)["note"]) for m in model_names(config) if model_spec(config, m).get("note")}


def ablation_settings(config: dict, model: str) -> dict:
    """The ablation block as ``model`` runs it: the global block, then the model's own
    ``models.{model}.ablation`` keys (``n_sequences``, ``previous_token``); ``batch_size`` left out
    (the job reads it, so changing it reruns nothing)."""
    block = {**(config.get("ablation") or {}), **(model_spec(config, model).get("ablation") or {})}
    return {k: v for k, v in block.items() if k != "batch_size"}


def probe_settings(config: dict, model: str) -> dict:
    """The probe of one model: defaults < global ``probe`` < the model's own ``probe``; with
    ``derive: true``, ``seq_len``, ``ab_range`` and ``token_range`` that neither block sets are
    derived from the model (:func:`headtrace.probe.fit.derive`, from :func:`probe_limits`), so
    the probe job's params are the resolved numbers and the same before every run."""
    given = probe_given(config, model)
    merged = {**PROBE_DEFAULTS, **given}
    # a reference model runs no probe; a probe that sets all three keys has nothing to derive
    if not merged.get("derive") or model_spec(config, model)["source"] == "reference" or DERIVED <= set(given):
        return merged
    limits = probe_limits(config, model)
    where = f"models.{model}"
    if limits is None:
        raise ConfigError(f"{where}: probe.derive needs the model's config.json before any job, and a "
                          f"{model_spec(config, model)['source']} model's is on disk only after its fetch job: "
                          f"set probe.seq_len, probe.ab_range and probe.token_range in {where}.probe instead "
                          "(its config.json names max_position_embeddings and vocab_size; `headtrace cell "
                          "--probe auto` derives them from it)")
    if not limits.known:
        raise ConfigError(f"{where}: probe.derive: no revision's config.json names a context length or a "
                          f"vocabulary yet ({_config_jsons(config, model)}); set the probe keys in {where}.probe, "
                          "or add the checkpoints first")
    try:
        return fit.derive(merged, given, limits)
    except ValueError as err:
        raise ConfigError(f"{where}: probe.derive: {err}") from None


def probe_limits(config: dict, model: str) -> fit.Limits | None:
    """The context length and vocabulary a model's probe must fit, known before any job: a toy's
    architecture, the smallest over a local model's revisions (each ``config.json`` there now);
    None for a hub model (its config.json comes with the fetch job) and a reference one."""
    spec = model_spec(config, model)
    if spec["source"] == "toy":
        return context.limits_of([(context.toy_arch(config, model),
                                   f"the toy architecture of family '{spec.get('family')}' "
                                   "(train.arch over headtrace.models.toy.recipe)")])
    if spec["source"] == "local":
        return context.limits_of((context.read_config(where), where) for where in _config_jsons_of(config, model))
    return None


PUBLISHED_NAMES = {"pythia1b": "Pythia-1B", "olmo": "OLMo-1B-0724", "olmoe": "OLMoE-1B-7B-0924"}  # the family column


def families_shown(config: dict) -> dict[str, str]:
    """The family each model's headline row names: as configured, or as ``family: auto`` resolves it
    (a local checkpoint's config.json ``model_type``, read as the config check reads it); the
    published panel: its reference file; a hub model on auto: 'auto (hub)' (its config is fetched by
    the job)."""
    out = {}
    for m in model_names(config):
        spec = model_spec(config, m)
        fam = spec.get("family")
        if fam and fam != "auto":
            out[m] = fam
        elif spec.get("published"):
            out[m] = f"published ({PUBLISHED_NAMES.get(spec['published'], spec['published'])})"
        elif spec.get("source") == "local":
            types = sorted({c["model_type"] for c in (context.read_config(w) or {} for w in _config_jsons_of(config, m))
                            if c.get("model_type")})
            out[m] = "/".join(types) if types else "auto (local)"
        else:
            out[m] = f"auto ({spec.get('source', '?')})"
    return out


def _config_jsons_of(config: dict, model: str) -> list[str]:
    """Where each local revision's configuration is read: its folder's ``config.json``, or its GGUF
    file (a ``.gguf`` path, or the one ``.gguf`` in its folder: :func:`headtrace.models.gguf.locate`)."""
    spec = model_spec(config, model)
    out = []
    for revision in spec["revisions"]:
        where = local_checkpoint_path(spec, revision)
        try:
            file = gguf.locate(where)
        except gguf.CheckpointError:
            file = None  # several GGUF files: refused by panel.local_gguf.check
        out.append(str(file) if file is not None else f"{where}/config.json")
    return out


def _config_jsons(config: dict, model: str) -> str:
    paths = _config_jsons_of(config, model)
    return ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


probe_kwargs = probe_spec.batch_arguments  # the probe job's params: the config's probe keys that draw the batch


def load_spec(config: dict, model: str, revision: str | None = None) -> dict:
    """What a per-cell job needs to load one model: never the revision list (so adding a revision
    does not change the params of the other cells' jobs). With ``revision``, of the ``repos`` map
    only that revision's entry (if it has one), for the same reason; without, the whole map."""
    spec = model_spec(config, model)
    keys = ("source", "hf_id", "path", "package", "single_checkpoint", "family", "dtype")
    out = {k: spec[k] for k in keys if k in spec}
    repos = spec.get("repos") or {}
    if revision is None and repos:
        out["repos"] = dict(repos)
    elif revision is not None and revision in repos:
        out["repos"] = {revision: repos[revision]}
    return out


def hub_source(config: dict, model: str, revision: str) -> tuple[str, str]:
    """``(repository id, revision in it)`` a hub model's revision is fetched from and loaded
    (``models.{model}.repos`` or ``hf_id``; :func:`headtrace.models.layout.hub_checkpoint`)."""
    try:
        return hub_checkpoint(model_spec(config, model), revision)
    except ValueError as err:
        raise ConfigError(f"models.{model}.repos: {err}") from None


def _check_repos(spec: dict, where: str) -> None:
    """``repos``: hub only; every key one of the model's revisions (a typo would otherwise read
    ``hf_id``'s branch of that name); every value a repository id; with no ``hf_id``, every revision
    listed."""
    repos = spec.get("repos")
    if repos is None:
        return
    if spec["source"] != "hub":
        raise ConfigError(f"{where}.repos: only a hub model reads revisions from other repositories "
                          f"(source is '{spec['source']}')")
    if not isinstance(repos, dict) or not repos:
        raise ConfigError(f"{where}.repos: a map revision name -> hub repository id 'owner/name[@revision]'")
    revisions = spec["revisions"] if isinstance(spec["revisions"], list) else []
    for revision, ref in repos.items():
        if revision not in revisions:
            raise ConfigError(f"{where}.repos.{revision}: not one of {where}.revisions (list it there, "
                              "in training order, or drop it here)")
        try:
            parse_repo(ref)
        except ValueError as err:
            raise ConfigError(f"{where}.repos.{revision}: {err}") from None
    if not spec.get("hf_id"):
        missing = [r for r in revisions if r not in repos]
        if missing:
            raise ConfigError(f"{where}.repos: revision '{missing[0]}' has no repository here and the model "
                              "has no hf_id to read it from (add it to repos, or set hf_id)")


def check(config: dict) -> None:
    """Cross-field checks the schema cannot express. Raises ConfigError naming the key."""
    for model in model_names(config):
        spec = model_spec(config, model)
        where = f"models.{model}"
        source = spec["source"]
        needs = {"hub": "hf_id", "local": "path", "reference": "published"}.get(source)
        if needs and needs not in spec and not (source == "hub" and spec.get("repos")):
            raise ConfigError(f"{where}: source '{source}' needs the key '{needs}'"
                              + (" (or 'repos', a repository per revision)" if source == "hub" else ""))
        local_gguf.check(spec, where)
        _check_repos(spec, where)
        if source == "toy" and spec.get("family", "auto") == "auto":
            raise ConfigError(f"{where}.family: a toy model needs an explicit family (gpt_neox, olmo, olmoe)")
        for revision in spec["revisions"]:
            if source == "toy":
                try:
                    revs.toy_step(revision)
                except ValueError as e:
                    raise ConfigError(f"{where}.revisions: {e}") from None
        if spec.get("tokens_per_step") is not None and spec.get("tokens_schedule") is not None:
            raise ConfigError(f"{where}: set tokens_per_step or tokens_schedule, not both")
        # The last listed revision is the final one (ablation, F4/F5): the list must be in training order.
        # (A toy's tokens grow with its step, derived or not: its steps are the order.)
        unit = "steps" if source == "toy" else "tokens"
        tokens = [revs.toy_step(r) if source == "toy" else cell_tokens(config, model, r) for r in spec["revisions"]]
        known = [(r, t) for r, t in zip(spec["revisions"], tokens) if t is not None]
        for (r0, t0), (r1, t1) in zip(known, known[1:]):
            if t1 <= t0:
                raise ConfigError(f"{where}.revisions: not in training order ('{r1}' has {t1} {unit}, "
                                  f"not more than '{r0}' with {t0}); list them oldest first")
        _check_token_axis(config, model)
        _check_local_layout(spec, where)
        _check_fit(config, model)
        toy_tokens.check(spec, where)
        _check_held_out_seed(config, {**PROBE_DEFAULTS, **probe_given(config, model)}, where)
    check_groups(config)
    _check_text_probe(config)
    _check_spread_families(config)


def _check_spread_families(config: dict) -> None:
    """``findings.spread_families``: a model is in one family at most. (A model named but not in this run
    is allowed: the family was stated before the run, and its test counts as untested, p = 1.)"""
    fams = (config.get("findings") or {}).get("spread_families") or {}
    seen: dict[str, str] = {}
    for fam, members in fams.items():
        for m in members:
            if m in seen:
                raise ConfigError(f"findings.spread_families: '{m}' is in '{seen[m]}' and '{fam}'; one family at most")
            seen[m] = fam


def _check_held_out_seed(config: dict, p: dict, where: str) -> None:
    """ablation.probe: held_out draws with ablation.probe_seed: it must not be the probe's own seed."""
    a = config.get("ablation") or {}
    if a.get("probe", "held_out") == "held_out" and a.get("probe_seed") is not None and a["probe_seed"] == p["seed"]:
        raise ConfigError(f"ablation.probe_seed {a['probe_seed']} is the probe.seed of {where}: the held-out "
                          "draw needs another seed (null: probe.seed + 1), or set ablation.probe: same")


def derive_toy_tokens(config: dict) -> None:
    """Give every toy model the token axis of its recipe: ``tokens_schedule`` from its phases, so
    tokens at step N are the tokens its N updates trained on (a 16 x 32 curriculum phase counts
    512 a step, a 16 x 128 main stream 2,048). A toy that sets ``tokens_per_step`` or
    ``tokens_schedule`` itself must agree with its recipe (:func:`check`). Modifies ``config``."""
    for model in model_names(config):
        spec = model_spec(config, model)
        derived = toy_tokens.schedule(spec, f"models.{model}")
        if derived is not None and not any(spec.get(k) is not None for k in revs.TOKEN_KEYS):
            spec["tokens_schedule"] = derived


def _check_local_layout(spec: dict, where: str) -> None:
    if not spec.get("single_checkpoint"):
        return
    if spec["source"] != "local":
        raise ConfigError(f"{where}.single_checkpoint: only a local model reads its path as one checkpoint")
    if "{revision}" in str(spec["path"]):
        raise ConfigError(f"{where}.single_checkpoint: path '{spec['path']}' contains {{revision}}, "
                          "so it is not one checkpoint; drop one of the two")
    if len(spec["revisions"]) != 1:
        raise ConfigError(f"{where}.single_checkpoint: path '{spec['path']}' is one checkpoint, but "
                          f"{len(spec['revisions'])} revisions are listed; list exactly one")


def _check_fit(config: dict, model: str) -> None:
    """The probe must fit the model, every misfit said at once with a probe that fits
    (:func:`headtrace.probe.fit.misfit`): its own keys always (``ab_range`` clear of the query
    window, two tokens at least, a BOS when one is prepended); ``seq_len`` inside the context and
    ``token_range`` (and the BOS) inside the vocabulary where these are known before any job, for toy
    models (their architecture) and local ones (each revision's config.json). Hub models are checked
    at job start (``headtrace.models.hub``, before the weights are read)."""
    settings = probe_settings(config, model)
    limits = probe_limits(config, model) or fit.Limits()
    msg = fit.misfit(model, settings, limits, "config", given=probe_given(config, model),
                     derivable=probe_limits(config, model) is not None)
    if msg:
        raise ConfigError(msg)


def _check_token_axis(config: dict, model: str) -> None:
    """Every finding and figure is drawn against training tokens: a hub or local model whose
    revisions have none (no ``tokens``, ``tokens_per_step``, ``tokens_schedule`` or
    ``tokens_from_name``) is refused here, before any job, rather than running its cells and failing
    in the figures. (Toy models' tokens follow from their recipe; reference models carry theirs.)"""
    spec = model_spec(config, model)
    if spec["source"] not in ("hub", "local"):
        return
    missing = [r for r in spec["revisions"] if cell_tokens(config, model, r) is None]
    if not missing:
        return
    stepped = [r for r in missing if revs.parse_step(r) is not None]
    stepless = [r for r in missing if revs.parse_step(r) is None]
    hows = [f"models.{model}.tokens_per_step (tokens = step x it; '{stepped[0]}' has a step)"] if stepped else []
    if stepless:  # tokens_per_step cannot help a name without a step: say what does, in the same message
        hows.append(f"models.{model}.tokens: {{{', '.join(f'{r}: N' for r in stepless[:3])}}} (a revision named "
                    f"without a step, such as '{stepless[0]}', needs its count there)")
    how = " and ".join(hows)
    raise ConfigError(f"models.{model}.revisions: no training tokens for {', '.join(repr(r) for r in missing[:4])}"
                      f"{' and more' if len(missing) > 4 else ''}: the model sets none of tokens, tokens_per_step, "
                      f"tokens_schedule, tokens_from_name, and every finding and figure is drawn against training "
                      f"tokens; set {how}")


# ---------------------------------------------------------------------------------------------
# seed groups: one recipe trained with different seeds (config key ``groups``)

# Geometry read from a checkpoint's config.json, by transformers config class (GPT-2 names its own).
_GEOMETRY_KEYS = {
    "layers": ("num_hidden_layers", "n_layer"),
    "heads": ("num_attention_heads", "n_head"),
    "width": ("hidden_size", "n_embd"),
    "d_head": ("head_dim",),
    "vocab": ("vocab_size",),
}


def groups(config: dict) -> dict[str, dict[str, int]]:
    """Group name -> {member: seed}, in config order (empty when the config names none)."""
    return {name: dict(g["members"]) for name, g in (config.get("groups") or {}).items()}


def group_settings(config: dict, group: str) -> dict:
    g = (config.get("groups") or {})[group]
    return {"cross_seed_ablation": g.get("cross_seed_ablation", True), "members": dict(g["members"])}


def group_of(config: dict) -> dict[str, str]:
    """Member model -> its group."""
    return {m: name for name, members in groups(config).items() for m in members}


def geometry(config: dict, model: str) -> tuple[dict, str] | None:
    """``({layers, heads, d_head, vocab, context}, where it was read)`` of a model, known before any job:
    a toy's architecture, a local model's first revision's config.json on disk; None for a hub model
    (its config.json comes with the fetch job) or a local one whose folders are not there yet. A key
    the source does not name is left out."""
    spec = model_spec(config, model)
    if spec["source"] == "toy":
        arch = context.toy_arch(config, model)
        out = {"layers": arch.get("n_layers"), "heads": arch.get("n_heads"), "vocab": arch.get("vocab_size"),
               "context": arch.get("max_position_embeddings")}
        if arch.get("d_model") and arch.get("n_heads"):
            out["d_head"] = arch["d_model"] // arch["n_heads"]
        return {k: v for k, v in out.items() if v is not None}, f"the toy architecture of '{model}'"
    if spec["source"] != "local":
        return None
    for where in _config_jsons_of(config, model):
        cfg = context.read_config(where)
        if cfg is None:
            continue
        got = {k: next((cfg[n] for n in names if isinstance(cfg.get(n), int)), None) for k, names in _GEOMETRY_KEYS.items()}
        if got["d_head"] is None and got["width"] and got["heads"]:
            got["d_head"] = got["width"] // got["heads"]
        limit = context.limit_of(cfg)
        got["context"] = limit[0] if limit else None
        got.pop("width")
        return {k: v for k, v in got.items() if v is not None}, where
    return None


def check_groups(config: dict) -> None:
    """Every group: two members at least, each a toy, hub or local model of the panel, in one group
    only, sharing the family (named, or read from a local checkpoint: a hub member of a group names
    its family) and the geometry wherever it is known before any job (:func:`geometry`: layers,
    heads, head width, vocabulary, context); a toy member's seed is its ``train.seed``. Raises one
    ConfigError naming the member and what differs."""
    seen: dict[str, str] = {}
    shown = families_shown(config)
    for name, members in groups(config).items():
        where = f"groups.{name}.members"
        first = None  # (member, family): the family every member must share
        geo_ref = None  # (member, (geometry, where read)): the first member whose geometry is known
        for m, seed in members.items():
            if m not in config["models"]:
                raise ConfigError(f"{where}.{m}: no such model in models (nor one the experiments block adds)")
            if m in seen:
                raise ConfigError(f"{where}.{m}: already a member of group '{seen[m]}'; a model belongs to one group")
            seen[m] = name
            spec = model_spec(config, m)
            if spec["source"] == "reference":
                raise ConfigError(f"{where}.{m}: a reference model (a published panel, no model is run) cannot be "
                                  "a seed member; name the runs themselves (toy, hub or local)")
            if spec["source"] == "toy":
                own = int((spec.get("train") or {}).get("seed", 0))
                if own != int(seed):
                    raise ConfigError(f"{where}.{m}: seed {seed}, but the toy trains with train.seed {own}")
            fam = shown[m]
            if fam.startswith("auto"):
                raise ConfigError(f"{where}.{m}: its family is not known before any job ({fam}); "
                                  f"set models.{m}.family so the group's members can be checked alike")
            if first is None:
                first = (m, fam)
            elif fam != first[1]:
                raise ConfigError(f"{where}.{m}: family '{fam}' differs from '{first[1]}' of {first[0]}; a seed "
                                  "group is one recipe trained with different seeds")
            geo = geometry(config, m)
            if geo is None:
                continue
            if geo_ref is None:
                geo_ref = (m, geo)
                continue
            (base, base_where), (mine, mine_where) = geo_ref[1], geo
            diff = [f"{k} {mine[k]} vs {base[k]}" for k in ("layers", "heads", "d_head", "vocab", "context")
                    if k in mine and k in base and mine[k] != base[k]]
            if diff:
                raise ConfigError(f"{where}.{m}: geometry differs from {geo_ref[0]} ({', '.join(diff)}; read from "
                                  f"{mine_where} and {base_where}); a seed group's members share their architecture")


# ---- the field's own measures (docs/measures.md): the repeated-random and the text probe ------------

def measures_on(config: dict, model: str | None = None) -> bool:
    """Whether the capture jobs write the ``measures`` table (``measures.enabled``; never for a
    reference model, which runs no pass)."""
    on = {**schema.defaults("measures"), **(config.get("measures") or {})}["enabled"]
    return bool(on) and (model is None or model_spec(config, model)["source"] != "reference")


def measures_settings(config: dict) -> dict:
    """The ``measures`` block, defaults filled in."""
    return {**schema.defaults("measures"), **(config.get("measures") or {})}


def repeated_kwargs(config: dict, model: str) -> dict:
    """Keyword arguments of :func:`headtrace.probe.repeated.repeated_random` for one model: the
    ``repeated_probe`` block, its token range and BOS those of the model's synthetic probe where null."""
    p = probe_settings(config, model)
    return probe_spec.repeated(config.get("repeated_probe"), p["token_range"], p["prepend_bos"], p["bos_token_id"])


def text_settings(config: dict) -> dict | None:
    """The ``text_probe`` block, defaults filled in; None without a file (no text probe)."""
    t = {**schema.defaults("text_probe"), **(config.get("text_probe") or {})}
    return t if t["file"] and measures_on(config) else None


def text_tokenizer(config: dict, model: str) -> str | None:
    """The text probe's tokenizer of one model: ``text_probe.tokenizer``, or None (each checkpoint's own),
    ``bytes`` for a toy model (the toys read bytes and ship no tokenizer)."""
    t = text_settings(config) or {}
    if t.get("tokenizer") is not None:
        return t["tokenizer"]
    return tokenize.BYTES if model_spec(config, model)["source"] == "toy" else None


def _check_text_probe(config: dict) -> None:
    """An empty or missing text file, a tokenizer folder without a tokenizer, a local revision without
    one: a ConfigError naming it, before any job (a hub revision's tokenizer arrives with its fetch job
    and is checked there)."""
    t = text_settings(config)
    if t is None:
        return
    try:
        docs = texts.read_documents(t["file"], t["column"], t["split"])
        texts.check_enough(docs, t["n_sequences"], t["file"], t["split"], t["windows"])
    except (ValueError, OSError) as err:
        raise ConfigError(str(err)) from None
    if t["tokenizer"] not in (None, tokenize.BYTES) and not tokenize.has_tokenizer(t["tokenizer"]):
        raise ConfigError(f"text_probe.tokenizer: no tokenizer in {t['tokenizer']} (none of "
                          f"{', '.join(tokenize.TOKENIZER_FILES)})")
    for model in model_names(config):
        spec = model_spec(config, model)
        if spec["source"] != "local" or text_tokenizer(config, model) is not None:
            continue
        for revision in spec["revisions"]:
            folder = local_checkpoint_path(spec, revision)
            if Path(folder).is_dir() and not tokenize.has_tokenizer(folder):
                raise ConfigError(f"models.{model} revision '{revision}': no tokenizer in {folder} (none of "
                                  f"{', '.join(tokenize.TOKENIZER_FILES)}): the text probe tokenises with the "
                                  "checkpoint's own tokenizer; add its tokenizer files or set text_probe.tokenizer")
