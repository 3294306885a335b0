"""Conversion: source data -> the records of `datasets/formats/`, above the declarations.

Decoding (`video_decode`, `video_frames`, flow encoded by `formats/flow_encoding`), the
time-limited process pool (`timed_pool`), sharded atomic writing (`shard_writer`;
`video_shards`, a video shard with its index), the image converters (`convert_digits`,
`convert_image_folder`, found by name in `convert_images.CONVERTERS`) and the work of
the converter tools (`convert_images`; `convert_videos` with its TensorFlow-free
settings in `convert_videos_config`; `migrate_video_records` and `export_media_sequence` for
`migrate_video_records` and `export_media_sequence`). It imports the declarations, never
the reverse; no module here is imported by training, evaluation or serving graphs.
"""
