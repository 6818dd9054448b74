# rule findings: F1-F5 tables and summary.md over every model of the panel (+ the experiments' section).
from pathlib import Path

from headtrace import logs, positional, refine, summary, tables

with logs.to_file(snakemake.log[0]):
    traj = tables.read_many(snakemake.input.trajectories)
    findings = summary.findings_tables(traj, **snakemake.params)  # computed once, written and rendered
    summary.write_findings(traj, Path(snakemake.output.summary).parent, findings=findings)
    findings["f3_onset_bootstrap"] = tables.read(snakemake.input.onset_bootstrap)  # rule onset_bootstrap's
    text = summary.render(traj, findings=findings, **snakemake.params)
    text += "\n" + refine.summary_section(tables.read(snakemake.input.onsets))
    if snakemake.input.positional:
        flags = positional.circuit_flags(tables.read_many(snakemake.input.positional), traj)
        text += "\n" + positional.summary_section(flags)
    if snakemake.input.experiments:
        text += "\n" + Path(snakemake.input.experiments[0]).read_text()
    tables.write_text(text, snakemake.output.summary)
