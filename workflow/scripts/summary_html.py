# rule summary_html: results/findings/summary.html (headline, figures, a section per model) and the
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

# headline alone for the report's first result category. Reads the tables; computes nothing new.
import os
from pathlib import Path

from headtrace.core import tables
from headtrace.report import html
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    findings = {Path(p).stem: tables.read(p) for p in [*snakemake.input.findings, *snakemake.input.measures]}
    verdicts = tables.read_many(snakemake.input.verdicts) if snakemake.input.verdicts else None
    out = Path(snakemake.output.page)
    figures = []
    for png in snakemake.input.figures:  # relative <img> links: the page opens on its own
        rst = Path(snakemake.params.captions) / f"{Path(png).stem}.rst"
        cap = html.rst_to_html(rst.read_text()) if rst.exists() else ""
        figures.append((Path(os.path.relpath(png, out.parent)).as_posix(), Path(png).stem, cap))
    lineage = tables.read(snakemake.input.lineage)  # lineage_panel: the findings job's, flags across models in
    group_tables = {}  # results/groups/{group}/{name}.parquet
    for p in snakemake.input.groups:
        group_tables.setdefault(Path(p).parent.name, {})[Path(p).stem] = tables.read(p)
    cross_seed = {g: tables.read(p) for g, p in snakemake.params.cross_seed_of.items()}  # inputs too
    html.write(findings, verdicts, out, headline_html=snakemake.output.headline, brief_html=snakemake.output.brief,
               families=snakemake.params.families, figures=figures, lineage=lineage,
               on_suspect=snakemake.params.on_suspect, group_tables=group_tables, cross_seed=cross_seed,
               probes=snakemake.params.get("probes", {}), notes=snakemake.params.get("notes", {}),
               traj=tables.read_many(snakemake.input.trajectories), **snakemake.params.thresholds)
