"""Video split lists: the real UCF101 lists, HMDB51-style files and class-folder trees."""

import collections
import re
import tarfile
from pathlib import Path

import pytest

from datasets import dataset_factory
from datasets.formats.dataset_split import DatasetError
from datasets.splits import video_splits
from datasets.splits.video_splits import VideoEntry

# The real UCF101 lists (classInd.txt, trainlist0N.txt, testlist0N.txt, CRLF line ends as
# published), byte for byte, shipped beside this file so a clone anywhere has them.
UCF101_ARCHIVE = Path(__file__).with_name('ucf101_split_lists.tar.gz')
_GROUP_RE = re.compile(r'_g(\d\d)_c\d\d\.avi$')


@pytest.fixture(scope='module')
def ucf101_lists(tmp_path_factory):
  directory = tmp_path_factory.mktemp('ucf101_lists')
  with tarfile.open(UCF101_ARCHIVE) as archive:
    archive.extractall(directory, filter='data')
  return directory


def _groups(entries):
  return {int(_GROUP_RE.search(entry.relative_path).group(1)) for entry in entries}


def _plain_trainlist(lists_dir, split):
  """The trainlist read independently: [(path, 0-based label)]."""
  text = (lists_dir / ('trainlist%02d.txt' % split)).read_bytes().decode('ascii')
  pairs = [line.split(' ') for line in text.split('\r\n') if line]
  return [(path, int(label) - 1) for path, label in pairs]


def _message(error_info):
  message = str(error_info.value)
  assert '\n' not in message
  return message


@pytest.mark.parametrize('split, num_train, num_test', [
    (1, 9537, 3783), (2, 9586, 3734), (3, 9624, 3696)])
def test_real_ucf101_lists(ucf101_lists, split, num_train, num_test):
  lists = dataset_factory.read_split_lists('ucf101', str(ucf101_lists), split)
  train, test = lists.splits['train'], lists.splits['test']
  assert (len(train), len(test), lists.problems) == (num_train, num_test, ())
  assert len(lists.class_names) == 101
  assert (lists.class_names[0], lists.class_names[100]) == ('ApplyEyeMakeup', 'YoYo')
  assert {entry.label for entry in train} == {entry.label for entry in test} == set(range(101))
  assert not {entry.relative_path for entry in train} & {entry.relative_path for entry in test}
  assert ([(entry.relative_path, entry.label) for entry in train] ==
          _plain_trainlist(ucf101_lists, split))
  for entry in train + test:
    assert entry.class_name == entry.relative_path.split('/')[0]
    assert lists.class_names[entry.label] == entry.class_name


def test_real_ucf101_split1_holds_out_groups_1_to_7(ucf101_lists):
  lists = dataset_factory.read_split_lists('ucf101', str(ucf101_lists), 1)
  assert _groups(lists.splits['test']) == set(range(1, 8))
  assert _groups(lists.splits['train']) == set(range(8, 26))
  assert lists.splits['train'][0] == VideoEntry(
      'ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi', 'ApplyEyeMakeup', 0)
  assert lists.splits['test'][-1].class_name == 'YoYo'
  assert lists.splits['test'][-1].label == 100


def test_real_ucf101_test_sets_are_disjoint_across_splits(ucf101_lists):
  tests = [{entry.relative_path for entry in
            dataset_factory.read_split_lists('ucf101', str(ucf101_lists), split).splits['test']}
           for split in (1, 2, 3)]
  assert not (tests[0] & tests[1] or tests[0] & tests[2] or tests[1] & tests[2])


def test_lf_blank_lines_and_crlf_read_the_same(ucf101_lists, tmp_path):
  for name in ('classInd.txt', 'trainlist02.txt', 'testlist02.txt'):
    text = (ucf101_lists / name).read_bytes().decode('ascii')
    assert '\r\n' in text
    (tmp_path / name).write_bytes(('\n\n' + text.replace('\r\n', '\n\n')).encode('ascii'))
  crlf = dataset_factory.read_split_lists('ucf101', str(ucf101_lists), 2)
  assert dataset_factory.read_split_lists('ucf101', str(tmp_path), 2) == crlf


