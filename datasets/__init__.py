"""Data for slimdeploy, images and videos, by role.

- Here: the declarations (one small module per dataset: `digits`, `image_folder`, `ucf101`,
  `hmdb51`, `video_folder`, each with `NAME`, `get_split`, `convert_command`, and for videos
  its own `read_split_lists`), the registry that finds them by name (`dataset_factory`),
  and the record formats (`image_records`, `video_records`, `converted_data`).
- `inputs/`: the tf.data inputs, records -> batches (`image_input` with preprocessing by
  name, `clip_input` reading only each clip's chunks through `clip_reader`).
- `conversion/`: source data -> records (decoding, flow, the time-limited pool, split lists,
  shard writing, the image and video conversions), older video records -> today's layout,
  and video records -> MediaSequence.
- `synthetic/`: small datasets written from a seed (videos whose classes differ only in
  the direction of motion).
- Command-line tools, thin mains kept at the paths the docs cite over the work in
  `conversion/` and `synthetic/`: `python -m datasets.convert_images`,
  `python -m datasets.convert_videos`, `python -m datasets.make_synthetic_videos`,
  `python -m datasets.migrate_video_records`, `python -m datasets.export_media_sequence`.
"""
