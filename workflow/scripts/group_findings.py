# rule group_findings: one seed group's statistics from its members' findings and trajectories.
from pathlib import Path

from headtrace.core import tables
from headtrace.findings import groups
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    p = snakemake.params
    findings = {Path(f).stem: tables.read(f) for f in snakemake.input.findings}
    traj = tables.read_many(snakemake.input.trajectories)
    out = groups.group_findings(snakemake.wildcards.group, p.members, findings, traj, p.pairs,
                                induction_threshold=p.induction_threshold)
    for name, df in out.items():
        tables.write(df, snakemake.output[name], schema=name)
