# rule import_reference_ablation: the published final-checkpoint ablation of one reference model.
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from headtrace.causal import ablation, verdict
from headtrace.core import tables
from headtrace.panel import reference
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    p, wc = snakemake.params, snakemake.wildcards
    if wc.revision != p.final:
        raise ValueError(f"{wc.model}: the published ablation is of the final checkpoint ({p.final}), "
                         f"not of {wc.revision}")
    table = reference.ablation_cell(snakemake.input.reference, p.published, wc.revision, wc.model, p.tokens)
    tables.write(table, snakemake.output.ablation, schema="ablation")
    tables.write(ablation.verdict(table, **verdict.settings(p.ablation)), snakemake.output.verdict,
                 schema="verdict")
