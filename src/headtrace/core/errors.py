"""The one error a user's configuration raises: named by its key path, before any job where possible."""


class ConfigError(ValueError):
    """A configuration problem, named by its key path (``models.pythia.probe.token_range``)."""
