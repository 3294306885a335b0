"""The bottom layer every package may import: configuration declared once as frozen
dataclasses and turned into absl flags (`params`). It imports nothing of the project."""
