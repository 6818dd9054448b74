"""Loading models: the family adapters (the one place that knows module paths), checkpoints from
the hub, local folders or the toy panel, context limits and provenance."""
