# rule fetch (login node): download one revision into the Hugging Face cache (hf_id at the
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

# revision's name, or the revision's own repository at main / its pinned revision: params).
from headtrace.models import audit, hub
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    print(audit.check_before_fetch(snakemake.params.hf_id, snakemake.params.hub_revision) or "audit: nothing found")
    hub.fetch(snakemake.params.hf_id, snakemake.params.hub_revision)
