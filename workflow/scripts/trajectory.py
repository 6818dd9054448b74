# rule trajectory: every revision x head of one model, screen joined with PR.
from headtrace import logs, tables, trajectories

with logs.to_file(snakemake.log[0]):
    screens = [tables.read(p) for p in snakemake.input.screens]
    prs = [tables.read(p) for p in snakemake.input.prs]
    tables.write(trajectories.assemble(screens, prs), snakemake.output[0], schema="trajectory")
