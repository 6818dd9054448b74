# headtrace: when do attention circuits form during pretraining?
# The DAG expands over models x revisions; see docs/outputs.md for the rules and their outputs.
from snakemake.utils import min_version

min_version("9.0")


# The embedded default; a --configfile on the command line replaces it (rather than being
# merged into it), so `--configfile config/paper-panel.yaml` runs that panel alone.
if not config.get("models"):

    configfile: "config/config.yaml"



report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/checkpoints.smk"
include: "workflow/rules/cells.smk"
include: "workflow/rules/ablation.smk"
include: "workflow/rules/lineage.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/refine.smk"
include: "workflow/rules/experiments.smk"
include: "workflow/rules/groups.smk"
include: "workflow/rules/measures.smk"


rule all:
    input:
        all_targets(),
        **refined_targets(),
    default_target: True
