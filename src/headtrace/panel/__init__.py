"""The panel: the validated workflow config, adaptive refinement and the published-panel importer."""
