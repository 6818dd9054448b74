# checkpoint refine: one refinement round of one model -> results/refine/{model}/round{k}.json
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from headtrace.core import revisions, tables
from headtrace.findings import trajectory as trajectories
from headtrace.panel import refine
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    p, wc = snakemake.params, snakemake.wildcards
    if p.source == "toy":
        names = revisions.list_checkpoints(snakemake.input.pool, "step*")
    elif p.source == "hub":
        names = refine.read_branch_list(snakemake.input.pool)
    else:
        names = p.local_pool or []
    pool = refine.pool_pairs(names, p.token_spec)
    traj = trajectories.assemble([tables.read(f) for f in snakemake.input.screens], [])
    record = refine.run_round(traj, wc.model, int(wc.round), pool, p.settings,
                              p.class_threshold, p.induction_threshold)
    for plan in record["milestones"]:
        print(f"{wc.model} round {wc.round} {plan['milestone']}: ({plan['lo_revision']}, {plan['hi_revision']}] "
              f"ratio {plan['bracket_ratio']} -> {plan['action']} {plan['added']}")
    refine.write_record(record, snakemake.output[0])
