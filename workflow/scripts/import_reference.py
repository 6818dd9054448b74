# rule import_reference: the published screen and PR of one cell, in the pipeline's schemas.
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from headtrace.core import tables
from headtrace.panel import reference
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    p, wc = snakemake.params, snakemake.wildcards
    tables.write(reference.screen_cell(snakemake.input.reference, p.published, wc.revision, wc.model, p.tokens,
                                       class_threshold=p.class_threshold, induction_threshold=p.induction_threshold),
                 snakemake.output.screen, schema="screen")
    tables.write(reference.pr_cell(snakemake.input.reference, p.published, wc.revision, wc.model, p.tokens),
                 snakemake.output.pr, schema="pr")
