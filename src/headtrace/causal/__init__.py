"""Causal verification: the ablation conditions and their matched controls, the batched ablation
engine and the verdict statistics."""
