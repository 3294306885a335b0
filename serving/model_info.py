"""`model_info.json`: what export.py writes so predict.py can feed the model a video.

It sits with labels.txt in the version's `assets.extra/` (serving.export_layout):

    {"model_name": "i3d", "net_kwargs": {"depth_multiplier": 0.125},
     "checkpoint": ".../model.ckpt-5000", "global_step": 5000, "moving_averages": true,
     "num_classes": 101, "modality": "rgb", "channels": 3,
     "input_shape": [null, 64, 224, 224, 3],       # null = any size
     "sampling": {"mode": "eval_clips", "clips": 1, "clip_frames": 64, "crop_size": 224},
     "decoding": {"short_side": 256, "fps": 0.0, "jpeg_quality": 90},
     "signature": "serving_default", "top_k": 5, "mixed_precision": "float32",
     "settings": {"record": ".../flags.cfg" or null,
                  "model_name": {"value": "i3d", "from": "record"}, ...}}

`sampling` is evaluation's Sampling (`Sampling.to_json`, read back typed by
`read_model_info`: no default fills a missing key), `decoding` the converter's
settings of the records the model was evaluated on (datasets.convert_videos), so a video
file is prepared for the model exactly as it was for evaluation. `settings` says where
export.py's model, width, records and sampling came from: the training run's record,
a flag, or a default (resolve.run_record).
"""

import json
import os

from datasets.inputs.input_settings import Sampling
from serving.export_layout import ASSETS_EXTRA

__all__ = ['MODEL_INFO_FILENAME', 'LABELS_FILENAME', 'write_model_info', 'read_model_info']

MODEL_INFO_FILENAME = 'model_info.json'
LABELS_FILENAME = 'labels.txt'
_KEYS = ('model_name', 'num_classes', 'modality', 'channels', 'input_shape', 'sampling',
         'decoding', 'signature')


def write_model_info(version_dir, info):
  """Writes version_dir/assets.extra/model_info.json (assets.extra created if missing)."""
  os.makedirs(os.path.join(version_dir, ASSETS_EXTRA), exist_ok=True)
  with open(os.path.join(version_dir, ASSETS_EXTRA, MODEL_INFO_FILENAME), 'w') as handle:
    json.dump(info, handle, indent=1)
    handle.write('\n')


def read_model_info(version_dir):
  """The model_info dict of a version directory, its "sampling" a Sampling; ValueError
  (one line) when it has none, or one this version cannot read."""
  name = os.path.join(ASSETS_EXTRA, MODEL_INFO_FILENAME)
  path = os.path.join(version_dir, name)
  if not os.path.isfile(path):
    before = os.path.isfile(os.path.join(version_dir, MODEL_INFO_FILENAME))
    raise ValueError('%s holds no %s: not a model written by export.py%s' % (
        version_dir, name, ' (this export predates numbered versions: export it again)'
        if before else ''))
  with open(path) as handle:
    try:
      info = json.load(handle)
    except ValueError as error:
      raise ValueError('%s is not valid JSON: %s' % (path, error)) from None
  missing = [key for key in _KEYS if key not in info]
  if missing:
    raise ValueError('%s lacks %s; re-export the model' % (path, ', '.join(missing)))
  return dict(info, sampling=Sampling.from_json(info['sampling'], path))
