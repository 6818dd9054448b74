"""Which probe each run model reads, resolved as its probe job will build it
(:func:`headtrace.panel.config.probe_settings`), with where a derived probe came from: printed when
the DAG is built and passed to the summary jobs, which state it on the first screen."""
from __future__ import annotations
from headtrace.panel import config as panel
from headtrace.probe import words as probe_words


def shown(config: dict) -> dict[str, str]:
    """Run model (toy, hub, local) -> its probe in words; a derived probe says from what."""
    out = {}
    for model in panel.model_names(config):
        if panel.model_spec(config, model)["source"] == "reference":
            continue  # the published panel: the author's probe, imported, no probe job
        settings = panel.probe_settings(config, model)
        text = probe_words.describe(settings)
        given = panel.probe_given(config, model)
        if settings.get("derive") and not panel.DERIVED <= set(given):
            limits = panel.probe_limits(config, model)
            known = [f"context {limits.context}" if limits and limits.context else "",
                     f"vocabulary {limits.vocab}" if limits and limits.vocab else ""]
            text += f" (derived from {' and '.join(k for k in known if k) or 'the model'})"
        out[model] = text
    return out


def console_lines(config: dict) -> list[str]:
    """What the DAG build prints: ``headtrace: probe (my-run): …``, one line per distinct probe."""
    return [f"headtrace: {line}" for line in probe_words.lines(shown(config))]
