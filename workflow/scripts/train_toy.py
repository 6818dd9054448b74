# rule train_toy: train one toy model and save a checkpoint at each configured revision.
from headtrace import logs, toy

with logs.to_file(snakemake.log[0]):
    toy.train_revisions(
        snakemake.params.family,
        snakemake.output[0],
        revisions=snakemake.params.revisions,
        overrides=snakemake.params.train,
    )
