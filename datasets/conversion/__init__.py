"""Conversion: source data -> the records `datasets/` declares.

Decoding (`video_decode`, `video_frames`, flow included), the time-limited process pool
(`timed_pool`), split lists (`video_splits`, `stratified_split`), sharded atomic writing
(`shard_writer`; `video_shards`, a video shard with its index), the image converters (`convert_digits`, `convert_image_folder`) and the
work of the converter tools (`image_conversion`; `video_conversion` with its
TensorFlow-free settings in `video_conversion_config`; `record_migration` and
`media_sequence_export` for `migrate_video_records` and `export_media_sequence`).
No module here is imported by training, evaluation or serving graphs.
"""
