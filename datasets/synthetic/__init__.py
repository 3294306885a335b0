"""Synthetic data: small datasets written from a seed, for demos, tests and benchmarks.

`make_synthetic_videos`: video files and UCF101-style split lists whose classes differ only in
the direction of motion (`python -m datasets.make_synthetic_videos`).
"""
