# rule train_shift: continue a toy model's final checkpoint on a second corpus (data shift).
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from pathlib import Path

import torch

from headtrace import experiments
from headtrace.models.toy import train as toy
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)  # the rule's threads, not every core per job
    p = snakemake.params
    init_from = Path(snakemake.input.base) / p.base_final
    kwargs = experiments.shift_train_kwargs(p.family, p.train, p.revisions, str(init_from))
    print(f"[train_shift] from {init_from}: data {kwargs['data']}, {kwargs['max_steps']} steps, "
          f"checkpoints {kwargs['checkpoint_steps']}", flush=True)
    toy.train(p.family, snakemake.output[0], progress=False, **kwargs)
