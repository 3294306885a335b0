"""Tests of checkpoints/end_marker.py: the trainer's atomic end marker."""

import json
import os

import pytest

from checkpoints import end_marker


def test_written_atomically_with_a_basename_and_read_back(tmp_path):
  path = end_marker.write_end_marker(str(tmp_path), end_marker.STOPPED, 12,
                                     str(tmp_path / 'model.ckpt-12'))
  assert os.listdir(tmp_path) == [end_marker.END_MARKER_FILE]  # no temporary left
  with open(path) as handle:
    record = json.load(handle)
  assert (record['status'], record['global_step'], record['checkpoint']) == (
      'stopped', 12, 'model.ckpt-12')
  assert end_marker.read_end_marker(str(tmp_path)) == end_marker.EndMarker(
      'stopped', 12, 'model.ckpt-12')
  end_marker.write_end_marker(str(tmp_path), end_marker.FINISHED, 20)
  assert end_marker.read_end_marker(str(tmp_path)).status == 'finished'
  end_marker.clear_end_marker(str(tmp_path))
  assert end_marker.read_end_marker(str(tmp_path)) is None
  end_marker.clear_end_marker(str(tmp_path))  # nothing to clear: no error


@pytest.mark.parametrize('text', ['', '{', '[]', '{"status": "paused", "global_step": 3}',
                                  '{"status": "finished"}'])
def test_anything_else_is_no_marker(tmp_path, text):
  (tmp_path / end_marker.END_MARKER_FILE).write_text(text)
  assert end_marker.read_end_marker(str(tmp_path)) is None


def test_an_unknown_status_is_refused_before_writing(tmp_path):
  with pytest.raises(ValueError, match="'done' is not finished or stopped"):
    end_marker.write_end_marker(str(tmp_path), 'done', 3)
  assert not os.listdir(tmp_path)
