"""The headline (report.headline), the summary page (report.html) and the per-circuit console line,
with known answers on hand-built tables."""
from __future__ import annotations

import math
import re

import pytest
from helpers.headline_tables import findings, gaps, verdicts

from headtrace.probe import synthetic
from headtrace.report import console, html
from headtrace.report import headline as HL


def by_model(rows):
    return {r["model"]: r for r in rows}


def test_headline_known_answers():
    rows = by_model(HL.headline_rows(findings(), verdicts(), families={"A": "gpt_neox", "B": "olmo"}))
    assert list(rows) == ["A", "B", "C"]
    a, b, c = rows["A"], rows["B"], rows["C"]
    assert (a["family"], b["family"], c["family"]) == ("gpt_neox", "olmo", "—")
    assert (a["n_revisions"], b["n_revisions"], c["n_revisions"]) == (4, 2, 3)
    # the circuit bracket comes from f3_onsets (refined: r1a at 50 tokens before r1 at 100)
    assert a["circuit"].revision == "r1" and a["circuit"].lo_tokens == 50.0 and a["circuit"].refined
    assert HL.bracket_tokens(a["circuit"]) == "(50, 100]"
    # the sink brackets: the screened revision before the milestone's, from circuit_size
    assert (a["sink10"].lo_revision, a["sink50"].lo_revision) == ("r1", "r2")
    assert a["sink50_text"] == "r3 (1K–10K]"
    # the gap: later in (1000, 10000], earlier in (50, 100] -> (10, 200], point value from f3_gaps
    g = a["gap50"]
    assert g.state == "interval" and g.ratio == 100.0
    assert g.lo == pytest.approx(10.0) and g.hi == pytest.approx(200.0)
    assert a["gap_text"] == "100×, in (10×, 200×]"
    assert g.rests_on == ("r1a", "r1", "r2", "r3")
    # the final circuit: the final_circuit row of the last ablated revision, not the earlier one
    assert a["heads"] == ["L1H0", "L1H2"] and a["verdict"] == "causal"
    assert "p = 0.01 over 20 draws of the 21 sets of its layers (sampled)" in a["reason"] and "40.00 pp [30.00, 50.00]" in a["reason"]
    assert a["spread"] == "bottom-up"  # the 'first' onset's label
    # B: never formed a circuit; the test had one matched set
    assert b["circuit_text"] == "not reached" and b["gap50"].state == "no_circuit"
    assert b["verdict"] == "underpowered" and "the smallest p its reference set allows is 0.5" in b["reason"]
    # C: circuit at c1 (2000), sink never: a lower bound final/circuit = 4000/2000
    assert c["gap50"].state == "no_sink" and c["gap50"].lo == pytest.approx(2.0)
    assert c["gap_text"] == "> 2.0× (no sink by the last revision)"
    assert c["gap10"].state == "same_revision"
    assert c["verdict"] == "not ablated" and c["heads_text"] == "—"


def test_headline_uses_interval_and_censoring_columns_when_the_table_has_them():
    F = findings(f3_gaps=gaps({"gap_lo": [7.0, None, None, None, None], "gap_hi": [70.0, None, None, None, None]}))
    a = by_model(HL.headline_rows(F, verdicts()))["A"]
    assert (a["gap50"].lo, a["gap50"].hi) == (7.0, 70.0)
    # the circuit already at the first revision (OLMoE's published case): a lower bound, said so
    F = findings(f3_gaps=gaps({"earlier_left_censored": [True, False, False, False, False],
                               "gap_lo": [7.0, None, None, None, None], "gap_hi": [None] * 5}))
    a = by_model(HL.headline_rows(F, verdicts()))["A"]
    assert a["gap50"].state == "circuit_at_first"
    assert a["gap_text"] == "≥ 7.0× (circuit already at the first revision)"
    # the sink after the last revision: a lower bound of another kind
    F = findings(f3_gaps=gaps({"later_right_censored": [True, False, False, False, False]}))
    assert by_model(HL.headline_rows(F, verdicts()))["A"]["gap50"].state == "no_sink"


def test_headline_without_onsets_or_verdicts():
    F = findings(f3_onsets=None)
    a = by_model(HL.headline_rows(F, None))["A"]
    assert a["circuit"].lo_revision == "r0" and a["circuit"].lo_tokens == 0
    assert a["gap50"].hi is None  # the circuit bracket starts at 0 tokens: no upper bound
    assert a["gap_text"] == "100×, in (10×, ∞]"
    assert a["verdict"] == "not ablated"


def test_sentences_say_what_was_found_and_what_was_not_decided():
    rows = HL.headline_rows(findings(), verdicts())
    s = HL.sentences(rows)
    assert len(s) == 5
    text = " ".join(s)
    assert "3 models over 9 revisions" in text and "2 of the 3 models formed an induction circuit" in text
    assert "the earliest A after 50 and by 100 tokens (r1)" in text and "B never did" in text
    assert ("Ablating the final circuit at the last revision: causal in A; not ablated in C; underpowered, so the "
            "test cannot decide, in 1 model (B: the smallest p its reference set allows is 0.5 > alpha)") in text
    assert "could not decide" in text and text.count("the smallest p its reference set allows") == 1
    # C's sink never came: its order is one by censoring, said in the sink sentence, not an undecided gap
    assert "C had no such sink by the last revision, so its circuit came first only in that no sink came" in text
    assert "sink and circuit in C" not in text


