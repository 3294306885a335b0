"""Data for slimdeploy, images and videos, in layers (docs/architecture.md).

- `formats/` (bottom): shard names, the converted directory's layout, the record formats
  (`image_records`, `video_records`, flow encoding), damaged files.
- `splits/`: split lists of the sources (published video lists, held-out groups).
- Here, the declarations: one small module per dataset (`digits`, `image_folder`, and the
  video datasets `ucf101`, `hmdb51`, `video_folder`, each one `video_dataset.VideoDatasetSpec`)
  and the registry that finds them by name (`dataset_factory`).
- Above them: `inputs/` (records -> batches), `conversion/` (sources -> records, older
  records -> today's, records -> MediaSequence), `synthetic/` (videos from a seed); beside
  them `checks/` (the verifier's and the index checks). None of these imports another.
- Command-line tools, thin mains at the paths the docs cite: `python -m
  datasets.convert_images`, `convert_videos`, `make_synthetic_videos`, `verify_records`,
  `migrate_video_records`, `export_media_sequence`, `data_service`.
"""
