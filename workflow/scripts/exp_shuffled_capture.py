# rule shuffled_capture: capture on the position-shuffled probe (noise-floor null).
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

import torch

from headtrace import experiments
from headtrace.cell import capture
from headtrace.core import tables
from headtrace.models import hub
from headtrace.panel import identity
from headtrace.probe import synthetic
from headtrace.runtime import logs

# Where and how large: read here, not as rule params, so moving from CPU to GPU reruns nothing.
RUN_ON = (snakemake.config["capture"]["device"], snakemake.config["capture"]["batch_size"])

with logs.to_file(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)  # the rule's threads, not every core per job
    p, wc = snakemake.params, snakemake.wildcards
    load = identity.located(snakemake.config, wc.model, wc.revision, p.load)  # the weights it was scheduled for
    batch = experiments.shuffle_batch(synthetic.batch_from_table(tables.read(snakemake.input.probe)),
                                      seed=p.shuffle_seed, keep_first=p.keep_first)
    model, family, device, batch_size = hub.load_for_cell(load, wc.model, wc.revision, *RUN_ON,
                                                          seq_len=batch.seq_len,
                                                          token_range=batch.token_span)
    result = capture.run(model, family, batch, batch_size=batch_size, device=device, keep_head_outputs=False)
    tables.write(capture.attention_table(result, wc.model, wc.revision, p.tokens), snakemake.output[0],
                 schema="attention")
