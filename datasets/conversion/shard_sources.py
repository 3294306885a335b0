"""What manifest.json records so that one damaged shard can be rebuilt from its sources.

The video converter adds two keys to the manifest:

    "source": {"video_dir": "/abs/UCF-101", "frames_dir": null, "splits_dir": "/abs/lists"}
    "shard_contents": {"train-00003-of-00010": {
        "split": "train", "sha256": "<hex digest of the shard file as written>",
        "index_sha256": "<hex digest of its index file, <shard>.index>",
        "videos": [{"id", "path" (relative to the source dir), "label", "frames"}, ...]}}

Each shard's videos are listed in record order, so `python -m datasets.convert_videos
--output_dir=DIR --only_shard=NAME` (`shard_rebuild`) decodes exactly those videos again
and writes the same records and index; the SHA-256s say whether the bytes are the same as
before.
"""

import hashlib
import os

__all__ = ['add_sources', 'add_shard_contents', 'file_sha256']

_CHUNK = 1 << 20


def file_sha256(path):
  """Hex SHA-256 of a file's bytes."""
  digest = hashlib.sha256()
  with open(path, 'rb') as handle:
    for chunk in iter(lambda: handle.read(_CHUNK), b''):
      digest.update(chunk)
  return digest.hexdigest()


def _absolute(path):
  return os.path.abspath(path) if path else None


def add_sources(manifest, conversion):
  """Sets manifest['source']: the absolute source directories of `conversion`."""
  manifest['source'] = {'video_dir': _absolute(conversion.video_dir),
                        'frames_dir': _absolute(conversion.frames_dir),
                        'splits_dir': _absolute(conversion.splits_dir)}


def add_shard_contents(manifest, shards, progress):
  """Adds each shard's videos and SHA-256 to manifest['shard_contents'].

  Args:
    manifest: the manifest dict being written.
    shards: one split's planned shards (each with `.name` and `.split`).
    progress: their progress records, in the same order ({'videos': [...], 'sha256',
      'index_sha256'}; a shard written by an older converter lacks them: null then).
  """
  contents = manifest.setdefault('shard_contents', {})
  for shard, record in zip(shards, progress):
    contents[shard.name] = {'split': shard.split, 'sha256': record.get('sha256'),
                            'index_sha256': record.get('index_sha256'),
                            'videos': record['videos']}