def _write_lists(directory, class_index, train, test, split=1):
  directory.mkdir(exist_ok=True)
  (directory / 'classInd.txt').write_bytes(class_index.encode())
  (directory / ('trainlist%02d.txt' % split)).write_bytes(train.encode())
  (directory / ('testlist%02d.txt' % split)).write_bytes(test.encode())
  return str(directory)


def test_unusable_list_lines_become_problems(tmp_path):
  splits_dir = _write_lists(
      tmp_path, '1 Archery\r\n2 Bowling\r\n3 Diving\r\n',
      'Archery/v_Archery_g08_c01.avi 1\r\n'
      'Surfing/v_Surfing_g08_c01.avi 2\r\n'        # class not in classInd
      'Bowling/v_Bowling_g08_c01.avi 3\r\n'        # label 3 is Diving
      'Diving/v_Diving_g08_c01.avi 7\r\n'          # label beyond classInd
      'Diving/v_Diving_g08_c02.avi\r\n'            # no label
      'Archery/v_Archery_g08_c01.avi 1\r\n'        # listed twice
      'Diving/v_Diving_g08_c03.avi 3\r\n',
      'Bowling/v_Bowling_g01_c01.avi\r\n'
      'Archery/v_Archery_g08_c01.avi\r\n'          # already in train
      'v_Diving_g01_c01.avi\r\n'                   # no class folder
      'Climbing/v_Climbing_g01_c01.avi\r\n')       # class not in classInd
  lists = dataset_factory.read_split_lists('ucf101', splits_dir, 1)
  assert lists.class_names == ('Archery', 'Bowling', 'Diving')
  assert lists.splits == {
      'train': (VideoEntry('Archery/v_Archery_g08_c01.avi', 'Archery', 0),
                VideoEntry('Diving/v_Diving_g08_c03.avi', 'Diving', 2)),
      'test': (VideoEntry('Bowling/v_Bowling_g01_c01.avi', 'Bowling', 1),)}
  assert lists.problems == (
      ('Surfing/v_Surfing_g08_c01.avi',
       "trainlist01.txt line 2: class 'Surfing' is not in classInd.txt"),
      ('Bowling/v_Bowling_g08_c01.avi',
       'trainlist01.txt line 3: label 3 (Diving) disagrees with the folder Bowling (label 2)'),
      ('Diving/v_Diving_g08_c01.avi', 'trainlist01.txt line 4: label 7 (not in classInd.txt) '
                                      'disagrees with the folder Diving (label 3)'),
      ('Diving/v_Diving_g08_c02.avi',
       'trainlist01.txt line 5: expected "<class>/<video> <label>"'),
      ('Archery/v_Archery_g08_c01.avi', 'trainlist01.txt line 6: already listed in '
                                        'trainlist01.txt'),
      ('Archery/v_Archery_g08_c01.avi', 'testlist01.txt line 2: already listed in '
                                        'trainlist01.txt'),
      ('v_Diving_g01_c01.avi', 'testlist01.txt line 3: expected a path "<class>/<video>"'),
      ('Climbing/v_Climbing_g01_c01.avi',
       "testlist01.txt line 4: class 'Climbing' is not in classInd.txt"))


@pytest.mark.parametrize('split', [0, 4, '1', True, 1.0])
def test_bad_ucf101_split_number(ucf101_lists, split):
  with pytest.raises(DatasetError) as info:
    dataset_factory.read_split_lists('ucf101', str(ucf101_lists), split)
  assert _message(info) == ('--split=%r is not accepted for ucf101; valid splits: 1, 2, 3'
                            % (split,))


