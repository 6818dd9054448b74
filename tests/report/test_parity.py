"""summary.md and summary.html say the same things (issue 41, point 8): both pages are written by the
workflow's own scripts (findings.py, summary_html.py) from one hand-built run's results folder (three
seeds of a toy, a seed group, a causal and an underpowered verdict, one revision flagged by the lineage
check, a run that continues another, byte-identical weights, mixed selectivity baselines, a note and a
probe), the first screen of each is read back as a list of facts (markup stripped: sentences, list
items, paragraphs, table cells), and every fact of one must be a fact of the other. The console's
summary of the same folder prints the sentences summary.md shows."""
from __future__ import annotations

import re
import runpy
import types
from html import unescape
from pathlib import Path
from html.parser import HTMLParser

import polars as pl
import pytest
from helpers.trajectories import MEMBERS, PAIRS
from helpers.trajectories import seed_group_trajectory as _traj

from headtrace.core import schema, tables
from headtrace.findings import groups as group_stats
from headtrace.findings.compute import all_findings
from headtrace.report import answers as A
from headtrace.report import console
from headtrace.report import first_screen as FS
from headtrace.report import headline as HL
from headtrace.report import html
from headtrace.report import lineage as RL
from headtrace.report import summary

NOTES = {"A": "a toy trained here; its `step5` is the last checkpoint."}
ROOT = Path(__file__).resolve().parents[2]
PROBES = {"A": "8 sequences of 40 tokens, seed 1, no BOS", "B": "8 sequences of 40 tokens, seed 1, no BOS",
          "C": "16 sequences of 40 tokens, seed 2, no BOS"}


def _verdicts() -> pl.DataFrame:
    base = {"metric": "top1", "baseline_top1": 0.6, "upper_bound": "upper_bound", "upper_bound_top1": 0.0,
            "control_exact": False, "n_matched_sets": 21, "circuit": "final_circuit", "n_heads": 3}
    return pl.DataFrame([
        {**base, "model": "A", "revision": "step5", "tokens": 1600, "heads": ["L1H0", "L1H1", "L2H0"],
         "ablated_top1": 0.2, "effect": 0.4, "effect_lo": 0.3, "effect_hi": 0.5, "p_value": 0.01,
         "n_distinct_draws": 20, "random_top1_mean": 0.55, "random_effect_mean": 0.05, "min_p": 0.048,
         "verdict": "causal", "causal": True},
        {**base, "model": "B", "revision": "step5", "tokens": 1600, "heads": ["L1H0", "L2H1", "L2H2"],
         "ablated_top1": 0.3, "effect": 0.3, "effect_lo": 0.2, "effect_hi": 0.4, "p_value": 0.5,
         "n_distinct_draws": 1, "n_matched_sets": 1, "random_top1_mean": 0.5, "random_effect_mean": 0.1,
         "min_p": 0.5, "verdict": "underpowered", "causal": False},
    ])


def _lineage() -> pl.DataFrame:
    """B's step2 is its step1 byte for byte (flag duplicate_of), nothing else flagged; C continues B's
    training run (the config's ``continues``, as the lineage tables record it): one run, counted once."""
    spec = tables.SCHEMAS["lineage"]
    rows = [{**dict.fromkeys(spec), "model": "B", "revision": r, "order": i, "tokens": 100 * 2 ** i,
             "flags": ["duplicate_of"] if r == "step2" else [], "duplicate_of": ["step1"] if r == "step2" else None,
             "detail": "every weight file equals step1's" if r == "step2" else None}
            for i, r in enumerate(["step1", "step2", "step3", "step4", "step5"])]
    rows += [{**dict.fromkeys(spec), "model": "C", "revision": r, "order": i, "tokens": 100 * 2 ** i, "flags": [],
              "continues": "B"} for i, r in enumerate(["step1", "step2", "step3", "step4", "step5"])]
    return pl.DataFrame(rows, schema=spec)


# the formation sentence counts C with the run it continues (A 5, B 5 and C 4 revisions)
ONE_RUN_COUNTED_ONCE = "3 models over 14 revisions in all (2 independent training runs: C continues B's run)"


