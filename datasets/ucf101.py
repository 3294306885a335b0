"""UCF101: 13,320 action clips from YouTube, 101 classes, 25 fps, 320x240 (.avi).

The official lists (`ucfTrainTestlist`) define three train/test splits that hold out disjoint
groups g01..g25 of clips (split 1 tests g01..g07); see `splits/video_splits`. Split sizes,
the modality and the channel count come from the converted data's dataset_info.json, class
names (classInd.txt order) from labels.txt. Create it with:

    python -m datasets.convert_videos --dataset_name=ucf101 --video_dir=UCF-101 \\
        --splits_dir=ucfTrainTestlist --output_dir=DIR [--split=1 --modality=rgb]
"""

from datasets.splits import video_splits
from datasets.video_dataset import VideoDatasetSpec

SPEC = VideoDatasetSpec(
    name='ucf101', num_classes=101,
    source_flags=('--video_dir=<UCF-101 tree>', '--splits_dir=<ucfTrainTestlist>'),
    read_lists=video_splits.read_ucf_style_lists,
    lists_dir='the ucfTrainTestlist directory (classInd.txt, trainlist01.txt, '
              'testlist01.txt, ...)',
    label_description='Class index 0..100, classInd.txt order (its 1-based index minus one).')
NAME, get_split, convert_command, read_split_lists = SPEC.declaration()
NUM_CLASSES = SPEC.num_classes
# Videos listed by the official splits; the converted sizes are smaller if videos are skipped.
OFFICIAL_SPLITS_TO_SIZES = {1: {'train': 9537, 'test': 3783},
                            2: {'train': 9586, 'test': 3734},
                            3: {'train': 9624, 'test': 3696}}
