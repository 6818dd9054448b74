# rule figures: the findings figures over every model of the panel.
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from pathlib import Path

from headtrace.core import tables
from headtrace.report import figures
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    traj = tables.read_many(snakemake.input.trajectories)
    findings = {Path(p).stem: tables.read(p) for p in snakemake.input.findings}
    figures.plot_all(traj, Path(snakemake.output.bos_fraction).parent,
                     onset_bootstrap=tables.read(snakemake.input.onset_bootstrap), findings=findings,
                     induction_threshold=snakemake.params.induction_threshold)