def _run():
    """The trajectories (A and B screened on the clean baseline, C's baseline not recorded; C's step3
    and step5 the same weights), the findings, the verdicts, the lineage table and the group."""
    traj = _traj()
    traj = traj.with_columns(
        screen_baseline=pl.when(pl.col("model") == "C").then(None).otherwise(pl.lit("clean")),
        weights_sha256=pl.when((pl.col("model") == "C") & pl.col("revision").is_in(["step3", "step5"]))
        .then(pl.lit("ab" * 32)).otherwise(pl.col("model") + pl.col("revision")))
    F = all_findings(traj, gaps=PAIRS)
    G = group_stats.group_findings("toy", MEMBERS, F, traj, PAIRS)
    return traj, F, _verdicts(), _lineage(), G


class _Named(dict):
    """A Snakemake job's input, output or params: by key and by name."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _script(name: str, results, **job) -> None:
    """Run ``workflow/scripts/{name}.py`` as its rule does, with the job's input, output and params."""
    smk = types.SimpleNamespace(**{k: _Named(v) for k, v in job.items()}, log=[str(results.parent / f"{name}.log")])
    runpy.run_path(str(ROOT / "workflow" / "scripts" / f"{name}.py"), init_globals={"snakemake": smk})


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """The run's results folder: the tables the page jobs read (trajectories, verdicts, lineage, the
    onset tables), then summary.md and summary.html as the findings and summary_html jobs write them
    (their scripts, with their rules' inputs and params)."""
    traj, _, V, lineage, _ = _run()
    res = tmp_path_factory.mktemp("parity") / "results"
    for m in MEMBERS:
        tables.write(traj.filter(pl.col("model") == m), res / "models" / m / "trajectory.parquet", schema=None)
        if lineage.filter(pl.col("model") == m).height:
            tables.write(lineage.filter(pl.col("model") == m), res / "models" / m / "lineage.parquet")
    for (m, r), g in V.group_by("model", "revision"):
        tables.write(g, res / "cells" / m / r / "verdict.parquet", schema=None)
    for name in ("f3_onset_bootstrap", "f3_onsets"):  # the refinement and bootstrap jobs' tables: none here
        tables.write(pl.DataFrame(schema=tables.SCHEMAS[name]), res / "findings" / f"{name}.parquet")
    trajectories = [str(p) for p in sorted(res.glob("models/*/trajectory.parquet"))]
    verdicts = [str(p) for p in sorted(res.glob("cells/*/*/verdict.parquet"))]
    lineages = [str(p) for p in sorted(res.glob("models/*/lineage.parquet"))]
    thresholds = {"class_threshold": 30.0, "induction_threshold": 50.0}
    onsets = {name: str(res / "findings" / f"f3_{name}.parquet") for name in ("onset_bootstrap", "onsets")}
    _script("findings", res,
            input={"trajectories": trajectories, **onsets, "positional": [], "experiments": [],
                   "verdicts": verdicts, "lineage": lineages, "cross_seed": [], "measures": []},
            output={"summary": str(res / "findings" / "summary.md"),
                    "lineage_panel": str(res / "findings" / "lineage_panel.parquet")},
            params={**schema.defaults("findings"), **thresholds, "gaps": PAIRS, "families": None,  # the rule's
                    "on_suspect": "warn", "groups": {"toy": MEMBERS}, "cross_seed_of": {}, "probes": PROBES, "notes": NOTES})
    _script("summary_html", res,
            input={"findings": [str(p) for p in sorted(res.glob("findings/*.parquet"))], "verdicts": verdicts,
                   "lineage": str(res / "findings" / "lineage_panel.parquet"), "figures": [], "cross_seed": [], "measures": [], "trajectories": trajectories,
                   "groups": [str(p) for p in sorted(res.glob("groups/toy/*.parquet"))]},
            output={"page": str(res / "findings" / "summary.html"), "headline": str(res / "findings" / "headline.html"),
                    "brief": str(res / "findings" / "headline_brief.html")},
            params={"captions": str(ROOT / "workflow" / "report"), "families": None, "on_suspect": "warn",
                    "cross_seed_of": {}, "probes": PROBES, "notes": NOTES, "thresholds": thresholds})
    return res


@pytest.fixture(scope="module")
def pages(results):
    """(the first screen built here from the run's tables, summary.md, summary.html)."""
    traj, F, V, lineage, G = _run()
    rows = HL.headline_rows(F, V, suspect=RL.suspect(lineage), groups=A.group_answers({"toy": G}),
                            continues=RL.continuations(lineage))
    fs = FS.build(rows, traj=traj, class_threshold=30.0, induction_threshold=50.0, lineage=lineage,
                  notes=NOTES, probes=PROBES)
    return fs, (results / "findings" / "summary.md").read_text(), (results / "findings" / "summary.html").read_text()


