"""datasets.inputs.input_settings: a Sampling is checked when made and read back from
JSON exactly as written, or refused in one line; InputSettings keep one clip geometry."""

import pytest

from datasets.inputs.input_settings import InputSettings, Sampling

CLIPS = Sampling(eval_frames=None, eval_clips=3, clip_frames=16, crop_size=112)
FIRST = Sampling.first_frames(250, 224)


@pytest.mark.parametrize('sampling', [CLIPS, FIRST])
def test_json_round_trip(sampling):
  assert Sampling.from_json(sampling.to_json(), 'model_info.json') == sampling


def test_the_json_form_is_the_one_model_info_and_reports_always_had():
  assert CLIPS.to_json() == {'mode': 'eval_clips', 'clips': 3, 'clip_frames': 16,
                             'crop_size': 112}
  assert FIRST.to_json() == {'mode': 'eval_frames', 'frames': 250, 'crop_size': 224}
  assert FIRST.frames == 250 and CLIPS.frames == 16


@pytest.mark.parametrize('content, message', [
    ({'mode': 'uniform', 'clips': 2}, '"sampling" .*uniform.* is not one this version'),
    ('64 frames', '"sampling" \'64 frames\' is not one this version reads'),
    ({'mode': 'eval_clips', 'clips': 2, 'crop_size': 224}, 'lacks clip_frames'),
    ({'mode': 'eval_frames', 'frames': 0, 'crop_size': 224}, 'frames=0 is not accepted'),
])
def test_an_unknown_or_incomplete_sampling_is_one_line(content, message):
  with pytest.raises(ValueError, match=message) as error:
    Sampling.from_json(content, 'x/model_info.json')
  text = str(error.value)
  assert text.startswith('x/model_info.json: ') and 're-export' in text and '\n' not in text


@pytest.mark.parametrize('fields, message', [
    (dict(eval_frames=4, eval_clips=2, clip_frames=4), 'exactly one of'),
    (dict(eval_frames=None, eval_clips=None, clip_frames=4), 'exactly one of'),
    (dict(eval_frames=8, eval_clips=None, clip_frames=4), 'a clip is those frames'),
])
def test_a_sampling_is_one_thing(fields, message):
  with pytest.raises(ValueError, match=message):
    Sampling(crop_size=16, **fields)


def test_settings_take_their_clip_geometry_from_the_sampling():
  settings = InputSettings.for_sampling(CLIPS, batch_size=2)
  assert (settings.clip_frames, settings.image_size) == (16, 112)
  with pytest.raises(ValueError, match='for_sampling'):
    InputSettings(batch_size=2, image_size=224, clip_frames=16, sampling=CLIPS)
