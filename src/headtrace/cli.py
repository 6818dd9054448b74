"""``headtrace`` command line.

    headtrace revisions HF_ID --log-spaced N [--name NAME] [--from-file FILE]
                              [--tokens-per-step N] [--family auto]

prints a ready ``models:`` config block with N log-spaced revisions of HF_ID (branch names are
listed from the Hub, or read one per line from FILE, e.g. a recorded list, with no network).

    headtrace summary [RESULTS]

prints the one-screen summary of a finished run (:func:`headtrace.console.summary`).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from headtrace import revisions as rv


def _read_names(path: str) -> list[str]:
    text = sys.stdin.read() if path == "-" else Path(path).read_text()
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def _cmd_revisions(args: argparse.Namespace) -> int:
    names = _read_names(args.from_file) if args.from_file else rv.list_hub_revisions(args.hf_id)
    names = rv.sort_revisions(names)
    if args.log_spaced:
        key = args.by
        if key == "auto":
            stepped = [n for n in names if rv.parse_step(n) is not None]
            key = "tokens" if stepped and all(rv.parse_tokens(n) is not None for n in stepped) else "step"
        if key == "tokens":
            def value(n):
                t = rv.parse_tokens(n)
                s = rv.parse_step(n)
                if t is None and s is not None and args.tokens_per_step:
                    t = s * args.tokens_per_step
                return t
            items = [(n, value(n)) for n in names]
        else:
            items = [(n, rv.parse_step(n)) for n in names]
        chosen = rv.log_spaced(items, args.log_spaced)
    else:
        chosen = [n for n in names if rv.parse_step(n) is not None]
    if not chosen:
        print(f"headtrace: no step<N> revisions found for {args.hf_id}", file=sys.stderr)
        return 1
    sys.stdout.write(rv.config_block(args.hf_id, args.name, chosen, family=args.family,
                                     tokens_per_step=args.tokens_per_step))
    return 0


def _cmd_summary(args: argparse.Namespace) -> int:
    from headtrace import console

    print(console.summary(args.results, class_threshold=args.class_threshold))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="headtrace", description="headtrace: tools for checkpoint panels.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("revisions", help="print a config block of log-spaced checkpoints of a Hub model")
    r.add_argument("hf_id", metavar="HF_ID", help="Hub model id, e.g. EleutherAI/pythia-160m")
    r.add_argument("--log-spaced", type=int, metavar="N",
                   help="choose N log-spaced revisions (first and last included); default: all")
    r.add_argument("--name", help="model name in the config (default: from HF_ID)")
    r.add_argument("--from-file", metavar="FILE",
                   help="read branch names from FILE (one per line, '-' = stdin) instead of the Hub")
    r.add_argument("--family", default="auto", help="model family (default: auto, from config.json)")
    r.add_argument("--tokens-per-step", type=rv.parse_count, metavar="N",
                   help="tokens per training step, e.g. 2097152 or 2M (written to the block)")
    r.add_argument("--by", choices=("auto", "step", "tokens"), default="auto",
                   help="space by step or tokens (auto: tokens when every name has them)")
    r.set_defaults(func=_cmd_revisions)
    s = sub.add_parser("summary", help="one-screen summary of a finished run (results/models/*/trajectory.parquet)")
    s.add_argument("results", nargs="?", default="results", help="results folder (default: results)")
    s.add_argument("--class-threshold", type=float, default=30.0)
    s.set_defaults(func=_cmd_summary)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
