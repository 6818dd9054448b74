# rule onsets: results/findings/f3_onsets.parquet from the trajectories and the refinement rounds.
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from headtrace.core import tables
from headtrace.panel import refine
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    records = {}
    for path in snakemake.input.rounds:
        rec = refine.read_record(path)
        records.setdefault(rec["model"], []).append(rec)
    records = {m: sorted(rs, key=lambda r: r["round"]) for m, rs in records.items()}
    traj = tables.read_many(snakemake.input.trajectories)
    out = refine.onsets(traj, snakemake.params.info, records,
                        snakemake.params.class_threshold, snakemake.params.induction_threshold,
                        intervals=tables.read(snakemake.input.onset_bootstrap))  # onset_lo/hi_revision
    tables.write(out, snakemake.output[0], schema="f3_onsets")
