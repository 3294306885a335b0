"""Split lists of the source videos and images: which goes to train, which to test.

The published lists of video datasets (`video_splits`), held-out splits of whole sources
(`source_groups`) and the seeded stratified assignment both use (`stratified_split`).
Pure Python and NumPy (the video converter reads them before any TensorFlow import);
above `formats/` only, read by the declarations and by `conversion/`.
"""