def test_markdown_section_goes_after_the_title():
    rows = HL.headline_rows(findings(), verdicts())
    md = HL.markdown(rows, HL.sentences(rows))
    doc = HL.insert("# Title\n\nintro\n\n## Finding 1\n\nbody\n", md)
    assert doc.index("# Title") < doc.index("## Headline") < doc.index("## Finding 1")
    table = [l for l in md.splitlines() if l.startswith("| A ")]
    assert len(table) == 1 and "**causal**" in table[0] and "(50, 100]" not in table[0]  # text form: rev (a–b]
    assert "r1 (50–100]" in table[0]


def test_page_has_the_headline_first_and_a_section_per_model(tmp_path):
    rows = HL.headline_rows(findings(), verdicts())
    page = html.page(rows, HL.sentences(rows), findings(), verdicts(),
                     figures=[("../figures/milestones.png", "milestones", "<p>caption</p>")])
    assert page.index('id="sentences"') < page.index('id="headline"') < page.index('id="figures"')
    body = page[page.index('id="headline"'):page.index("</table>")]
    assert len(re.findall(r"<tr data-model=", body)) == 3
    for needle in ("(50–100]", "100×, in (10×, 200×]", "L1H0 L1H2", "v-causal", "bottom-up"):
        assert needle in body
    # the bracket in summary.md's notation, the revision above it; the verdict's effect and interval
    # as visible text beside the word (not only in a tooltip)
    assert '<span class="rev">r1</span> (50–100]' in body and "(50, 100]" not in body
    assert re.search(r'<b>causal</b> <span class="why">\(effect 40\.00 pp \[30\.00, 50\.00\]', body)
    assert "title=" not in body
    assert '<img src="../figures/milestones.png"' in page
    for m in "ABC":
        assert f'<section id="model-{m}">' in page
    a = page[page.index('<section id="model-A">'):page.index('<section id="model-B">')]
    assert a.count("<tr>") >= 3 + 4  # 3 verdict rows, 4 trajectory rows
    assert "40.00 pp [30.00, 50.00]" in a and "<svg" in a


def test_write_makes_both_files(tmp_path):
    out, head = tmp_path / "summary.html", tmp_path / "headline.html"
    rows = html.write(findings(), verdicts(), out, headline_html=head)
    assert len(rows) == 3 and out.exists() and 'id="headline"' in head.read_text()
    assert "<img" not in head.read_text()


def test_rst_caption_to_html():
    out = html.rst_to_html("**F3 — x.** Per ``model`` a *bar*.\n\nNumbers: {{ snakemake.config['x'] }}.")
    assert "<b>F3 — x.</b>" in out and "<code>model</code>" in out and "<i>bar</i>" in out
    assert out.count("<p>") == 2 and "snakemake" not in out


def test_circuit_line_says_effect_p_sets_and_verdict():
    v = verdicts().row(2, named=True)
    line = console.circuit_line(v)
    assert line == ("final circuit (L1H0 L1H2): top-1 effect 40.00 pp [30.00, 50.00] (67% of the baseline), p = 0.01 over 20 "
                    "draws of the 21 sets of its layers (sampled) -> causal")
    u = console.circuit_line(verdicts().row(3, named=True))
    assert u.endswith("-> underpowered: the smallest p its reference set allows is 0.5 > alpha "
                      "(the test cannot decide here)")
    none = {**v, "heads": [], "n_heads": 0}
    assert console.circuit_line(none) == "final circuit: no heads (nothing to ablate)"
    assert not math.isnan(v["effect"])


def test_baseline_line_says_what_the_unablated_model_predicts():
    v = {"baseline_top1": 0.123, "baseline_top1_control": 0.004, "baseline_top1_context": 0.2, "n_sequences": 2000}
    assert console.baseline_line(v) == ("unablated top-1: B 12.30% of 2000 sequences; a shuffled-B control token "
                                        "of the context 0.40%; any other context token 20.00%")
    assert console.baseline_line({**v, "baseline_top1_control": None}) is None  # not recorded: no line


def test_ablation_progress_is_silent_when_asked(capfd):
    from tiny import tiny_model

    from headtrace.causal import ablation
    from headtrace.models import families

    model = tiny_model("gpt_neox", n_layers=2)
    batch = synthetic.make_batch(n_sequences=6, seq_len=40, token_range=(2, 128), ab_range=(5, 30))
    conds = [ablation.Condition("circuit", 0, ((1, 0),))]
    ablation.run(model, families.get("gpt_neox"), batch, conds, batch_size=2, progress=False)
    err = capfd.readouterr().err
    assert "ablation" not in err and "chunk" not in err


def test_milestones_are_said_in_words():
    from headtrace.report.format import milestone_words

    assert milestone_words("induction_3_heads") == "an induction circuit of at least 3 heads"
    assert milestone_words("induction_1_heads") == "an induction circuit of at least 1 head"
    assert milestone_words("first_token_50pct") == "first-token heads on at least 50% of the heads"
    assert milestone_words("text_sink_50pct") == "a text sink rate of at least 50%"
    assert milestone_words("something_else") == "something else"
