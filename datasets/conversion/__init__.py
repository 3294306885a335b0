"""Conversion: source data -> the records `datasets/` declares.

Decoding (`video_decode`, `video_frames`, flow included), the time-limited process pool
(`timed_pool`), split lists (`video_splits`, `stratified_split`), sharded atomic writing
(`shard_writer`) and the image converters (`convert_digits`, `convert_image_folder`).
No module here is imported by training, evaluation or serving graphs.
"""
