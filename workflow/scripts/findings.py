# rule findings: F1-F5 tables and summary.md over every model of the panel (+ the experiments' section).
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from pathlib import Path

from headtrace.cell import positional
from headtrace.core import tables
from headtrace.findings import compute
from headtrace.findings import groups as group_stats
from headtrace.findings import lineage_panel
from headtrace.report import answers, first_screen, headline, summary
from headtrace.report import lineage as report_lineage
from headtrace.report import positional as report_positional
from headtrace.report import refinement as report_refinement
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    params = dict(snakemake.params)
    families = params.pop("families", None)  # the headline's family column only
    on_suspect = params.pop("on_suspect")  # provenance.on_suspect: what the lineage banner says of flagged revisions
    group_members = params.pop("groups")  # seed groups: group -> {member: seed}
    cross_seed_of = params.pop("cross_seed_of")  # group -> its cross-seed ablation table (an input)
    probes = params.pop("probes", {})  # model -> its probe in words (the first screen says which ran)
    notes = params.pop("notes", {})  # model -> the config's note on it (the first screen)
    traj = tables.read_many(snakemake.input.trajectories)
    findings = compute.all_findings(traj, **params)  # computed once, here; written and rendered
    # the screen's check of its circuits: each circuit head's positional flag, as its cell decided it
    findings["circuit_positional"] = positional.circuit_flags(
        tables.read_many(snakemake.input.positional) if snakemake.input.positional else None, traj)
    summary.write_findings(findings, Path(snakemake.output.summary).parent)
    # the seed groups' tables, from the members' findings just computed (results/groups/{group}/)
    group_tables = {g: group_stats.group_findings(g, members, findings, traj, params["gaps"],
                                                  induction_threshold=params["induction_threshold"])
                    for g, members in group_members.items()}
    for g, out in group_tables.items():
        for name, df in out.items():
            tables.write(df, Path(snakemake.output.summary).parents[1] / "groups" / g / f"{name}.parquet", schema=name)
    cross_seed = {g: tables.read(p) for g, p in cross_seed_of.items()}
    groups = answers.group_answers(group_tables, families=families, cross_seed=cross_seed)
    # rules onset_bootstrap's and onsets': of this panel's models only (a results folder copied from another
    # panel keeps those tables where Snakemake has no record to rerun them by)
    models = traj["model"].unique().to_list()
    findings["f3_onset_bootstrap"] = tables.only_models(tables.read(snakemake.input.onset_bootstrap), models)
    findings["f3_onsets"] = tables.only_models(tables.read(snakemake.input.onsets), models)
    findings.update({Path(p).stem: tables.read(p) for p in snakemake.input.measures})  # the text sink rate
    verdicts = tables.read_many(snakemake.input.verdicts) if snakemake.input.verdicts else None
    # the checkpoint-lineage tables read together, the flags across models decided once and written
    # (findings.lineage_panel); worded as a banner naming every flagged revision above the answers, and
    # statements resting on a flagged revision marked (headtrace.report.lineage, .answers)
    lineage = lineage_panel.panel_table(tables.read_many(snakemake.input.lineage) if snakemake.input.lineage else None)
    tables.write(lineage, snakemake.output.lineage_panel, schema="lineage_panel")
    rows = headline.headline_rows(findings, verdicts, families=families, suspect=report_lineage.suspect(lineage),
                                  groups=groups, continues=report_lineage.continuations(lineage))
    text = summary.render(traj, findings, **params)
    # the answers first: the first screen summary.html lays out too (headtrace.report.first_screen)
    screen = first_screen.build(rows, traj=traj, lineage=lineage, on_suspect=on_suspect, notes=notes, probes=probes)
    text = headline.insert(text, first_screen.markdown(screen))
    text += "\n" + report_lineage.section_markdown(lineage, [r["model"] for r in rows if not r.get("group")])
    text += "\n" + report_refinement.summary_section(findings["f3_onsets"])
    if snakemake.input.positional:
        text += "\n" + report_positional.summary_section(findings["circuit_positional"])
    if snakemake.input.experiments:
        text += "\n" + Path(snakemake.input.experiments[0]).read_text()
    tables.write_text(text, snakemake.output.summary)
