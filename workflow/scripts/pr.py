# rule pr: participation ratio per head from the captured per-head outputs.
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from headtrace.cell import spectral
from headtrace.core import tables
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    head_outputs = tables.read_array(snakemake.input.head_outputs)
    pr = spectral.pr_per_head(head_outputs, center=snakemake.params.center,
                              n_sequences=snakemake.params.n_sequences)
    tables.write(spectral.pr_table(pr, snakemake.wildcards.model, snakemake.wildcards.revision, snakemake.params.tokens),
                 snakemake.output.pr, schema="pr")
