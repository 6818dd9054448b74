"""``headtrace`` command line.

    headtrace revisions HF_ID --log-spaced N [--name NAME] [--from-file FILE]
                              [--tokens-per-step N] [--family auto]

prints a ready ``models:`` config block with N log-spaced revisions of HF_ID (branch names are
listed from the Hub, or read one per line from FILE, e.g. a recorded list, with no network);
``--list`` prints the sorted branch names instead, one per line (a recorded list for
``models.NAME.branch_list``, the refinement pool of a hub model). With ``--log-spaced`` the chosen
branches (and main) are audited first (:mod:`headtrace.models.audit`: the Hub's file metadata, no
download): a branch serving another's weights is marked with a comment, or left out and replaced
by the next candidate with ``--skip-duplicates`` (which audits every branch); ``--recorded FILE``
reads a recorded audit instead of the Hub, ``--no-audit`` skips it.

    headtrace audit HF_ID [--revisions R ...] [--from-file LIST] [--recorded FILE]

reports the branches that serve identical weight files or shards, and those with no loadable
weights, as a table, from each branch's file list with its LFS sha256 (no weight is downloaded);
exit 1 when any branch is flagged.

    headtrace summary [RESULTS]

prints the one-screen summary of a finished run (:func:`headtrace.report.console.summary`): the models
of the panel that folder holds (its ``panel.json``), no other.

    headtrace compare RESULTS[:MODEL] RESULTS[:MODEL] ...

puts finished runs (or models of one run) side by side: each headline question, then each one's
answer (:mod:`headtrace.report.compare`).

    headtrace cell CHECKPOINT [--revision R] [--out DIR] [--no-ablate] [--n-sequences N] [--probe auto] ...

runs the per-cell recipe (:func:`headtrace.analyze`) on one checkpoint: a local folder holding
``config.json`` + safetensors weights, or a Hub id (``--revision`` pinned; downloaded unless
``--offline``). Prints the induction circuit and verdict; ``--out DIR`` writes the tables. A probe
that does not fit the checkpoint is refused from its ``config.json``, every misfit in one message
with the flags of a probe that fits, before the weights are read; ``--probe auto`` derives the
probe from the checkpoint (:func:`headtrace.probe.fit.derived_settings`). The ablation runs on a
held-out draw of the probe (``--ablation-probe same``: on the screen's batch).

    headtrace lock-check [DIR] [--before-unlock]

tells a stale Snakemake lock (a killed run) from one held by a live run (:mod:`headtrace.runtime.locks`);
exit 0: no lock, 1: stale (prints the commands that recover), 2: a live run holds it.

    headtrace warm [--log FILE] -- COMMAND ...

runs COMMAND (a local ``snakemake`` run) with a warm interpreter beside it: the workflow's torch jobs
run in forks of one process that imported torch, transformers and every family's model class once
(:mod:`headtrace.runtime.warm`); exits with COMMAND's status.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from headtrace.core import local_panel
from headtrace.core import revisions as rv
from headtrace.core import schema
from headtrace.core.errors import ConfigError
from headtrace.models import audit  # pure at import (polars); huggingface_hub only inside its network calls
from headtrace.models import context, reach
from headtrace.models.layout import REPO_PATTERN
from headtrace.probe import fit
from headtrace.report import compare, console
from headtrace.runtime import locks, warm


def _read_names(path: str) -> list[str]:
    text = sys.stdin.read() if path == "-" else Path(path).read_text()
    return rv.parse_name_list(text)


# What each command that asks the Hub can do without it (said instead of a network traceback).
OFFLINE = {
    "revisions": "pass the branch names with --from-file FILE (written where the Hub is reachable: headtrace "
                 "revisions ORG/NAME --list > FILE); for checkpoints of your own run: headtrace revisions FOLDER",
    "audit": "audit from a recording with --recorded FILE (made where the Hub is reachable: "
             "headtrace.models.audit.save_recording), or leave it: every cell fingerprints the weights it loads "
             "and the lineage job flags duplicates (docs/integrity.md)",
    "cell": "headtrace cell ORG/NAME --offline reads the local Hugging Face cache; a checkpoint folder: "
            "headtrace cell FOLDER",
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="headtrace", description="headtrace: tools for checkpoint panels.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("revisions", help="print a config block of log-spaced checkpoints of a Hub model or of a folder "
                                         "of your own run's checkpoints",
                       description="Print a ready models: block. SOURCE is a Hub model id (its branches, listed from "
                                   "the Hub) or a folder of your own run's checkpoints (its step<N> / checkpoint-<N> "
                                   "sub-folders with config.json and *.safetensors, read from disk, no network; each "
                                   "folder left out is named with its reason).")
    r.add_argument("hf_id", metavar="SOURCE", help="Hub model id, e.g. EleutherAI/pythia-160m, or a folder of "
                   "your own run's checkpoints (a source: local block)")
    r.add_argument("--log-spaced", type=int, metavar="N",
                   help="choose N log-spaced revisions (first and last included); default: all")
    r.add_argument("--name", help="model name in the config (default: the Hub id's name or the folder's)")
    r.add_argument("--from-file", metavar="FILE",
                   help="read branch names from FILE (one per line, '-' = stdin) instead of the Hub")
    r.add_argument("--family", default="auto", help="model family (default: auto, from config.json)")
    r.add_argument("--tokens-per-step", type=rv.parse_count, metavar="N",
                   help="tokens per training step, e.g. 2097152 or 2M (written to the block; without it, a folder "
                        "of Trainer checkpoints gets a proposal from trainer_state.json and config.json, commented out)")
    r.add_argument("--by", choices=("auto", "step", "tokens"), default="auto",
                   help="space by step or tokens (auto: tokens when every name has them)")
    r.add_argument("--list", action="store_true",
                   help="print every branch name, one per line (a recorded list for models.NAME.branch_list)")
    r.add_argument("--skip-duplicates", action="store_true",
                   help="--log-spaced: audit every branch and choose among those serving their own weights "
                        "(default: audit the chosen ones and mark the flagged with a comment)")
    r.add_argument("--no-audit", action="store_true", help="--log-spaced: do not audit the branches")
    r.add_argument("--recorded", metavar="FILE", help="audit from a recording (headtrace.models.audit) instead of the Hub")
    r.set_defaults(func=_cmd_revisions)
    a = sub.add_parser("audit", help="which branches of a Hub model serve identical weight files or shards (no download)")
    a.add_argument("hf_id", metavar="HF_ID", help="Hub model id, e.g. EleutherAI/pythia-2.8b")
    a.add_argument("--revisions", nargs="+", metavar="R", help="branches to audit (default: every branch)")
    a.add_argument("--from-file", metavar="LIST", help="branches to audit, one per line ('-' = stdin)")
    a.add_argument("--recorded", metavar="FILE",
                   help="read the branches' file metadata from a recording instead of the Hub (offline)")
    a.set_defaults(func=_cmd_audit)
    s = sub.add_parser("summary", help="one-screen summary of a finished run: the models of its panel.json")
    s.add_argument("results", nargs="?", default="results",
                   help="results folder, the config's `results` key (default: results)")
    s.set_defaults(func=_cmd_summary)
    m = sub.add_parser("compare", help="two finished runs side by side: each headline question, each panel's answers "
                                       "(RESULTS folders, or RESULTS:MODEL for one model of a folder)")
    m.add_argument("runs", nargs="+", metavar="RESULTS[:MODEL]",
                   help="results folders (each config's `results`), e.g. results runs/my-run; "
                        "results:toy-olmo results:toy-neox-seed1 compares two models of one panel")
    m.set_defaults(func=_cmd_compare)
    c = sub.add_parser("cell", help="run the per-cell recipe on one checkpoint folder or Hub id")
    c.add_argument("checkpoint", metavar="CHECKPOINT", help="folder with config.json + safetensors, or a Hub id")
    c.add_argument("--revision", help="Hub revision (branch, tag or commit) to pin")
    c.add_argument("--out", metavar="DIR", help="write attention/pr/screen/ablation/verdict Parquet here")
    c.add_argument("--name", help="model name in the tables (default: the folder or repository name)")
    c.add_argument("--dtype", default="fp32", choices=("fp32", "fp16", "bf16"))
    c.add_argument("--device", default="auto")
    c.add_argument("--batch-size", default="auto", type=lambda v: v if v == "auto" else int(v))
    c.add_argument("--no-ablate", action="store_true", help="skip the causal ablation")
    c.add_argument("--n-random", type=int, default=None,
                   help="draws of a circuit's reference set when it is too large to evaluate whole (default: "
                        "ablation.n_random of the config schema, 99)")
    c.add_argument("--n-sequences", type=int, help="probe sequences (default 2000)")
    c.add_argument("--seq-len", type=int, help="probe length (default 256)")
    c.add_argument("--token-range", type=int, nargs=2, metavar=("LOW", "HIGH"),
                   help="probe tokens drawn from [LOW, HIGH) (default 100 10000)")
    c.add_argument("--ab-range", type=int, nargs=2, metavar=("LOW", "HIGH"),
                   help="position of A's first occurrence in [LOW, HIGH) (default 20 128)")
    c.add_argument("--probe-seed", type=int)
    c.add_argument("--ablation-probe", choices=("held_out", "same"),
                   help="ablate on a held-out draw of the probe (default) or on the screen's own sequences")
    c.add_argument("--probe", choices=("auto",),
                   help="auto: derive --seq-len, --ab-range and --token-range (those not given) from the "
                        "checkpoint's config.json: its context length and vocabulary, in the paper's proportions")
    c.add_argument("--offline", action="store_true", help="Hub id: read the local cache only")
    c.set_defaults(func=_cmd_cell)
    k = sub.add_parser("lock-check", help="is Snakemake's lock in this folder stale (a killed run) or held by a live run?")
    k.add_argument("directory", nargs="?", default=".", help="Snakemake working directory (default: .)")
    k.add_argument("--before-unlock", action="store_true",
                   help="exit 0 on a stale lock too (refuse only under a live run): what `make unlock` runs")
    k.add_argument("--unlock-command", default="make unlock", help="the unlock command the message names")
    k.add_argument("--rerun-command", default="make demo", help="the rerun command the message names")
    k.set_defaults(func=_cmd_lock_check)
    w = sub.add_parser("warm", help="run a local snakemake command with torch imported once for all its jobs")
    w.add_argument("--log", metavar="FILE", help="the warm server's own output (default: discarded)")
    w.add_argument("command_line", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the command to run")
    w.set_defaults(func=_cmd_warm)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except Exception as e:  # noqa: BLE001 - a Hub that cannot be reached: one line, not the client's traceback
        if args.command in OFFLINE and reach.is_network_failure(e):
            print(reach.unreachable(args.command, OFFLINE[args.command]), file=sys.stderr)
            return 2
        if isinstance(e, (ValueError, OSError)):  # bad input or a broken checkpoint: say what, not a traceback
            print(f"headtrace {args.command}: {e}", file=sys.stderr)
            return 2
        raise


def _is_local(arg: str) -> bool:
    """A folder on disk (or a path that cannot be a Hub id), not ``owner/name``."""
    return Path(arg).is_dir() or not re.fullmatch(REPO_PATTERN, arg) or arg.startswith((".", "/", "~"))


def _local_revisions(args: argparse.Namespace) -> int:
    """``headtrace revisions FOLDER``: a ``source: local`` block of the checkpoints in FOLDER (or of
    the run around a checkpoint folder), no network."""
    if not Path(args.hf_id).is_dir():
        print(f"headtrace revisions: '{args.hf_id}' is neither a folder here nor a Hub id 'owner/name'",
              file=sys.stderr)
        return 2
    root, one = local_panel.root_of(args.hf_id)
    if args.from_file:
        names = _read_names(args.from_file)
    else:
        names = [one] if one else rv.list_checkpoints(root)
        left = local_panel.skipped(root, names) if not one else []
        for n in left[:8]:  # each with its own reason, not the list of every possible one
            reason = local_panel.skip_reason(root / n)
            again = "; copy or save that checkpoint again" if (root / n / "config.json").is_file() \
                and rv.config_json_problem(root / n) else ""
            print(f"headtrace: {n} not listed: {reason}{again}", file=sys.stderr)
        if len(left) > 8:
            print(f"headtrace: … and {len(left) - 8} more folders not listed under {root}", file=sys.stderr)
    names = rv.sort_revisions(names)
    if args.list:
        sys.stdout.write("".join(f"{n}\n" for n in names))
        return 0
    if not names:
        print(f"headtrace revisions: no checkpoint folders with a step in the name under {root} "
              "(step<N> or checkpoint-<N>, each with config.json and *.safetensors)", file=sys.stderr)
        return 1
    chosen = names
    if args.log_spaced:
        stepless = [n for n in names if rv.parse_step(n) is None]
        chosen = rv.choose_log_spaced(names, args.log_spaced, by="step") + stepless
    limits = context.limits_of((context.read_config(root / r / "config.json"), str(root / r / "config.json"))
                               for r in chosen)
    small = not limits.known or fit.misfit("m", schema.defaults("$defs", "probe"), limits) is not None
    if args.tokens_per_step is None and (proposal := local_panel.proposed_tokens_per_step(root, chosen)):
        print(f"headtrace: tokens_per_step {proposal[0]} is a proposal, commented out in the block: {proposal[1]}",
              file=sys.stderr)
    sys.stdout.write(local_panel.config_block(root, args.name, chosen, family=args.family,
                                              tokens_per_step=args.tokens_per_step, derive_probe=small))
    return 0


def _cmd_revisions(args: argparse.Namespace) -> int:
    if _is_local(args.hf_id):
        return _local_revisions(args)
    names = _read_names(args.from_file) if args.from_file else rv.list_hub_revisions(args.hf_id)
    names = rv.sort_revisions(names)
    if args.list:  # the branch list file a hub model's refine pool can use (models.NAME.branch_list)
        sys.stdout.write("".join(f"{n}\n" for n in names))
        return 0
    notes = {}
    if args.log_spaced:  # stage 2 (annealing) lies after stage 1: revisions.training_positions
        audit_on = not args.no_audit and (args.recorded or not args.from_file)
        if audit_on and args.skip_duplicates:  # audit every branch, choose among the healthy ones
            bad = audit.flagged_branches(_audit_table(args.hf_id, (names + ["main"]) if args.recorded else None,
                                                      args.recorded, optional=("main",)))
            if bad:
                print(f"headtrace: left out {len(bad)} branches the audit flags: "
                      + ", ".join(f"{b} ({w})" for b, w in list(bad.items())[:8]) + (" …" if len(bad) > 8 else ""),
                      file=sys.stderr)
            names = [n for n in names if n not in bad]
        chosen = rv.choose_log_spaced(names, args.log_spaced, by=args.by, tokens_per_step=args.tokens_per_step)
        if audit_on and not args.skip_duplicates and chosen:  # mark: audit the chosen and main
            notes = audit.notes(_audit_table(args.hf_id, chosen + ["main"], args.recorded, optional=("main",),
                                             all_branches=names))
            if notes:
                print(f"headtrace: the audit flags {len(notes)} of the chosen revisions (marked below; "
                      "--skip-duplicates chooses others)", file=sys.stderr)
        if not audit_on and not args.no_audit:  # say so: the names came from a file, not from the Hub
            print("headtrace: the chosen revisions were not audited (branch names read from a file; --recorded FILE "
                  "audits from a recording; without --from-file the Hub's metadata is read)", file=sys.stderr)
    else:
        chosen = [n for n in names if rv.parse_step(n) is not None]
    if not chosen:
        print(f"headtrace: no step<N> revisions found for {args.hf_id}", file=sys.stderr)
        return 1
    sys.stdout.write(rv.config_block(args.hf_id, args.name, chosen, family=args.family,
                                     tokens_per_step=args.tokens_per_step, notes=notes))
    return 0


def _audit_table(hf_id: str, branches: list[str] | None, recorded: str | None, optional=(), all_branches=None):
    """The audit of ``branches`` (None: all) from a recording, or from the Hub's metadata (network);
    a branch in ``optional`` (main) is audited only where the recording has it."""
    if recorded:
        rec_id, trees = audit.load_recording(recorded)
        if rec_id and rec_id != hf_id:
            raise ValueError(f"recording {recorded} is of {rec_id}, not {hf_id}")
        if branches is not None:
            branches = [b for b in branches if b in trees or b not in optional]
            missing = [b for b in branches if b not in trees]
            if missing:
                raise ValueError(f"recording {recorded} has no branch {', '.join(missing[:5])}")
            trees = {b: trees[b] for b in branches}
    else:
        trees = audit.fetch_trees(hf_id, branches)
    return audit.audit(trees, all_branches)


def _cmd_audit(args: argparse.Namespace) -> int:
    branches = None
    if args.revisions or args.from_file:
        branches = list(dict.fromkeys((args.revisions or []) + (_read_names(args.from_file) if args.from_file else [])))
    table = _audit_table(args.hf_id, branches, args.recorded)
    print(audit.format_table(table, args.hf_id))
    return 1 if audit.flagged_branches(table) else 0


def _cmd_summary(args: argparse.Namespace) -> int:

    print(console.summary(args.results))
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    text, problems = compare.compare(args.runs)
    for p in problems:
        print(f"headtrace compare: {p}", file=sys.stderr)
    sys.stdout.write(text)
    return 2 if problems else 0


def _cmd_cell(args: argparse.Namespace) -> int:
    from headtrace import api  # imports torch and transformers: only `headtrace cell` needs them
    from headtrace.models import gguf, hub

    given = {k: v for k, v in (("n_sequences", args.n_sequences), ("seq_len", args.seq_len),
                               ("seed", args.probe_seed)) if v is not None}
    if args.token_range:
        given["token_range"] = list(args.token_range)
    if args.ab_range:
        given["ab_range"] = list(args.ab_range)
    settings = {**schema.defaults("$defs", "probe"), **given, "derive": args.probe == "auto"}
    local = Path(args.checkpoint).is_dir() or Path(args.checkpoint).suffix == gguf.SUFFIX
    if Path(args.checkpoint).is_dir():  # run/step1500 is revision step1500 of model run, as a local config names it
        run_root, folder_name = local_panel.root_of(args.checkpoint)
        name, args.revision = args.name or run_root.name, args.revision or folder_name
    else:
        name = args.name or Path(args.checkpoint.rstrip("/")).name
    try:  # every probe misfit is said at once, from config.json (or the GGUF header), before the weights are read
        folder = args.checkpoint if local else hub.snapshot_path(args.checkpoint, args.revision,
                                                                 offline=args.offline)
        where = gguf.locate(folder) or Path(folder) / "config.json"
        limits = context.limits_of([(context.read_config(where), str(where))])
        settings = fit.derive(settings, given, limits)
        msg = fit.misfit(f"{name} {args.revision}" if local and args.revision else name, settings, limits, "cli", given=given)
        if msg:
            raise ConfigError(msg)
        model, _ = hub.load_model("local" if local else "hub", args.checkpoint, args.revision, dtype=args.dtype,
                                  device=hub.resolve_device(args.device), offline=args.offline or local,
                                  name=name, seq_len=settings["seq_len"], token_range=settings["token_range"],
                                  words="cli")
    except (hub.CheckpointError, ConfigError, ValueError) as e:
        print(f"headtrace cell: {e}", file=sys.stderr)
        return 2
    ablation = {"probe": args.ablation_probe} if args.ablation_probe else {}
    probe_kwargs = {**settings, "derive": False}  # resolved: the probe the tables record
    if args.probe == "auto":
        derived = {k: settings[k] for k in ("seq_len", "ab_range", "token_range")}
        print(f"{name}: probe derived from the checkpoint's config.json: {fit.setting(derived, 'cli')}")
    cell = api.analyze(model, probe=probe_kwargs, ablate=not args.no_ablate, n_random=args.n_random,
                       batch_size=args.batch_size, name=name, revision=args.revision or "", out=args.out,
                       settings={"ablation": ablation})
    print("\n".join(console.cell_lines(cell.screen, cell.positional, cell.verdict, cell.copying_heads, name=name,
                                        revision=args.revision or "", out=args.out)))
    return 0


def _cmd_warm(args: argparse.Namespace) -> int:
    command = args.command_line[1:] if args.command_line[:1] == ["--"] else args.command_line
    if not command:
        raise ValueError("give the command to run after --, e.g. headtrace warm -- snakemake --cores all")
    from headtrace.models import families  # imports torch: here, not for every command
    return warm.run(command, preload=warm.PRELOAD + families.warm_preload(), log=args.log)


def _cmd_lock_check(args: argparse.Namespace) -> int:

    state = locks.check(args.directory)
    if args.before_unlock and state.status == locks.STALE:
        return 0  # `make unlock`: a stale lock is what it is there for
    text = locks.message(state, unlock=args.unlock_command, rerun=args.rerun_command)
    if text:
        print(text, file=sys.stderr)
    return state.status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
