# rule bootstrap: resample the probe sequences of one cell -> selectivity CIs + milestone counts.
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from headtrace.cell import bootstrap
from headtrace.core import tables
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    p, wc = dict(snakemake.params), snakemake.wildcards
    tokens = p.pop("tokens")
    heads, counts = bootstrap.run_cell(snakemake.input.class_masses, wc.model, wc.revision, tokens, **p)
    tables.write(heads, snakemake.output.bootstrap, schema="bootstrap")
    tables.write(counts, snakemake.output.milestones, schema="bootstrap_milestones")
