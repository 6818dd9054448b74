# rule onset_bootstrap: per model x F3 milestone, the bootstrap spread of the onset revision.
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from headtrace.core import tables
from headtrace.findings import lineage, onsets
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    counts = tables.read_many(snakemake.input.counts)
    if snakemake.input.get("lineage"):  # provenance.on_suspect: drop (docs/integrity.md)
        counts = lineage.drop_flagged(counts, tables.read_many(snakemake.input.lineage))
    out = onsets.onset_intervals(counts, list(snakemake.params.models), interval=snakemake.params.interval,
                                    induction_counts=tuple(snakemake.params.induction_counts),
                                    first_token_fractions=tuple(snakemake.params.first_token_fractions))
    tables.write(out, snakemake.output[0], schema="f3_onset_bootstrap")
