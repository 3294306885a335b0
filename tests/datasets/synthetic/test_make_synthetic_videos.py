"""Tests of datasets/synthetic/make_synthetic_videos.py: layout, lists, decodability, motion-only labels."""

import itertools
import os
import re

import cv2
import numpy as np
import pytest

from core.params import ConfigError
from datasets.synthetic.make_synthetic_videos import (DIRECTIONS, SyntheticVideosConfig,
                                               make_synthetic_videos, write_synthetic_videos)
from datasets.conversion.video_decode import decode_video

_SIZES = ((64, 80), (72, 96))
_NAME = re.compile(r'^(\w+)/v_(\w+)_g(\d\d)_c(\d\d)\.avi$')


@pytest.fixture(scope='module')
def dataset(tmp_path_factory):
  """4 classes x 12 videos of 1-40 frames in two sizes (about 0.5 s)."""
  output_dir = str(tmp_path_factory.mktemp('synthetic'))
  return make_synthetic_videos(output_dir, min_frames=1, max_frames=40, sizes=_SIZES)


@pytest.fixture(scope='module')
def decoded(dataset):
  """path -> uint8 [T, H, W, 3] frames of every video, decoded at the stored size."""
  return {video['path']: decode_video(os.path.join(dataset['video_dir'], video['path']),
                                      short_side=None, threads=1).frames
          for video in dataset['videos']}


def _read_lines(path):
  """The lines of a list file; fails unless every line ends with CRLF."""
  with open(path, 'rb') as handle:
    data = handle.read()
  assert data.endswith(b'\r\n') and data.count(b'\n') == data.count(b'\r\n'), path
  return data.decode('ascii').split('\r\n')[:-1]


def _lists(dataset):
  """(class names by 1-based label, {path: label} of trainlist01, [path] of testlist01)."""
  split_dir = dataset['split_dir']
  classes = dict(line.split(' ') for line in _read_lines(os.path.join(split_dir,
                                                                      'classInd.txt')))
  train = dict(line.split(' ') for line in _read_lines(os.path.join(split_dir,
                                                                    'trainlist01.txt')))
  test = _read_lines(os.path.join(split_dir, 'testlist01.txt'))
  return ({int(label): name for label, name in classes.items()},
          {path: int(label) for path, label in train.items()}, test)


def test_layout_is_ucf101s(dataset):
  video_dir = dataset['video_dir']
  names = sorted(name for name, _ in DIRECTIONS[:4])
  assert dataset['class_names'] == names and sorted(os.listdir(video_dir)) == names
  on_disk = sorted('%s/%s' % (name, file_name) for name in names
                   for file_name in os.listdir(os.path.join(video_dir, name)))
  assert on_disk == sorted(video['path'] for video in dataset['videos'])
  assert len(on_disk) == 48 and (dataset['codec'], dataset['extension']) == ('mpeg4', '.avi')
  for path in on_disk:
    folder, class_name, _, _ = _NAME.match(path).groups()
    assert folder == class_name
  assert sorted(os.listdir(dataset['split_dir'])) == [
      'classInd.txt', 'testlist01.txt', 'trainlist01.txt']


def test_lists_have_crlf_one_based_labels_and_disjoint_groups(dataset):
  classes, train, test = _lists(dataset)
  assert classes == {label + 1: name for label, name in enumerate(dataset['class_names'])}
  assert sorted(list(train) + test) == sorted(video['path'] for video in dataset['videos'])
  for path, label in train.items():
    assert classes[label] == path.split('/')[0]
  assert (len(train), len(test)) == (dataset['num_train'], dataset['num_test']) == (36, 12)
  for class_name in dataset['class_names']:
    groups = {split: {_NAME.match(path).group(3) for path in paths
                      if path.startswith(class_name + '/')}
              for split, paths in (('train', train), ('test', test))}
    assert groups['train'] and groups['test'] and not groups['train'] & groups['test']


def test_every_video_decodes_with_its_planned_length_and_size(dataset, decoded):
  for video in dataset['videos']:
    frames = decoded[video['path']]
    assert frames.shape == (video['num_frames'], video['height'], video['width'], 3)
  lengths = [video['num_frames'] for video in dataset['videos']]
  assert min(lengths) == 1 and max(lengths) == 40
  assert sum(length < 16 for length in lengths) >= 6    # shorter than a 16-frame clip
  assert {(video['height'], video['width']) for video in dataset['videos']} == set(_SIZES)


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
  settings = dict(num_classes=2, videos_per_class=4, min_frames=2, max_frames=6,
                  sizes=((32, 48),))
  runs = [make_synthetic_videos(str(tmp_path / name), seed=seed, **settings)
          for name, seed in (('a', 3), ('b', 3), ('c', 4))]
  contents = [_all_bytes(run['output_dir']) for run in runs]
  assert contents[0] == contents[1]
  assert contents[0].keys() == contents[2].keys() and contents[0] != contents[2]


def _all_bytes(root):
  """{path relative to root: bytes} of every file below root."""
  files = {}
  for directory, _, names in os.walk(root):
    for name in names:
      with open(os.path.join(directory, name), 'rb') as handle:
        files[os.path.relpath(os.path.join(directory, name), root)] = handle.read()
  return files


@pytest.fixture(scope='module')
def motion_set(tmp_path_factory):
  """{class name: [uint8 [T, 48, 64, 3] per video]}: 4 classes x 24 videos of one size."""
  summary = make_synthetic_videos(str(tmp_path_factory.mktemp('motion')), videos_per_class=24,
                                  min_frames=16, max_frames=24, sizes=((48, 64),), seed=1)
  videos = {}
  for video in summary['videos']:
    path = os.path.join(summary['video_dir'], video['path'])
    videos.setdefault(video['class_name'], []).append(
        decode_video(path, short_side=None, threads=1).frames)
  return videos