# ------------------------------------------------------------------------------ reading the facts back


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("**", "").replace("`", "")).strip()


def md_facts(md: str) -> list[str]:
    """The first screen of summary.md (up to Finding 1) as facts: each paragraph, list item and table
    cell, markup stripped; headings and table rules are layout, not facts."""
    end = md.find("\n## Finding 1")
    out = []
    for line in md[:end if end >= 0 else None].splitlines():
        line = line.strip()
        while line.startswith(">"):
            line = line[1:].strip()
        if not line or line.startswith("#") or re.fullmatch(r"\|[-:|]+\|", line):
            continue
        if line.startswith("|"):
            out += [_norm(c.replace("\\|", "|")) for c in re.split(r"(?<!\\)\|", line.strip("|"))]
        else:
            out.append(_norm(line[2:] if line.startswith("- ") else line))
    return [f for f in out if f]


class _Blocks(HTMLParser):
    BLOCKS = {"p", "li", "td", "th"}
    SKIP = {"nav", "h1", "h2", "h3", "style", "title", "script", "svg"}

    def __init__(self):
        super().__init__()
        self.out: list[str] = []
        self.open: list[list[str]] = []
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.skip += 1
        elif tag in self.BLOCKS:
            self.open.append([])

    def handle_endtag(self, tag):
        if tag in self.SKIP:
            self.skip -= 1
        elif tag in self.BLOCKS and self.open:
            self.out.append("".join(self.open.pop()))

    def handle_data(self, data):
        if not self.skip and self.open:
            self.open[-1].append(data)


def html_facts(page: str) -> list[str]:
    """The first screen of summary.html (up to the figures or the first section) as facts: the visible
    text of each paragraph, list item and table cell (tooltips are not text a reader sees)."""
    ends = [i for i in (page.find('<h2 id="figures"'), page.find("<section")) if i >= 0]
    p = _Blocks()
    p.feed(page[:min(ends)] if ends else page)
    return [f for f in (_norm(x) for x in p.out) if f]


def differences(md: str, page: str) -> tuple[set[str], set[str]]:
    a, b = set(md_facts(md)), set(html_facts(page))
    return a - b, b - a


# -------------------------------------------------------------------------------------------- tests


def test_both_pages_carry_the_same_facts(pages):
    fs, md, page = pages
    only_md, only_html = differences(md, page)
    assert not only_md, f"in summary.md only: {sorted(only_md)}"
    assert not only_html, f"in summary.html only: {sorted(only_html)}"
    facts = set(md_facts(md))
    # what summary.html used to drop: the baseline line, the sink-rate definition, the measures path,
    # the verdict's effect and interval (a tooltip), the lineage banner, the identical weights
    baseline = [f for f in facts if f.startswith("Selectivity baseline: clean for A, B; not recorded")]
    assert len(baseline) == 1 and "(imported selectivities: the author's sampled baseline) for C" in baseline[0]
    assert any("Sink rate on text: Gu et al. 2025's, thresholded per sequence" in f
               and "results/findings/measures/" in f for f in facts)
    assert any(f.startswith("causal (effect 40.00 pp [30.00, 50.00]") for f in facts)
    assert any(f.startswith("Checkpoint lineage: 1 revision flagged") for f in facts)
    assert "B step2: the same weights as step1 — every weight file equals step1's" in facts
    assert any(f.startswith("model 'C': revisions 'step3', 'step5' have byte-identical weights") for f in facts)
    assert "Models: A, B, C. Class threshold 30×, induction circuit 50×." in " ".join(facts)
    # every sentence, every cell of the structure is on both pages
    for s in fs.sentences:
        assert _norm(s) in facts
    for r in fs.rows:
        assert {_norm(t) for t in r.texts()} <= facts
    assert fs.flags and all(n in " ".join(facts) for n in fs.flags)


def test_html_shows_inline_code_as_code_and_no_tooltip_carries_a_fact_alone(pages):
    _, _, page = pages
    first = page[:page.index('<h2 id="figures"') if '<h2 id="figures"' in page else page.index("<section")]
    assert "`" not in " ".join(html_facts(page))  # no literal backticks in the visible text
    assert "<code>f3_milestones</code>" in first and "<code>results/findings/measures/</code>" in first
    assert "<code>screen.baseline</code>" in first
    visible = " ".join(html_facts(page))
    for tip in re.findall(r'title="([^"]*)"', first):  # a tooltip may repeat a fact, never carry it alone
        assert _norm(unescape(tip)) in visible


