"""serving.model_info: "sampling" comes back as the typed Sampling export wrote, and a
file this version cannot read is refused in one line (no default fills a gap)."""

import json
import os

import pytest

from datasets.inputs.input_settings import Sampling
from serving.export_layout import ASSETS_EXTRA
from serving.model_info import MODEL_INFO_FILENAME, read_model_info, write_model_info

SAMPLING = Sampling(eval_frames=None, eval_clips=2, clip_frames=8, crop_size=32)


def _info(sampling):
  return {'model_name': 'i3d', 'num_classes': 3, 'modality': 'rgb', 'channels': 3,
          'input_shape': [None, 8, 32, 32, 3], 'sampling': sampling,
          'decoding': {'short_side': 40, 'fps': 0.0, 'jpeg_quality': 90},
          'signature': 'serving_default'}


def test_sampling_is_read_back_typed(tmp_path):
  write_model_info(str(tmp_path), _info(SAMPLING.to_json()))
  assert read_model_info(str(tmp_path))['sampling'] == SAMPLING


@pytest.mark.parametrize('sampling, message', [
    ({'mode': 'eval_clips', 'clips': 2, 'crop_size': 32}, 'lacks clip_frames'),
    ({'frames': 16, 'crop_size': 32}, 'is not one this version reads'),
])
def test_a_sampling_this_version_cannot_read_is_one_line(tmp_path, sampling, message):
  write_model_info(str(tmp_path), _info(sampling))
  with pytest.raises(ValueError, match=message) as error:
    read_model_info(str(tmp_path))
  text = str(error.value)
  assert text.startswith(os.path.join(str(tmp_path), ASSETS_EXTRA, MODEL_INFO_FILENAME))
  assert 're-export the model' in text and '\n' not in text


def test_a_file_without_sampling_names_what_it_lacks(tmp_path):
  info = _info(None)
  del info['sampling']
  os.makedirs(str(tmp_path / ASSETS_EXTRA))
  with open(str(tmp_path / ASSETS_EXTRA / MODEL_INFO_FILENAME), 'w') as handle:
    json.dump(info, handle)
  with pytest.raises(ValueError, match='lacks sampling; re-export the model'):
    read_model_info(str(tmp_path))
