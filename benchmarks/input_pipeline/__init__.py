"""The video input benchmark, `python -m benchmarks.input_pipeline` (see its `__main__`).

By concept: `settings` (its flags), `video_data` (synthetic videos, records, frame
folders), `clips` (the library's clip pipeline and its per-step breakdown), `baselines`
(frame-folder loaders and the JPEG-decode bound), `converter` (the converter against
ffmpeg), `long_videos` (a clip's cost against its video's length) and `report` (the JSON
lines).

TensorFlow is imported inside functions (`tf_module`): the decode bound's processes are
spawned and import `baselines`, and `--help` or a spawned process should not pay for a
TensorFlow import it does not need (the converter's workers must start without it, as
`datasets.conversion.video_frames` intends).
"""


def tf_module():
  """`tf` of tf_compat (graph mode), imported on first use."""
  from tf_compat import tf  # pylint: disable=import-outside-toplevel
  return tf
