from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

# rule panel: the panel this results folder holds (RESULTS/panel.json): the models and groups that
# headtrace summary and headtrace compare read, and no cell of another panel left in the folder.
from headtrace.core import manifest
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    manifest.write(snakemake.output[0], snakemake.params.models, snakemake.params.sources, snakemake.params.groups,
                   snakemake.params.families)
