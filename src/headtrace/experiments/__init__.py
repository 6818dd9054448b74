"""Paper A's method experiments, one module each:

- ``config``: the ``experiments`` config block, the seed / data-shift models it derives, and which
  experiments a config asks for;
- ``seeds``: seed specificity (cross-seed ablation);
- ``data_shift``: circuit survival across a change of corpus;
- ``composition``: when ablating the previous-token circuit destroys induction;
- ``noise_floor``: the specialized-head fraction above a null distribution.

Their figures are in ``headtrace.report.experiment_figures``, their prose in
``headtrace.report.experiment_summary``. The names below are re-exported so that
``from headtrace import experiments`` gives the whole public surface.
"""
from headtrace.core.heads import jaccard
from headtrace.experiments.composition import composition_table, sign_test_p, wilson_interval
from headtrace.experiments.config import (
                                          DEFAULTS,
                                          EXPERIMENTS,
                                          composition_on,
                                          expand_models,
                                          model_seed,
                                          noise_floor_models,
                                          resolve_revisions,
                                          seed_model_name,
                                          seed_models,
                                          settings,
                                          shift_model_name,
                                          shift_models,
                                          shift_pair,
                                          shift_train_kwargs,
                                          shuffled_cells,
                                          targets,
                                          wanted,
)
from headtrace.experiments.data_shift import behaviour_change, data_shift_heads, data_shift_table
from headtrace.experiments.noise_floor import SHUFFLE_CLASSES, floors, noise_floor_table, null_samples, shuffle_batch
from headtrace.experiments.seeds import (circuit_of, cross_seed_conditions, cross_seed_matrix, cross_seed_table,
                                         seed_specificity)

__all__ = [
    "DEFAULTS", "EXPERIMENTS", "SHUFFLE_CLASSES", "circuit_of", "composition_on", "composition_table",
    "sign_test_p", "wilson_interval",
    "behaviour_change", "cross_seed_conditions", "cross_seed_matrix", "cross_seed_table", "data_shift_heads",
    "data_shift_table",
    "expand_models", "floors", "jaccard", "model_seed", "noise_floor_models", "noise_floor_table", "null_samples",
    "resolve_revisions", "seed_model_name", "seed_specificity", "seed_models", "settings", "shift_model_name",
    "shift_models", "shift_pair", "shift_train_kwargs", "shuffle_batch", "shuffled_cells", "targets", "wanted",
]
