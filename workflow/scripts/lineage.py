# rule lineage: one model's lineage table from its cells' fingerprint tables (provenance: tokens);
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

# provenance.on_suspect: fail stops here, naming each flagged revision and its flags.
from headtrace.core import tables
from headtrace.findings import lineage
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    fp = tables.read_many(snakemake.input.fingerprints)
    prov = tables.read_many(snakemake.input.provenance)
    tokens = {(m, r): t for m, r, t in prov.select("model", "revision", "tokens").iter_rows()} if prov.height else {}
    model = snakemake.wildcards.model
    table = lineage.lineage(fp, tokens, continues={model: snakemake.params.continues or None},
                            init_published={model: snakemake.params.init_published})
    for line in lineage.check_on_suspect(table, snakemake.params.on_suspect):  # raises under fail
        print(f"lineage flag: {line}")
    for line in lineage.reference_warnings(table):  # the descent test cannot see #203 without step 0
        print(f"lineage warning: {line}")
    print(f"{table.height} revisions, {lineage.flagged(table).height} flagged")
    tables.write(table, snakemake.output[0], schema="lineage")
