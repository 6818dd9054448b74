"""The probes: what a cell feeds the model, under the config's own names.

``spec`` (the three blocks' keys resolved: ``probe``, ``repeated_probe``, ``text_probe``), ``synthetic`` (the
synthetic induction batch and the positions the screen reads), ``repeated`` (the repeated-random probe),
``texts`` (the text probe's documents), ``fit`` (a probe against a model: misfits, a probe that fits, the
derived probe) and ``words`` (a probe in words). Numpy and polars only: no model is touched here.
"""
