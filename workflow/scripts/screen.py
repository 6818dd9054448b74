# rule screen: six-class selectivity and classification from the attention masses.
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from headtrace.cell import screen
from headtrace.core import tables
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    result = screen.screen(tables.read(snakemake.input.attention), **snakemake.params)
    tables.write(result, snakemake.output.screen, schema="screen")
