# rule measures_findings: the field's own measures over training, their onsets, the comparisons.
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from headtrace.core import tables
from headtrace.findings import measures, trajectory
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    p = snakemake.params
    cells = tables.read_many(snakemake.input.measures)
    traj = tables.read_many(snakemake.input.trajectories)
    probes = tables.read_many(snakemake.input.text_probes) if snakemake.input.text_probes else None
    over = measures.over_training(cells, traj, sink_eps=p.sink_eps, prefix_threshold=p.prefix_threshold,
                                  class_threshold=p.class_threshold, induction_threshold=p.induction_threshold,
                                  text_probes=probes, synthetic=p.synthetic)
    ons = measures.onsets(over)
    f3 = trajectory.f3_milestones(traj, p.class_threshold, p.induction_threshold) if traj.height else ons.clear()
    written = {"measures_over_training": (over, "measures_over_training"),
               "measures_onsets": (ons, "f3_milestones"),
               "measures_comparison": (measures.comparison(over, ons, f3), "measures_comparison"),
               "measures_circuit_copying": (measures.circuit_copying(cells, traj, prefix_threshold=p.prefix_threshold,
                                                                     induction_threshold=p.induction_threshold),
                                            "measures_circuit_copying")}
    for path in snakemake.output.tables:
        name = path.rsplit("/", 1)[-1].removesuffix(".parquet")
        table, schema = written[name]
        tables.write(table, path, schema=schema)
