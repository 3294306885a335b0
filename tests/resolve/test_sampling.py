"""resolve.sampling: one resolver and one default (the network's frames and size) for
training's clips and for eval's and export's Sampling; the flags declared once."""

import dataclasses

import pytest

from core.params import ConfigError
from evaluation.config import EvalConfig
from nets import nets_factory
from resolve import sampling
from resolve.sampling import SamplingFlags, resolve_sampling
from serving.export_model import ExportConfig

I3D = nets_factory.get_network_spec('i3d')


def test_eval_and_export_declare_the_sampling_flags_once():
  names = [field.name for field in dataclasses.fields(SamplingFlags)]
  assert names == ['eval_frames', 'eval_clips', 'clip_frames', 'eval_image_size']
  for config_class in (EvalConfig, ExportConfig):
    assert issubclass(config_class, SamplingFlags)
    fields = {field.name: field for field in dataclasses.fields(config_class)}
    for field in dataclasses.fields(SamplingFlags):
      assert fields[field.name].metadata['help'] == field.metadata['help']


def test_the_default_is_the_networks_frames_and_size_for_every_entry():
  """Training's clip (training.setup) and eval's Sampling come from the same resolver."""
  assert sampling.clip_frames(I3D, None) == I3D.default_num_frames == 64
  assert sampling.crop_size(I3D, None, 'train_image_size') == I3D.default_image_size
  for config_class in (EvalConfig, ExportConfig):
    resolved = resolve_sampling(config_class(model_name='i3d'))
    assert (resolved.eval_frames, resolved.eval_clips) == (None, 1)
    assert resolved.clip_frames == sampling.clip_frames(I3D, None)
    assert resolved.crop_size == I3D.default_image_size


def test_given_flags_win_and_first_frames_are_the_clip():
  resolved = resolve_sampling(EvalConfig(model_name='i3d', eval_clips=3, clip_frames=16,
                                         eval_image_size=112))
  assert (resolved.eval_clips, resolved.clip_frames, resolved.crop_size) == (3, 16, 112)
  first = resolve_sampling(ExportConfig(model_name='i3d', eval_frames=250))
  assert (first.eval_frames, first.eval_clips, first.frames) == (250, None, 250)


@pytest.mark.parametrize('overrides, message', [
    (dict(eval_frames=8, eval_clips=2), '--eval_frames=8 and --eval_clips=2 are not'),
    (dict(eval_frames=8, clip_frames=4), '--clip_frames=4 applies to --eval_clips'),
    (dict(eval_image_size=0), '--eval_image_size=0 must be >= 1'),
])
def test_mistakes_are_one_line(overrides, message):
  with pytest.raises(ConfigError, match=message) as error:
    resolve_sampling(EvalConfig(model_name='i3d', **overrides))
  assert '\n' not in str(error.value)
