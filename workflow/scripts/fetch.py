# rule fetch (login node): download one revision into the Hugging Face cache.
from headtrace.models import hub
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    hub.fetch(snakemake.params.hf_id, snakemake.wildcards.revision)