def test_missing_list_file_is_named(tmp_path):
  (tmp_path / 'classInd.txt').write_text('1 Archery\n')
  (tmp_path / 'trainlist01.txt').write_text('Archery/v_Archery_g08_c01.avi 1\n')
  with pytest.raises(DatasetError) as info:
    dataset_factory.read_split_lists('ucf101', str(tmp_path), 1)
  assert _message(info) == '%s is missing' % (tmp_path / 'testlist01.txt')
  with pytest.raises(DatasetError) as info:
    dataset_factory.read_split_lists('ucf101', str(tmp_path), 3)
  assert _message(info) == '%s is missing' % (tmp_path / 'trainlist03.txt')
  with pytest.raises(DatasetError) as info:
    dataset_factory.read_split_lists('ucf101', str(tmp_path / 'lists'), 1)
  assert _message(info) == ('--splits_dir=%s does not exist or is not a directory'
                            % (tmp_path / 'lists'))
  with pytest.raises(DatasetError, match='--splits_dir is required for --dataset_name=ucf101'):
    dataset_factory.read_split_lists('ucf101')


def test_bad_class_index_is_an_error(tmp_path):
  splits_dir = _write_lists(tmp_path, '1 Archery\n3 Diving\n', '', '')
  with pytest.raises(DatasetError) as info:
    dataset_factory.read_split_lists('ucf101', splits_dir, 1)
  assert _message(info) == ("%s line 2 is '3 Diving'; expected \"2 <ClassName>\" (indices 1, "
                            '2, ... in order)' % (tmp_path / 'classInd.txt'))


def test_unknown_dataset_name_lists_the_valid_ones(ucf101_lists):
  with pytest.raises(DatasetError) as info:
    dataset_factory.read_split_lists('kinetics400', str(ucf101_lists))
  assert _message(info) == ("dataset_name 'kinetics400' has no video split lists; valid "
                            'names: hmdb51, ucf101, video_folder')


def _write_hmdb51(directory, codes_by_class, split):
  directory.mkdir(exist_ok=True)
  for class_name, codes in codes_by_class.items():
    lines = ''.join('%s_%s_%d.avi %d \r\n' % (class_name, 'goo', index, code)
                    for index, code in enumerate(codes))
    (directory / ('%s_test_split%d.txt' % (class_name, split))).write_text(lines)


def test_hmdb51_split_files(tmp_path):
  _write_hmdb51(tmp_path, {'wave': [1, 2, 0, 1], 'brush_hair': [2, 1, 1, 0, 0],
                           'cartwheel': [0, 1, 2]}, split=2)
  _write_hmdb51(tmp_path, {'wave': [2], 'brush_hair': [2], 'cartwheel': [2]}, split=1)
  with open(tmp_path / 'cartwheel_test_split2.txt', 'a') as handle:
    handle.write('\r\ncartwheel_goo_0.avi 2\r\ncartwheel_goo_9.avi 3\r\n')
  (tmp_path / '._wave_test_split2.txt').write_bytes(b'\0\x05\x16\x07')  # macOS metadata
  lists = dataset_factory.read_split_lists('hmdb51', str(tmp_path), 2)
  assert lists.class_names == ('brush_hair', 'cartwheel', 'wave')
  by_split = {name: [(entry.relative_path, entry.class_name, entry.label) for entry in entries]
              for name, entries in lists.splits.items()}
  assert by_split == {
      'train': [('brush_hair/brush_hair_goo_1.avi', 'brush_hair', 0),
                ('brush_hair/brush_hair_goo_2.avi', 'brush_hair', 0),
                ('cartwheel/cartwheel_goo_1.avi', 'cartwheel', 1),
                ('wave/wave_goo_0.avi', 'wave', 2), ('wave/wave_goo_3.avi', 'wave', 2)],
      'test': [('brush_hair/brush_hair_goo_0.avi', 'brush_hair', 0),
               ('cartwheel/cartwheel_goo_2.avi', 'cartwheel', 1),
               ('wave/wave_goo_1.avi', 'wave', 2)]}
  assert lists.problems == (
      ('cartwheel/cartwheel_goo_0.avi', 'cartwheel_test_split2.txt line 5: already listed '
                                        'at cartwheel_test_split2.txt line 1'),
      ('cartwheel/cartwheel_goo_9.avi', 'cartwheel_test_split2.txt line 6: expected '
                                        '"<video> <code>" with code 0, 1 or 2'))
  assert len(dataset_factory.read_split_lists('hmdb51', str(tmp_path), 1).splits['test']) == 3


