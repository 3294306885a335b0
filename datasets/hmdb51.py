"""HMDB51: 6,766 action clips from films and the web, 51 classes (.avi).

The official lists (`testTrainMulti_7030_splits`) define three splits, each with 70 train
and 30 test videos per class; labels follow the sorted class names (see
`splits/video_splits`). Split sizes, the modality and the channel count come from the
converted data's dataset_info.json, class names from labels.txt. Create it with:

    python -m datasets.convert_videos --dataset_name=hmdb51 --video_dir=hmdb51 \\
        --splits_dir=testTrainMulti_7030_splits --output_dir=DIR [--split=1 --modality=rgb]
"""

from datasets.splits import video_splits
from datasets.video_dataset import VideoDatasetSpec

SPEC = VideoDatasetSpec(
    name='hmdb51', num_classes=51,
    source_flags=('--video_dir=<hmdb51 tree>', '--splits_dir=<testTrainMulti_7030_splits>'),
    read_lists=video_splits.read_hmdb_style_lists,
    lists_dir='the testTrainMulti_7030_splits directory (<class>_test_split<N>.txt)',
    label_description='Class index 0..50 among the sorted class names.')
NAME, get_split, convert_command, read_split_lists = SPEC.declaration()
NUM_CLASSES = SPEC.num_classes
