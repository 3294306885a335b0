"""One resolver for train, eval, export and predict: the names a config gives (network,
dataset, split, directory) turned into what they mean, with one wording for each mistake.

`names` looks up a network spec and a dataset split (naming the convert command that fits
the dataset when its records are missing) and decides once whether the data are images or
video clips and that the network takes them; `network` builds the network from one
`NetworkSettings` for training, evaluation and export; `sampling` says how evaluation and
export cut a video into clips; `run_record` reads a training run's flags.cfg back for eval
and export. Each entry's setup (`training.setup`, `evaluation.setup`) keeps only
its own rules. Imports `nets`, `datasets`, `core` and `deployment.precision`; nothing
below imports it.
"""
