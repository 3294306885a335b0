"""The tf.data inputs: converted records -> batches a clone consumes.

`image_input` (images, with preprocessing looked up by name in `image_preprocessing`),
`clip_input` (video clips, read through `clip_reader`: only the chunks holding a clip's
frames), and what both share (`record_files`: a split's shard files,
the reader, tf.data options).
"""
