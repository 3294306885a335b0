"""What a user opens is what the tests checked: the real `tensorboard` server, read through
its HTTP API as the browser reads it, on a short video run with two clones (whose checkpoint
is also checked here: the rgb case of test_train_video's two-clone training)."""

import functools
import io
import json
import os
import struct
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import portpicker
import pytest
from PIL import Image

from datasets.inputs import label_strip
from tests import video_testdata
from tests.datasets.inputs.test_label_strip import read_label
from tests.training.test_train_video import check_two_clone_run, video_config
from tests import leftovers
from training import train as train_module


def _get(port, path, **query):
  url = 'http://127.0.0.1:%d%s?%s' % (port, path, urllib.parse.urlencode(query))
  with urllib.request.urlopen(url, timeout=30) as response:
    return response.read()


def _wait_for_tags(port, server, plugin, wanted, timeout=120):
  deadline = time.monotonic() + timeout
  while True:
    assert server.poll() is None, 'tensorboard ended with %s' % server.returncode
    try:
      tags = json.loads(_get(port, '/data/plugin/%s/tags' % plugin)).get('.', {})
      if wanted <= set(tags):
        return tags
    except OSError:
      pass
    assert time.monotonic() < deadline, 'tags %s not served' % sorted(wanted)
    time.sleep(0.5)


@pytest.mark.slow
def test_tensorboard_serves_every_clone_loss_the_input_wait_and_the_clips(
    tmp_path, tmp_path_factory):
  rgb_dir = video_testdata.converted(tmp_path_factory, 'rgb')
  train_dir = tmp_path / 'train'
  result = train_module.train(video_config(rgb_dir, train_dir, max_number_of_steps=8,
                                           save_summaries_secs=1, log_every_n_steps=2))
  # I3D trains on rgb clips with two clones (the flow case:
  # test_train_video.py::test_i3d_trains_on_flow_clips_with_two_clones).
  check_two_clone_run(result, steps=8, channels=3)
  port = portpicker.pick_unused_port()
  tensorboard = os.path.join(os.path.dirname(sys.executable), 'tensorboard')
  server = subprocess.Popen(
      [tensorboard, '--logdir', str(train_dir), '--host', '127.0.0.1', '--port', str(port),
       '--reload_interval', '1'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
      preexec_fn=functools.partial(leftovers.die_with_parent, os.getpid()))
  try:
    _wait_for_tags(port, server, 'scalars', {
        'clone_0/Losses/clone_loss', 'clone_1/Losses/clone_loss', 'Losses/total_loss',
        'examples_per_sec', 'input/wait_share', 'learning_rate'})
    series = json.loads(_get(port, '/data/plugin/scalars/scalars', run='.',
                             tag='examples_per_sec'))
    assert series and all(value > 0 for _, _, value in series)
    _wait_for_tags(port, server, 'images', {'clone_0/input/clips/image/0'})
    images = json.loads(_get(port, '/data/plugin/images/images', run='.',
                             tag='clone_0/input/clips/image/0'))
    png = _get(port, '/data/plugin/images/individualImage' + '',
               **dict(urllib.parse.parse_qsl(images[0]['query'])))
    assert png[:8] == b'\x89PNG\r\n\x1a\n'
    # 8 frames of a 4-frame clip: all 4, side by side, at the 32x32 crop, under the
    # clip's class ('0: down', ...: the synthetic classes are motion directions).
    width, height = struct.unpack('>II', png[16:24])
    assert (width, height) == (4 * 32, label_strip.GLYPH_HEIGHT + 32)
    names = video_testdata.synthetic_videos(tmp_path_factory)['class_names']
    assert read_label(Image.open(io.BytesIO(png)).convert('RGB')) in [
        '%d: %s' % item for item in enumerate(names)]
  finally:
    server.kill()
    server.wait()
