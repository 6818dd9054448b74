# rule train_toy: train one toy model and save a checkpoint at each configured revision.
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

import torch

from headtrace.models.toy import train as toy
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)  # the rule's threads, not every core per job
    toy.train_revisions(
        snakemake.params.family,
        snakemake.output[0],
        revisions=snakemake.params.revisions,
        overrides=snakemake.params.train,
        pool=snakemake.params.pool,
    )
