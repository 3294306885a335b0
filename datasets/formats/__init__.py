"""The on-disk formats, the bottom of `datasets/`: what readers, writers and checks share.

Shard names and finding a split's set (`shards`), the converted directory's layout and
`get_split`'s checks of it (`converted_data`, `dataset_split`), the record formats
(`image_records`; `video_records`, chunks and an index per shard; `flow_encoding`, flow as
uint8), damage in a TFRecord file (`damaged_shards`) and decoding past values that fail
(`checked_decode`). Imports nothing else of `datasets/`; this file imports nothing, so
the converter's TensorFlow-free workers may use `flow_encoding`.
"""