def test_hmdb51_missing_class_file_and_bad_split(tmp_path):
  _write_hmdb51(tmp_path, {'wave': [1], 'cartwheel': [2]}, split=1)
  _write_hmdb51(tmp_path, {'wave': [1]}, split=3)
  with pytest.raises(DatasetError) as info:
    dataset_factory.read_split_lists('hmdb51', str(tmp_path), 3)
  assert _message(info) == ('%s is missing (1 of 2 classes have no split 3 file)'
                            % (tmp_path / 'cartwheel_test_split3.txt'))
  with pytest.raises(DatasetError, match=r'^--split=5 is not accepted for hmdb51; valid '
                                         'splits: 1, 2, 3$'):
    dataset_factory.read_split_lists('hmdb51', str(tmp_path), 5)
  empty = tmp_path / 'empty'
  empty.mkdir()
  with pytest.raises(DatasetError, match='holds no HMDB51 split files'):
    dataset_factory.read_split_lists('hmdb51', str(empty), 1)


_TREE = {'archery': 10, 'bowling': 6, 'diving': 1}  # class: number of videos


def _make_tree(root):
  """Empty files stand for videos: only names matter to the lists."""
  extensions = ['.avi', '.mp4', '.MKV', '.mov', '.webm', '.mpg', '.Mpeg', '.m4v', '.wmv',
                '.flv']
  videos = {}
  for class_name, count in _TREE.items():
    (root / class_name).mkdir(parents=True)
    for index in range(count):
      name = 'v_%s_%02d%s' % (class_name, index, extensions[index])
      (root / class_name / name).write_bytes(b'')
      videos['%s/%s' % (class_name, name)] = class_name
  (root / 'archery' / 'notes.txt').write_text('not a video\n')
  (root / 'archery' / '.hidden.avi').write_bytes(b'')
  (root / 'bowling' / 'frames').mkdir()
  (root / 'README.md').write_text('not in a class folder\n')
  (root / '.DS_Store').write_bytes(b'')
  return videos


def test_video_folder_holds_out_a_stratified_fraction(tmp_path):
  videos = _make_tree(tmp_path / 'videos')
  lists = dataset_factory.read_split_lists('video_folder', video_dir=str(tmp_path / 'videos'),
                                        test_fraction=0.3, seed=0)
  assert lists.class_names == ('archery', 'bowling', 'diving')
  train, test = lists.splits['train'], lists.splits['test']
  paths = [entry.relative_path for entry in train + test]
  assert sorted(paths) == sorted(videos) and len(set(paths)) == len(paths)
  for entry in train + test:
    assert (entry.class_name, entry.label) == (
        videos[entry.relative_path], lists.class_names.index(entry.class_name))
  # round(17 * 0.3) = 5 test videos; largest remainders: archery 10*5/17 = 2.94 -> 3,
  # bowling 1.76 -> 2, diving 0.29 -> 0 (and a class never loses its last training video).
  assert collections.Counter(entry.class_name for entry in test) == {'archery': 3,
                                                                     'bowling': 2}
  assert sorted(lists.problems) == [
      ('README.md', 'not inside a class folder'),
      ('archery/notes.txt', 'not a video file (extensions: %s)'
       % ' '.join(video_splits.VIDEO_EXTENSIONS)),
      ('bowling/frames', 'a directory inside a class folder; videos must be directly in '
                         '<class>/')]
  again = dataset_factory.read_split_lists('video_folder', video_dir=str(tmp_path / 'videos'),
                                        test_fraction=0.3, seed=0)
  assert again == lists
  other_seeds = [dataset_factory.read_split_lists('video_folder', video_dir=str(tmp_path / 'videos'),
                                               test_fraction=0.3, seed=seed)
                 for seed in (1, 2, 3)]
  assert any(set(other.splits['test']) != set(test) for other in other_seeds)
  for other in other_seeds:
    assert collections.Counter(entry.class_name for entry in other.splits['test']) == {
        'archery': 3, 'bowling': 2}


