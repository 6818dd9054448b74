# rule ablation_figure: circuit ablation vs the matched-random distribution per revision, each
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

# revision labelled with its circuit's verdict.
from headtrace.core import tables
from headtrace.report import figures
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    verdicts = snakemake.input.get("verdicts", [])
    figures.plot_ablation(tables.read_many(snakemake.input.ablations), snakemake.output[0],
                          verdicts=tables.read_many(verdicts) if verdicts else None)
