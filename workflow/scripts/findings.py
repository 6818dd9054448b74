# rule findings: F1-F5 tables and summary.md over every model of the panel (+ the experiments' section).
from pathlib import Path

from headtrace.cell import positional
from headtrace.core import tables
from headtrace.findings import compute
from headtrace.panel import refine
from headtrace.report import headline, summary
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    params = dict(snakemake.params)
    families = params.pop("families", None)  # the headline's family column only
    traj = tables.read_many(snakemake.input.trajectories)
    findings = compute.all_findings(traj, **params)  # computed once, here; written and rendered
    summary.write_findings(findings, Path(snakemake.output.summary).parent)
    findings["f3_onset_bootstrap"] = tables.read(snakemake.input.onset_bootstrap)  # rule onset_bootstrap's
    findings["f3_onsets"] = tables.read(snakemake.input.onsets)
    verdicts = tables.read_many(snakemake.input.verdicts) if snakemake.input.verdicts else None
    # (model, revision) -> checkpoint-integrity flags; None until the lineage table is wired in
    # (headtrace.report.answers.suspect_from_table): statements resting on a flagged revision get a dagger
    suspect = None
    rows = headline.headline_rows(findings, verdicts, families=families, suspect=suspect)
    text = summary.render(traj, findings, **params)
    text = headline.insert(text, headline.markdown(rows, headline.sentences(rows)))  # the answers first
    text += "\n" + refine.summary_section(findings["f3_onsets"])
    if snakemake.input.positional:
        flags = positional.circuit_flags(tables.read_many(snakemake.input.positional), traj)
        text += "\n" + positional.summary_section(flags)
    if snakemake.input.experiments:
        text += "\n" + Path(snakemake.input.experiments[0]).read_text()
    tables.write_text(text, snakemake.output.summary)
