"""The mutation check's score per module, from a finished `mutmut run` (``make mutation``, docs/testing.md).

    python docs/mutation_scores.py [MUTANTS_FOLDER]     # default: mutants

mutmut records every mutant's test exit code in ``mutants/<source path>.meta``; this reads them and
prints, per mutated module, the mutants made, killed (a test failed, timed out or crashed), survived
(every selected test passed), with no test (no selected test reaches the mutated function: counted
as not killed), and the score, killed / (killed + survived + no test); then each module's survivors
by name (``mutmut show NAME`` prints the change), which docs/testing.md accounts for one by one.
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code  # mutmut's own reading of the exit codes

KILLED = {"killed", "timeout", "segfault", "caught by type check"}
NOT_KILLED = {"survived", "no tests"}


def scores(folder: Path) -> dict[str, dict]:
    """module path -> {"status": Counter of statuses, "alive": [(mutant, status)] survivors and untested}."""
    out = {}
    for meta in sorted(folder.rglob("*.py.meta")):
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        module = meta.relative_to(folder).as_posix().removesuffix(".meta")
        status = {name: status_by_exit_code[code] for name, code in codes.items()}
        out[module] = {"status": Counter(status.values()),
                       "alive": sorted((n, s) for n, s in status.items() if s in NOT_KILLED)}
    return out


def table(result: dict[str, dict]) -> str:
    lines = ["| module | mutants | killed | survived | no test | other | score |", "|---|---|---|---|---|---|---|"]
    for module, r in result.items():
        c = r["status"]
        killed = sum(c[s] for s in KILLED)
        alive = sum(c[s] for s in NOT_KILLED)
        other = sum(c.values()) - killed - alive  # not checked, skipped, suspicious
        score = f"{killed / (killed + alive):.1%}" if killed + alive else "—"
        lines.append(f"| `{module}` | {sum(c.values())} | {killed} | {c['survived']} | {c['no tests']} | {other} "
                     f"| {score} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    folder = Path(argv[1] if len(argv) > 1 else "mutants")
    result = scores(folder)
    if not result:
        print(f"no mutmut results under {folder}/: run `make mutation` first", file=sys.stderr)
        return 1
    print(table(result))
    for module, r in result.items():
        if r["alive"]:
            print(f"\n{module}: {len(r['alive'])} not killed")
            print("\n".join(f"  {name} ({status})" for name, status in r["alive"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
