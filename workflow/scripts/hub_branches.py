# rule hub_branches: the hub repository's branch list (refinement pool), cached as a file.
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from headtrace.core import revisions
from headtrace.panel import refine
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    if snakemake.input.recorded:
        names = refine.read_branch_list(snakemake.input.recorded)
    else:
        names = revisions.list_hub_revisions(snakemake.params.hf_id)
    print(f"{len(names)} branches of {snakemake.params.hf_id}")
    refine.write_branch_list(names, snakemake.output[0])
