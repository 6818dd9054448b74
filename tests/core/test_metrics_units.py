"""The metric registry's functions (``headtrace.core.metrics``) on known answers: top-5 on hand-built logits, the
effect's sign per metric, the share of the behaviour left (of the baseline, or of the in-context boost) where it
is defined and NaN where it is not, and the live views over the registry that replaced the old dictionaries."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from headtrace.core import metrics as M

DESCENDING = [6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0]  # seven tokens: token 4 has the fifth logit, token 5 the sixth


def _query(logits, target):
    logits = torch.tensor(logits)
    target = torch.tensor(target)
    return M.Query(logits, target, None, None, logits.argmax(dim=1), logits[torch.arange(len(target)), target])


def test_top5_is_b_among_the_five_highest_logits_of_its_own_row():
    assert M.METRICS["top5"].measure(_query([DESCENDING] * 3, [4, 5, 0])).tolist() == [True, False, True]
    # a vocabulary of three: every token is in the top 5
    assert M.METRICS["top5"].measure(_query([[0.0, 1.0, 2.0]] * 3, [0, 1, 2])).tolist() == [True, True, True]


def test_the_effect_is_signed_so_that_positive_hurts():
    assert M.damage("top1", 0.5, 0.2) == pytest.approx(0.3)
    assert M.damage("logit_b", 3.0, 1.0) == pytest.approx(2.0)
    assert M.damage("ce", 2.0, 3.5) == pytest.approx(1.5)  # the cross-entropy of B rises: the ablation hurts
    np.testing.assert_allclose(M.damage("ce", [2, 2], [1, 3]), [-1.0, 1.0])
    # a null cell of the table (None) gives a NaN effect, not an error
    assert math.isnan(M.damage("ce", None, 2.0)) and math.isnan(M.damage("top1", 0.5, None))


def test_an_unknown_metric_is_refused_with_the_known_ones():
    with pytest.raises(ValueError) as e:
        M.damage("top9", 0.5, 0.2)
    assert str(e.value) == "unknown metric 'top9'; one of ['ce', 'logit_b', 'top1', 'top5']"
    assert M.get("ce").unit == " nats"
    with pytest.raises(ValueError) as e:
        M.get("top9")
    assert str(e.value) == ("unknown metric 'top9'; one of ['ce', 'logit_b', 'top1', 'top1_context', "
                            "'top1_control', 'top5']")


def test_the_share_left_of_the_baseline_or_of_the_boost():
    assert M.share_left("top1", 0.5, 0.2) == pytest.approx(0.4)  # a floor at 0: ablated / baseline
    assert math.isnan(M.share_left("top1", 0.0, 0.0))  # nothing to leave
    # the logit of B: baseline 3, copy-null 1 (a boost of 2), the ablation takes 1 of it: half left
    assert M.share_left("logit_b", 3.0, 2.0, 1.0) == pytest.approx(0.5)
    # the cross-entropy: baseline 1, copy-null 3 (a boost of 2), the ablation adds 1.5: a quarter left
    assert M.share_left("ce", 1.0, 2.5, 3.0) == pytest.approx(0.25)


def test_no_share_left_without_a_boost_or_a_copy_null():
    assert math.isnan(M.share_left("logit_b", 3.0, 2.0, 3.0))  # the copy-null equals the baseline: no boost
    assert math.isnan(M.share_left("logit_b", 3.0, 2.0, 4.0))  # the earlier B lowers the logit: no boost
    assert math.isnan(M.share_left("ce", 1.0, 2.0, None)) and math.isnan(M.share_left("ce", 1.0, 2.0))


def test_a_field_view_reads_a_field_or_a_function_of_the_records_it_keeps():
    hits = M.FieldView("hit", keep=lambda m: m.floor)
    assert dict(hits) == {"top1": "first", "top5": "in its top 5"} and len(hits) == 2
    for name in ("ce", "top9"):  # a record it does not keep, and no record
        with pytest.raises(KeyError) as e:
            hits[name]
        assert e.value.args == (name,)
    units = M.FieldView(lambda m: m.unit or None)
    assert len(units) == 6 and units["ce"] == " nats" and units["top1"] is None