# 0.5: 9 test videos; quotas 5, 3, 0 and the one left over goes to the largest remainder
# among classes that keep a training video (archery). 0.99: at most 16, but every class keeps
# one training video, so 9 + 5.
@pytest.mark.parametrize('test_fraction, expected', [
    (0.0, {}), (0.5, {'archery': 6, 'bowling': 3}), (0.99, {'archery': 9, 'bowling': 5})])
def test_video_folder_keeps_a_training_video_per_class(tmp_path, test_fraction, expected):
  _make_tree(tmp_path / 'videos')
  lists = dataset_factory.read_split_lists('video_folder', video_dir=str(tmp_path / 'videos'),
                                        test_fraction=test_fraction)
  assert collections.Counter(entry.class_name for entry in lists.splits['test']) == expected
  assert {entry.class_name for entry in lists.splits['train']} == set(_TREE)


@pytest.mark.parametrize('test_fraction', [1.0, -0.1, '0.3', None])
def test_video_folder_bad_fraction(tmp_path, test_fraction):
  _make_tree(tmp_path / 'videos')
  with pytest.raises(DatasetError) as info:
    dataset_factory.read_split_lists('video_folder', video_dir=str(tmp_path / 'videos'),
                                  test_fraction=test_fraction)
  assert _message(info) == ('--test_fraction=%r is not accepted: use a number >= 0 and < 1'
                            % (test_fraction,))


def test_video_folder_needs_a_tree_of_videos(tmp_path):
  with pytest.raises(DatasetError, match='^--video_dir is required for '
                                         '--dataset_name=video_folder'):
    dataset_factory.read_split_lists('video_folder')
  (tmp_path / 'flat').mkdir()
  (tmp_path / 'flat' / 'a.avi').write_bytes(b'')
  with pytest.raises(DatasetError, match='has no class sub-directories; expected '):
    dataset_factory.read_split_lists('video_folder', video_dir=str(tmp_path / 'flat'))
  (tmp_path / 'texts' / 'cats').mkdir(parents=True)
  (tmp_path / 'texts' / 'cats' / 'a.txt').write_text('text')
  with pytest.raises(DatasetError, match='holds no video files'):
    dataset_factory.read_split_lists('video_folder', video_dir=str(tmp_path / 'texts'))


def test_video_folder_with_lists(tmp_path):
  videos = _make_tree(tmp_path / 'videos')
  archery = sorted(path for path in videos if path.startswith('archery/'))
  splits_dir = _write_lists(
      tmp_path / 'lists', '1 diving\n2 archery\n',
      'archery/%s 2\narchery/%s 2\ndiving/v_diving_00.avi 1\nbowling/x.avi 3\n'
      % (archery[0].split('/')[1], archery[1].split('/')[1]),
      'archery/%s\n' % archery[2].split('/')[1], split=2)
  lists = dataset_factory.read_split_lists('video_folder', splits_dir,
                                        split=2, video_dir=str(tmp_path / 'videos'))
  assert lists.class_names == ('diving', 'archery')  # classInd order, not sorted
  assert lists.splits == {
      'train': (VideoEntry(archery[0], 'archery', 1), VideoEntry(archery[1], 'archery', 1),
                VideoEntry('diving/v_diving_00.avi', 'diving', 0)),
      'test': (VideoEntry(archery[2], 'archery', 1),)}
  assert lists.problems == (
      ('bowling/x.avi', "trainlist02.txt line 4: class 'bowling' is not in classInd.txt"),)
  with pytest.raises(DatasetError) as info:
    dataset_factory.read_split_lists('video_folder', splits_dir, split=1)
  assert _message(info) == '%s is missing' % (tmp_path / 'lists' / 'trainlist01.txt')
  with pytest.raises(DatasetError, match=r'^--split=100 is not accepted for video_folder; '
                                         'valid splits: an integer from 1 to 99$'):
    dataset_factory.read_split_lists('video_folder', splits_dir, split=100)
