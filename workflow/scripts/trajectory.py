# rule trajectory: every revision x head of one model, screen joined with PR, plus each cell's
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

# provenance (commit, weights_sha256; the log warns when two revisions ran identical weights).
from headtrace.core import tables
from headtrace.findings import lineage
from headtrace.findings import trajectory as trajectories
from headtrace.models import provenance
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    screens = [tables.read(p) for p in snakemake.input.screens]
    prs = [tables.read(p) for p in snakemake.input.prs]
    provs = [tables.read(p) for p in snakemake.input.get("provenance", [])]
    traj = provenance.attach(trajectories.assemble(screens, prs), provs)
    if snakemake.input.get("lineage"):  # provenance.on_suspect: drop (docs/integrity.md)
        traj = lineage.drop_flagged(traj, tables.read_many(snakemake.input.lineage))
    tables.write(traj, snakemake.output[0], schema="trajectory")
