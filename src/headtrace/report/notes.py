"""What a config says about its models, on the first screen of ``summary.md`` and ``summary.html``:
each model's ``note`` (``models.NAME.note``), in the config author's words, before the probe block.
For what a reader needs beside the numbers and cannot read from them (a quantized file, a model
with one checkpoint, where the full run lives). Pure: ``model -> note`` in, text out."""
from __future__ import annotations

from html import escape
from typing import Mapping


def markdown(notes: Mapping[str, str]) -> str:
    """One bullet per model with a note; empty without notes."""
    if not notes:
        return ""
    return "**About the models** (the config's notes):\n\n" + "".join(
        f"- {model}: {text.strip()}\n" for model, text in notes.items()) + "\n"


def html(notes: Mapping[str, str]) -> str:
    """The same, for ``summary.html``."""
    if not notes:
        return ""
    items = "".join(f"<li><b>{escape(model)}</b>: {escape(text.strip())}</li>" for model, text in notes.items())
    return f'<p class="note"><b>About the models</b> (the config\'s notes):</p><ul class="note">{items}</ul>'