def _pixel_stats(videos):
  """Per-pixel mean and std over all frames of all videos: float [H, W, 3] each."""
  frames = np.concatenate(videos).astype(np.float64)
  return frames.mean(axis=0), frames.std(axis=0)


def _blocks(image, size=16):
  """Means of size x size blocks per channel: float [H, W, 3] -> [H/size, W/size, 3]."""
  height, width, channels = image.shape
  return image.reshape(height // size, size, width // size, size, channels).mean(axis=(1, 3))


@pytest.mark.parametrize('first, second', list(itertools.combinations(
    ('MoveDown', 'MoveLeft', 'MoveRight', 'MoveUp'), 2)))
def test_single_frames_look_alike_in_every_class(motion_set, first, second):
  (mean_a, std_a), (mean_b, std_b) = (_pixel_stats(motion_set[name])
                                      for name in (first, second))
  # Tolerances sit just above the largest gap between any two classes over seeds 0-5
  # (4.5, 2.9, 7.3 and 6.9), which is sampling noise: textures are shared within a group,
  # and each video's objects keep their rows (or columns). A class-specific colour, a 20%
  # brighter or a 1.5x larger object moves a frame-wide value by 9 or more.
  np.testing.assert_allclose(mean_a.mean(axis=(0, 1)), mean_b.mean(axis=(0, 1)), atol=5)
  np.testing.assert_allclose(std_a.mean(axis=(0, 1)), std_b.mean(axis=(0, 1)), atol=4)
  np.testing.assert_allclose(_blocks(mean_a), _blocks(mean_b), atol=8)
  np.testing.assert_allclose(_blocks(std_a), _blocks(std_b), atol=8)
  assert std_a.mean() > 30  # the objects are there: the noise alone has std 20


def _shifts(frames, window=None):
  """cv2.phaseCorrelate (dx, dy) between consecutive grey frames: float [T - 1, 2]."""
  grey = [cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY).astype(np.float32) for frame in frames]
  return np.array([cv2.phaseCorrelate(before, after, window)[0]
                   for before, after in zip(grey[:-1], grey[1:])])


def test_every_video_moves_in_its_class_direction(motion_set):
  directions = dict(DIRECTIONS)
  for class_name, videos in motion_set.items():
    dy, dx = directions[class_name]
    for frames in videos:
      shift = np.median(_shifts(frames), axis=0)
      along, across = shift @ (dx, dy), shift @ (-dy, dx)
      assert 1.8 < along < 4.2 and abs(across) < 0.5, (class_name, shift)


def test_motion_is_visible_in_centre_crops_at_short_side_128(dataset):
  # The clip a network sees: short side 128, a 112 x 112 crop, the first 16 frames. A crop
  # is not periodic like the full frame: without a window its edges win with a zero shift.
  window = cv2.createHanningWindow((112, 112), cv2.CV_32F)
  directions = dict(DIRECTIONS)
  for video in dataset['videos']:
    if video['num_frames'] < 8:
      continue
    frames = decode_video(os.path.join(dataset['video_dir'], video['path']),
                          short_side=128, max_frames=16, threads=1).frames
    top, left = (frames.shape[1] - 112) // 2, (frames.shape[2] - 112) // 2
    crops = frames[:, top:top + 112, left:left + 112]
    shift = np.median(_shifts(crops, window), axis=0)
    dy, dx = directions[video['class_name']]
    assert shift @ (dx, dy) > 3, (video['path'], shift)   # pixels per frame


@pytest.mark.parametrize('argument, message', [
    ({'num_classes': 1}, r'^num_classes=1 is not accepted'),
    ({'videos_per_class': 3}, r'^videos_per_class=3 is not accepted'),
    ({'min_frames': 0}, r'^min_frames=0 is not accepted'),
    ({'min_frames': 9, 'max_frames': 8}, r'^max_frames=8 is not accepted: .* from 9 '),
    ({'sizes': ((64, 81),)}, r'^sizes=\(\(64, 81\),\) is not accepted'),
    ({'sizes': ()}, r'^sizes=\(\) is not accepted'),
    ({'fps': 0}, r'^fps=0 is not accepted'),
    ({'test_fraction': 1.0}, r'^test_fraction=1.0 is not accepted'),
])
def test_bad_argument_raises_value_error_and_writes_nothing(tmp_path, argument, message):
  with pytest.raises(ValueError, match=message):
    make_synthetic_videos(str(tmp_path / 'out'), **argument)
  assert not os.path.exists(tmp_path / 'out')


def test_refuses_an_output_dir_that_holds_videos(dataset):
  with pytest.raises(ValueError, match=r'already holds videos/'):
    make_synthetic_videos(dataset['output_dir'])


def test_the_config_runs_with_sizes_as_the_flag_spells_them(tmp_path):
  summary = write_synthetic_videos(SyntheticVideosConfig(
      output_dir=str(tmp_path / 'out'), num_classes=2, videos_per_class=4, max_frames=10,
      sizes=('32x48', '48X64')))
  assert {(v['height'], v['width']) for v in summary['videos']} <= {(32, 48), (48, 64)}
  with pytest.raises(ConfigError, match=r'^--sizes=32by48 is not accepted'):
    write_synthetic_videos(SyntheticVideosConfig(output_dir=str(tmp_path / 'other'),
                                                 sizes=('32by48',)))
  assert not os.path.exists(tmp_path / 'other')