def test_the_comparison_catches_a_dropped_fact(pages):
    fs, md, page = pages
    # summary.html without its baseline line, and summary.md without one of its sentences
    dropped = page.replace(FS.inline_html(fs.baseline), "", 1)
    assert dropped != page
    only_md, only_html = differences(md, dropped)
    assert only_md == {_norm(fs.baseline)} and not only_html
    s = fs.sentences[0]
    only_md, only_html = differences(md.replace(f"- {s}\n", "", 1), page)
    assert only_html == {_norm(s)} and not only_md
    # an effect moved into a tooltip is a fact summary.html no longer shows
    tip = re.sub(r'<span class="why">(\(effect 40[^<]*)</span>', r'<span title="\1"></span>', page, count=1)
    assert tip != page and any(f.startswith("causal (effect 40.00 pp") for f in differences(md, tip)[0])


def _headline_sentences(md: str) -> list[str]:
    """The sentences of summary.md's headline section (its list items), read back from the page."""
    section = md[md.index("## Headline"):md.index("\n## ", md.index("## Headline") + 1)]
    return [line[2:] for line in section.splitlines() if line.startswith("- ")]


def test_headline_markdown_is_the_structures_section(pages):
    fs, md, _ = pages
    # the findings job's headline section is the headline rendered alone from the run's tables
    traj, F, V, lineage, G = _run()
    rows = HL.headline_rows(F, V, suspect=RL.suspect(lineage), groups=A.group_answers({"toy": G}),
                            continues=RL.continuations(lineage))
    assert HL.markdown(rows) in md
    # and it says what the hand-built run holds: C's run counted once, A's circuit causal, B's test
    # underpowered (one matched set), C not ablated, the group's sentence
    sents = _headline_sentences(md)
    assert ONE_RUN_COUNTED_ONCE in sents[0]
    assert any(s.startswith("Ablating the final circuit at the last revision: causal in A; not ablated in C; "
                            "underpowered") for s in sents)
    assert any(s.startswith("Across the 3 seeds of toy (A, B and C") for s in sents)
    section = md[md.index("## Headline"):md.index("## Warning: identical weights")]
    cells = {r.split(" | ")[0].strip("|* "): r for r in section.splitlines() if r.startswith("| ")}
    assert "**causal**" in cells["A"] and "**underpowered**" in cells["B"] and "**not ablated**" in cells["C"]
    assert md.index("**About the models**") < md.index("**Probe**") < md.index("## Headline") < md.index(
        "## Warning: identical weights") < md.index("## Finding 1")


def test_a_continued_run_is_counted_once_on_every_renderer(results, pages):
    _, md, page = pages
    assert ONE_RUN_COUNTED_ONCE in _headline_sentences(md)[0]
    assert any(ONE_RUN_COUNTED_ONCE in f for f in html_facts(page))
    assert ONE_RUN_COUNTED_ONCE in re.sub(r"\s+", " ", console.summary(results))


def test_console_prints_the_pages_first_screen_sentences_and_baseline(results, pages):
    """The console's summary of the results folder, against the first screen summary.md shows (read
    back from the page): every headline sentence, the baseline line, the lineage banner's revision."""
    _, md, _ = pages
    out = re.sub(r"\s+", " ", console.summary(results))
    sents = _headline_sentences(md)
    assert len(sents) == 7
    for s in sents:
        assert _norm(s) in out, s
    baseline = next(line for line in md.splitlines() if line.startswith("Selectivity baseline:"))
    assert _norm(baseline) in out
    assert "B step2: the same weights as step1" in out


def test_baseline_line_names_each_value_with_its_models():
    t = pl.DataFrame({"model": ["a", "a", "b", "c", "d"], "screen_baseline": ["clean", "clean", "sampled", None, "clean"]})
    line = FS.baseline_line(t)
    assert line.startswith("Selectivity baseline: **clean** for a, d; **sampled** for b; "
                           f"**{FS.UNRECORDED}** for c (`screen.baseline`;")
    assert FS.baseline_line(t.filter(pl.col("model") == "a")).startswith("Selectivity baseline: **clean** (")
    assert FS.baseline_line(t.drop("screen_baseline")).startswith(f"Selectivity baseline: **{FS.UNRECORDED}** (")
    assert FS.plain(line).count("*") == 0 and "`" not in FS.plain(line)
    assert FS.inline_html(line).count("<b>") == 3 and "<code>screen.baseline</code>" in FS.inline_html(line)
