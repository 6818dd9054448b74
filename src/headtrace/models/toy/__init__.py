"""The embedded toy panel: ``recipe`` (torch-free defaults and token axis), ``data`` (the synthetic
training streams, numpy only) and ``train`` (training with the real transformers classes)."""
