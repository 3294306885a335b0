"""Any class-folder tree of videos (`<video_dir>/<class>/<video>`), converted to clip records.

The split comes from lists of the UCF101 form (`--splits_dir` with classInd.txt,
trainlist0N.txt, testlist0N.txt, N up to 99) or, without lists, from a seeded stratified
held-out fraction of each class's sources (`--group_by`, see `splits/source_groups`: clips
of one source never land in both splits). Split sizes, the modality and the channel count
come from the converted data's dataset_info.json, class names from labels.txt. Create it
with:

    python -m datasets.convert_videos --dataset_name=video_folder --video_dir=TREE \\
        --output_dir=DIR [--splits_dir=LISTS --split=1 |
                          --test_fraction=0.3 --seed=0 --group_by='_g(\\d+)_']
"""

from datasets.splits import source_groups, video_splits
from datasets.video_dataset import VideoDatasetSpec

SPEC = VideoDatasetSpec(
    name='video_folder', source_flags=('--video_dir=<class-folder tree>',),
    read_lists=video_splits.read_ucf_style_lists,
    lists_dir='lists of the UCF101 form (classInd.txt, trainlist0N.txt, testlist0N.txt)',
    list_splits=tuple(range(1, 100)),  # lists are numbered trainlist01 .. trainlist99
    label_description='Class index: classInd.txt order, or the sorted class folder names.',
    split_without_lists=source_groups.split_tree)
NAME, get_split, convert_command, read_split_lists = SPEC.declaration()
