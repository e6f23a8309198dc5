"""The campaign file: typed models, the loader with file:line errors, presets and overrides."""
